"""The measuring engine behind :func:`workbench.bench`, :func:`workbench.compare`
and :func:`workbench.sweep`.

A :class:`Plan` says how long to warm up and how many calls to time (an exact
count, or as many as fit in a time budget); :func:`time_calls` warms up one
or more calls and times them in rounds, each call between two events
recorded on the stream the work goes to, so the times are device times, not
host times. Optional: an L2 flush before every call (a read of a buffer twice
the L2 size: reading evicts the inputs as a write would, but leaves no dirty
lines whose write-back would slow the timed call) and rotation over several
input sets. :func:`measure` is one callable from first (checked) call to
:class:`~workbench.benchmarking.result.BenchResult`.
"""
from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ArgumentValueError
from ..backends.contract import CompileOptions
from ..core.kernel import Kernel
from ..runtime.session import session
from . import history
from .checks import run_check, select_output
from .result import BenchResult

__all__ = ["Plan", "measure", "time_calls", "repeat_call", "new_result", "input_sets",
           "per_call_count", "default_name", "device_name"]

#: Timed rounds between two reads of the events (and checks of the budget).
_CHUNK = 100
#: Flush buffer size when the device does not report its L2 size.
_FALLBACK_FLUSH_BYTES = 64 * 2**20
#: Calls shorter than this (host wall time per call in the warm-up) get a hold
#: kernel before each timed call; it lasts _HOLD_S.
_HOLD_BELOW_S = 100e-6
_HOLD_S = 30e-6
_HOLD_SOURCE = r"""
extern "C" __global__ void workbench_hold(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""
_hold_kernels: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()

_event_pools: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()

#: Keyword arguments of a Kernel call that :func:`repeat_call` turns into a bare launch.
_LAUNCH_KEYWORDS = {"grid", "block", "shared_mem", "stream", "n"}


@dataclass(frozen=True)
class Plan:
    """How to time: untimed warm-up calls (at least ``warmup`` of them, for at
    least ``warmup_time`` seconds), then ``repeat`` timed calls or, when
    ``repeat`` is None, as many as fit in ``max_time`` seconds within
    ``min_repeat``..``max_repeat``; ``flush_l2`` reads a buffer twice the L2
    size before every call. The options are checked when the plan is made."""

    repeat: int | None = None
    max_time: float = 0.25
    min_repeat: int = 5
    max_repeat: int = 10_000
    warmup: int = 1
    warmup_time: float = 0.025
    flush_l2: bool = False

    def __post_init__(self):
        repeat = self.repeat
        if repeat is not None and (not isinstance(repeat, (int, np.integer)) or repeat < 1):
            raise ArgumentValueError(f"repeat={repeat!r}: give a positive number of timed calls, "
                                     "or None to time until max_time seconds have passed")
        if not self.max_time > 0:
            raise ArgumentValueError(
                f"max_time={self.max_time!r}: the time budget must be a positive "
                "number of seconds")
        if self.min_repeat < 1 or self.max_repeat < self.min_repeat:
            raise ArgumentValueError(
                f"min_repeat={self.min_repeat}, max_repeat={self.max_repeat}: need "
                "1 <= min_repeat <= max_repeat")
        if self.warmup < 1:
            raise ArgumentValueError(
                f"warmup={self.warmup}: at least one untimed call is made (it is "
                "also the call whose result is checked)")
        if self.warmup_time < 0:
            raise ArgumentValueError(f"warmup_time={self.warmup_time!r} must be >= 0 seconds")
        object.__setattr__(self, "flush_l2", bool(self.flush_l2))


# -- arguments ----------------------------------------------------------------------------

def input_sets(args: tuple, rotate) -> list[tuple]:
    """The positional argument tuples to cycle through: ``args`` alone, or the
    sets of ``rotate`` (then ``args`` must be empty)."""
    if rotate is None:
        return [tuple(args)]
    if args:
        raise ArgumentValueError(
            "give the arguments either positionally or as rotate=[...], not both: "
            "with rotate, each item is the full tuple of positional arguments")
    if isinstance(rotate, (str, bytes)) or not hasattr(rotate, "__len__") or len(rotate) == 0:
        raise ArgumentValueError(
            "rotate= takes a non-empty list of input sets, each a tuple of the "
            "positional arguments for one call")
    return [s if isinstance(s, tuple) else (s,) for s in rotate]


def per_call_count(value, what: str) -> float | None:
    """``bytes=``/``flops=`` as a float (None stays None); a clear error for
    anything that is not a finite number >= 0."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ArgumentValueError(f"{what}={value!r}: give a number ({what} per call)") from None
    if out < 0 or not math.isfinite(out):
        raise ArgumentValueError(f"{what}={value!r} must be a finite number >= 0")
    return out


def default_name(fn) -> str:
    """The label of a callable: its ``name`` (a Kernel), ``__name__``, the
    wrapped function of a ``functools.partial``, or its type's name."""
    for attr in ("name", "__name__"):
        value = getattr(fn, attr, None)
        if isinstance(value, str) and value:
            return value
    func = getattr(fn, "func", None)  # functools.partial
    if func is not None:
        return default_name(func)
    return type(fn).__name__


def device_name(b) -> str:
    """The name of backend ``b``'s device, or N/A."""
    try:
        return b.device_properties().name
    except Exception:  # a value the driver cannot give is N/A, not an error
        return "N/A"


# -- one callable, end to end ---------------------------------------------------------------

def measure(b, fn: Callable, inputs: list[tuple], kwargs: dict, *, name: str, plan: Plan,
            check=None, output=None, rtol=None, atol=None, bytes=None, flops=None,
            params=None, sweep: str | None = None, ceilings=None,
            record: bool = True) -> BenchResult:
    """Time ``fn(*inputs[i % len(inputs)], **kwargs)`` on backend ``b`` as
    ``plan`` says; ``check`` (see :func:`~workbench.benchmarking.checks.run_check`)
    is applied to the first call's result before anything is timed.

    ``ceilings`` (the device's measured ceilings, or None) are kept on the
    result for its "% of ceiling"; ``record`` keeps the result for the
    session's report."""
    stream = kwargs.get("stream")
    bytes, flops = per_call_count(bytes, "bytes"), per_call_count(flops, "flops")
    b.synchronize()
    # The first call goes through fn as the user wrote it (a Kernel logs it in
    # wb.timings()); its result is the one checked.
    produced = fn(*inputs[0], **kwargs)
    if check is not None:
        b.synchronize()
        run_check(check, select_output(produced, inputs[0], output),
                  rtol=rtol, atol=atol, what=name)
    del produced
    ((warmed, times),) = time_calls(b, [repeat_call(b, fn, inputs, kwargs)], stream, plan)
    result = new_result(b, name=name, times=times, warmup=warmed, plan=plan,
                        input_sets=len(inputs), bytes=bytes, flops=flops, params=params,
                        sweep=sweep, ceilings=ceilings)
    if record:
        history.record_result(result)
    return result


def new_result(b, *, name: str, times, warmup: int, plan: Plan, input_sets: int = 1,
               bytes=None, flops=None, params=None, sweep=None, ceilings=None) -> BenchResult:
    """A :class:`BenchResult` of times measured on backend ``b`` under ``plan``."""
    return BenchResult(name=name, times=times, backend=b.name, device=device_name(b),
                       simulated=bool(b.simulated), warmup=warmup, flush_l2=plan.flush_l2,
                       input_sets=input_sets, bytes=bytes, flops=flops,
                       params=dict(params or {}), sweep=sweep, ceilings=ceilings)


# -- the measurement ----------------------------------------------------------------------

def time_calls(b, calls: Sequence[Callable[[int], Any]], stream,
               plan: Plan) -> list[tuple[int, np.ndarray]]:
    """Warm up each of ``calls`` (``call(i)`` makes call number ``i``), then
    time them in rounds of one call of each, the order flipping every round
    (so drifts in clock or temperature hit all of them).

    The L2 flush (when the plan asks) or, for calls shorter than
    ``_HOLD_BELOW_S`` on a GPU, a hold kernel runs before every timed call,
    outside the events. Everything runs with the session's timing log
    paused, so warm-up calls and repeats stay out of ``wb.timings()``.
    Returns, for each call, the warm-up calls made (counting the checked
    first call) and the times in seconds.
    """
    flush = _make_flush(b, stream) if plan.flush_l2 else None
    with session().timing_log.paused():
        warm = [_warm_up(b, call, flush, plan) for call in calls]
        per_calls = [per_call for _, per_call in warm]
        before_each = flush
        if before_each is None and not b.simulated and min(per_calls) < _HOLD_BELOW_S:
            before_each = _make_hold(b, stream)
        times = _timed_rounds(b, calls, before_each, stream, sum(per_calls), plan)
    return [(done, t) for (done, _), t in zip(warm, times)]


def _warm_up(b, call, flush, plan: Plan) -> tuple[int, float]:
    """Untimed calls in doubling rounds (synchronised after each, so the host
    clock sees device time) until both the count and the time are reached.
    Returns the number of calls made (counting the checked first call) and
    the wall time per call of the last round, flush included."""
    done = 1  # the first call, made before
    start = time.perf_counter()
    per_call = None
    round_size = 1
    while done < plan.warmup or time.perf_counter() - start < plan.warmup_time or per_call is None:
        t0 = time.perf_counter()
        for j in range(round_size):
            if flush is not None:
                flush()
            call(done + j)
        b.synchronize()
        per_call = (time.perf_counter() - t0) / round_size
        done += round_size
        round_size *= 2
    return done, per_call


def _timed_rounds(b, calls, before_each, stream, per_round: float, plan: Plan) -> list[np.ndarray]:
    """Rounds of one timed call of each of ``calls`` in chunks of ``_CHUNK``
    rounds (events read after each chunk); ``before_each`` (an L2 flush or a
    hold, or None) runs before every call, outside the events."""
    n = len(calls)
    times: list[list[float]] = [[] for _ in calls]
    starts, ends = _events(b, n * _CHUNK)
    begin = time.perf_counter()
    while True:
        done = len(times[0])
        chunk = _next_chunk(done, begin, per_round, plan)
        if chunk == 0:
            break
        t0 = time.perf_counter()
        for j in range(chunk):
            i = done + j
            for k in (range(n) if i % 2 == 0 else reversed(range(n))):
                slot = n * j + k
                if before_each is not None:
                    before_each()
                b.record_event(starts[slot], stream)
                calls[k](i)
                b.record_event(ends[slot], stream)
        for k in range(n):
            times[k].extend(b.elapsed_ms(starts[n * j + k], ends[n * j + k]) * 1e-3
                            for j in range(chunk))
        per_round = (time.perf_counter() - t0) / chunk
    return [np.asarray(t, dtype=np.float64) for t in times]


def _next_chunk(done: int, begin: float, per_round: float, plan: Plan) -> int:
    """How many timed rounds to make next (at most ``_CHUNK``; 0: stop): the
    exact ``repeat`` count, or as many as fit in what is left of ``max_time``
    within ``min_repeat``..``max_repeat``."""
    if plan.repeat is not None:
        todo = plan.repeat - done
    else:
        elapsed = time.perf_counter() - begin
        if done >= plan.max_repeat or (done >= plan.min_repeat and elapsed >= plan.max_time):
            return 0
        by_time = math.ceil((plan.max_time - elapsed) / max(per_round, 1e-7))
        todo = min(max(by_time, plan.min_repeat - done, 1), plan.max_repeat - done)
    return max(0, min(todo, _CHUNK))


def _events(b, n: int) -> tuple[list, list]:
    """``n`` start and ``n`` end events, reused across benchmarks of one backend
    (the backend interface has no way to destroy events)."""
    try:
        pool = _event_pools.setdefault(b, [])
    except TypeError:  # a backend that cannot be weakly referenced
        pool = []
    while len(pool) < 2 * n:
        pool.append(b.create_event())
    return pool[:n], pool[n:2 * n]


def _make_flush(b, stream) -> Callable[[], None]:
    """A function that reads a buffer twice the L2 size.

    Reading evicts the kernel's inputs as well as writing would, but leaves
    no dirty lines behind whose write-back would slow the timed call."""
    l2 = b.device_properties().l2_cache_bytes
    nbytes = 2 * l2 if l2 else _FALLBACK_FLUSH_BYTES
    buffer = b.allocate((nbytes // 4,), np.int32)
    buffer.fill(1)
    total = b.allocate((), np.int32)
    use_stream = stream if stream is not None and hasattr(stream, "__enter__") else None

    def flush():
        if use_stream is None:
            buffer.sum(out=total)
        else:
            with use_stream:
                buffer.sum(out=total)
    return flush


def _make_hold(b, stream) -> Callable[[], None] | None:
    """A function that enqueues a one-thread spin of about ``_HOLD_S`` seconds.

    Without it, a short call starts on an idle GPU: the start event completes
    as soon as it is recorded and the time also counts the host's launch
    overhead up to the kernel. Behind the spin, the start event and the call
    are queued before the GPU reaches them, so only device time is measured
    (nvbench's blocking kernel does the same).
    """
    function = _hold_kernels.get(b)
    if function is None:
        try:
            module = b.compile(_HOLD_SOURCE, CompileOptions(), ["workbench_hold"])
            function = module.get_function("workbench_hold")
        except Exception:  # no hold: times then include some launch overhead
            return None
        _hold_kernels[b] = function
    clock_khz = b.device_properties().clock_khz or 1_500_000
    cycles = np.int64(clock_khz * 1e3 * _HOLD_S)
    one = (1, 1, 1)

    def hold():
        b.launch(function, one, one, (cycles,), 0, stream)
    return hold


def repeat_call(b, fn, inputs: list[tuple], kwargs: dict) -> Callable[[int], Any]:
    """``call(i)`` runs fn on input set ``i % len(inputs)``.

    For a :class:`workbench.Kernel` the arguments are checked and converted
    and the launch configuration worked out once, and each repeat is a bare
    backend launch: the per-call checks and the timing log's two events and
    record (``wb.timings()``) stay out of the measurement, and thousands of
    repeats do not bury the user's own launches in that log.
    """
    n_sets = len(inputs)
    if isinstance(fn, Kernel) and set(kwargs) <= _LAUNCH_KEYWORDS:
        shared_mem = int(kwargs.get("shared_mem", 0))
        stream = kwargs.get("stream")
        if stream is None:
            stream = b.current_stream()
        grid, block = fn.launch_config(kwargs.get("grid"), kwargs.get("block"), shared_mem,
                                       kwargs.get("n"))
        converted = [fn.convert_args(args) for args in inputs]
        launcher = b.make_launcher(fn.function, fn.signature.params)

        def call(i: int):
            launcher(grid, block, converted[i % n_sets], shared_mem, stream)
        return call

    def call(i: int):
        return fn(*inputs[i % n_sets], **kwargs)
    return call
