"""``wb.bench``: time any callable that launches GPU work.

Each timed call sits between two events recorded on the stream the work goes
to, so the times are device times, not host times; warm-up calls come first,
then repeats until a count or a time budget is met. Optional: an L2 flush
before every call (a read of a buffer twice the L2 size: reading evicts the
inputs as a write would, but leaves no dirty lines whose write-back would slow
the timed call), rotation over several input sets, and a check of the first
call's result against a reference.
"""
from __future__ import annotations

import math
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from .checks import ResultMismatch, run_check, select_output  # noqa: F401  (ResultMismatch re-exported)
from .result import BenchResult

__all__ = ["bench", "BenchResult", "ResultMismatch"]

#: Timed calls between two reads of the events (and checks of the budget).
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


def bench(fn: Callable, *args, name: str | None = None, repeat: int | None = None,
          max_time: float = 0.25, min_repeat: int = 5, max_repeat: int = 10_000,
          warmup: int = 1, warmup_time: float = 0.025, flush_l2: bool = False,
          rotate: Sequence | None = None, check=None, output=None,
          rtol: float | None = None, atol: float | None = None,
          bytes: float | None = None, flops: float | None = None,
          record: bool = True, **kwargs) -> BenchResult:
    """Time ``fn(*args, **kwargs)``, a callable that launches GPU work.

    Works with a :class:`workbench.Kernel` call (``wb.bench(k, x, y, n,
    grid=g, block=b)``), CuPy, Numba or Triton: anything that enqueues work
    on the current stream (or on ``stream=`` when that is one of ``kwargs``).

    Parameters
    ----------
    name : label for tables and plots (default: the kernel's or function's name).
    repeat : exact number of timed calls. When None (default), calls are timed
        until ``max_time`` seconds have passed, at least ``min_repeat`` and at
        most ``max_repeat`` of them.
    warmup, warmup_time : untimed calls first: at least ``warmup`` of them and
        for at least ``warmup_time`` seconds (clocks ramp up, caches fill, lazy
        compilation happens).
    flush_l2 : before every timed call, read a buffer twice the size of the
        device's L2 cache, so each call starts with a cold cache. A read, not
        a write: a write leaves dirty lines whose write-back lands in the timed
        call (measured on an H200: +3.6% on a 960 MiB scan with a write flush,
        -0.4% with a read flush; a 30 MiB case still +41%).
    rotate : several input sets, each a tuple of positional arguments used
        instead of ``args``; call ``i`` uses set ``i % len(rotate)``.
    check : the expected result (array), or a function of the result returning
        the expected array (or True/False). Applied to the first call's
        result before anything is timed; a mismatch raises
        :class:`~workbench.benchmarking.checks.ResultMismatch`.
    output : which argument holds the result when ``fn`` returns nothing
        (an index into the positional arguments, or the array itself).
    rtol, atol : tolerances of the check (default by dtype: 1e-4/1e-5 for
        float32, 1e-7/1e-9 for float64, 1e-2 for 16-bit floats, exact for integers).
    bytes, flops : bytes moved and floating-point operations per call; they
        give GB/s and GFLOP/s and place the result on a roofline.
    record : keep the result for :func:`workbench.report` (default True).
    **kwargs : passed on to ``fn``.

    Calls shorter than 100 µs get a one-thread spin kernel (30 µs) queued
    before each timed call, so that the GPU is busy while the host records
    the start event and launches: the times are then device times without
    the host's launch overhead. An L2 flush plays the same role.

    Returns
    -------
    BenchResult with the raw times in seconds. On the simulator the times are
    CPU wall-clock times and the result says so (``simulated=True``).
    """
    input_sets = _input_sets(args, rotate)
    _validate(repeat=repeat, max_time=max_time, min_repeat=min_repeat, max_repeat=max_repeat,
              warmup=warmup, warmup_time=warmup_time)
    label = name or _default_name(fn)
    return run_benchmark(fn, input_sets, kwargs, name=label, repeat=repeat, max_time=max_time,
                         min_repeat=min_repeat, max_repeat=max_repeat, warmup=warmup,
                         warmup_time=warmup_time, flush_l2=flush_l2, check=check,
                         output=output, rtol=rtol, atol=atol, bytes=_number(bytes, "bytes"),
                         flops=_number(flops, "flops"), record=record)


def run_benchmark(fn: Callable, input_sets: list[tuple], kwargs: dict, *, name: str,
                  repeat, max_time, min_repeat, max_repeat, warmup, warmup_time,
                  flush_l2, check=None, output=None, rtol=None, atol=None,
                  bytes=None, flops=None, record=True, params=None,
                  sweep: str | None = None) -> BenchResult:
    """:func:`bench` after argument checking (also used by sweeps and compare)."""
    from ..runtime.session import backend as active_backend
    b = active_backend()
    stream = kwargs.get("stream")
    bytes, flops = _number(bytes, "bytes"), _number(flops, "flops")

    b.synchronize()
    # The first call goes through fn as the user wrote it (a Kernel logs it in
    # wb.timings()); its result is the one checked.
    produced = fn(*input_sets[0], **kwargs)
    if check is not None:
        b.synchronize()
        run_check(check, select_output(produced, input_sets[0], output),
                  rtol=rtol, atol=atol, what=name)
    del produced
    call = _repeat_call(fn, input_sets, kwargs, b)
    (warmed,), times = measure_repeats(
        b, [call], stream, flush_l2=flush_l2, warmup=warmup, warmup_time=warmup_time,
        timed=lambda before_each, per_calls: _timed_repeats(
            b, call, before_each, stream, per_calls[0], repeat=repeat, max_time=max_time,
            min_repeat=min_repeat, max_repeat=max_repeat))
    props = _device_name(b)
    result = BenchResult(name=name, times=times, backend=b.name, device=props,
                         simulated=bool(b.simulated), warmup=warmed, flush_l2=bool(flush_l2),
                         input_sets=len(input_sets), bytes=bytes, flops=flops,
                         params=dict(params or {}), sweep=sweep)
    if record:
        from . import history
        history.record_result(result)
    return result


# -- the measurement ------------------------------------------------------------------

def measure_repeats(b, calls: Sequence[Callable[[int], Any]], stream, *, flush_l2: bool,
                    warmup: int, warmup_time: float,
                    timed: Callable[[Callable[[], None] | None, list[float]], Any]):
    """Warm up each of ``calls``, then return ``timed(before_each, per_calls)``.

    What :func:`bench` and :func:`workbench.compare` share: the L2 flush
    (when ``flush_l2``) or, for calls shorter than ``_HOLD_BELOW_S`` on a GPU,
    a hold kernel becomes ``before_each``; ``per_calls`` are the host wall
    times per call of each warm-up. Everything runs with the session's timing
    log paused, so warm-up calls and repeats stay out of ``wb.timings()``.
    Returns (warm-up calls made for each of ``calls``, what ``timed`` returned).
    """
    from ..runtime.session import session
    flush = _make_flush(b, stream) if flush_l2 else None
    with session().timing_log.paused():
        warm = [_warm_up(b, call, flush, warmup, warmup_time) for call in calls]
        per_calls = [per_call for _, per_call in warm]
        before_each = flush
        if before_each is None and not b.simulated and min(per_calls) < _HOLD_BELOW_S:
            before_each = _make_hold(b, stream)
        measured = timed(before_each, per_calls)
    return [done for done, _ in warm], measured


def _warm_up(b, call, flush, warmup: int, warmup_time: float) -> tuple[int, float]:
    """Untimed calls in doubling rounds (synchronised after each, so the host
    clock sees device time) until both the count and the time are reached.
    Returns the number of calls made (counting the checked first call) and
    the wall time per call of the last round, flush included."""
    done = 1  # the first call, made before
    start = time.perf_counter()
    per_call = None
    round_size = 1
    while done < warmup or time.perf_counter() - start < warmup_time or per_call is None:
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


def _timed_repeats(b, call, before_each, stream, per_call: float, *, repeat, max_time,
                   min_repeat, max_repeat) -> np.ndarray:
    """Timed calls in chunks of ``_CHUNK`` (events read after each chunk);
    ``before_each`` (an L2 flush or a hold, or None) runs before every call,
    outside the events."""
    times: list[float] = []
    starts, ends = _events(b, _CHUNK)
    begin = time.perf_counter()
    while True:
        done = len(times)
        chunk = next_chunk(done, begin, per_call, repeat=repeat, max_time=max_time,
                           min_repeat=min_repeat, max_repeat=max_repeat, chunk=_CHUNK)
        if chunk == 0:
            break
        t0 = time.perf_counter()
        for j in range(chunk):
            if before_each is not None:
                before_each()
            b.record_event(starts[j], stream)
            call(done + j)
            b.record_event(ends[j], stream)
        times.extend(b.elapsed_ms(starts[j], ends[j]) * 1e-3 for j in range(chunk))
        per_call = (time.perf_counter() - t0) / chunk
    return np.asarray(times, dtype=np.float64)


def next_chunk(done: int, begin: float, per_call: float, *, repeat, max_time, min_repeat,
               max_repeat, chunk: int) -> int:
    """How many timed calls to make next (at most ``chunk``; 0: stop): the exact
    ``repeat`` count, or as many as fit in what is left of ``max_time`` within
    ``min_repeat``..``max_repeat``."""
    if repeat is not None:
        todo = repeat - done
    else:
        elapsed = time.perf_counter() - begin
        if done >= max_repeat or (done >= min_repeat and elapsed >= max_time):
            return 0
        by_time = math.ceil((max_time - elapsed) / max(per_call, 1e-7))
        todo = min(max(by_time, min_repeat - done, 1), max_repeat - done)
    return max(0, min(todo, chunk))


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
    from ..backends.base import CompileOptions
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


def _repeat_call(fn, input_sets: list[tuple], kwargs: dict, b) -> Callable[[int], Any]:
    """``call(i)`` runs fn on input set ``i % len(input_sets)``.

    For a :class:`workbench.Kernel` the arguments are checked and converted
    and the launch configuration worked out once, and each repeat is a bare
    backend launch: the per-call checks and the timing log's two events and
    record (``wb.timings()``) stay out of the measurement, and thousands of
    repeats do not bury the user's own launches in that log.
    """
    from ..core.kernel import Kernel
    n_sets = len(input_sets)
    if isinstance(fn, Kernel) and set(kwargs) <= {"grid", "block", "shared_mem", "stream", "n"}:
        shared_mem = int(kwargs.get("shared_mem", 0))
        stream = kwargs.get("stream")
        if stream is None:
            stream = b.current_stream()
        grid, block = fn.launch_config(kwargs.get("grid"), kwargs.get("block"), shared_mem,
                                       kwargs.get("n"))
        converted = [fn.convert_args(args) for args in input_sets]
        launcher = b.make_launcher(fn.function, fn.signature.params)

        def call(i: int):
            launcher(grid, block, converted[i % n_sets], shared_mem, stream)
        return call

    def call(i: int):
        return fn(*input_sets[i % n_sets], **kwargs)
    return call


# -- arguments --------------------------------------------------------------------------

def _input_sets(args: tuple, rotate) -> list[tuple]:
    if rotate is None:
        return [tuple(args)]
    if args:
        raise ValueError("give the arguments either positionally or as rotate=[...], not both: "
                         "with rotate, each item is the full tuple of positional arguments")
    if isinstance(rotate, (str, bytes)) or not hasattr(rotate, "__len__") or len(rotate) == 0:
        raise ValueError("rotate= takes a non-empty list of input sets, each a tuple of the "
                         "positional arguments for one call")
    return [s if isinstance(s, tuple) else (s,) for s in rotate]


def _validate(*, repeat, max_time, min_repeat, max_repeat, warmup, warmup_time) -> None:
    if repeat is not None and (not isinstance(repeat, (int, np.integer)) or repeat < 1):
        raise ValueError(f"repeat={repeat!r}: give a positive number of timed calls, "
                         "or None to time until max_time seconds have passed")
    if not max_time > 0:
        raise ValueError(f"max_time={max_time!r}: the time budget must be a positive number of seconds")
    if min_repeat < 1 or max_repeat < min_repeat:
        raise ValueError(f"min_repeat={min_repeat}, max_repeat={max_repeat}: need "
                         "1 <= min_repeat <= max_repeat")
    if warmup < 1:
        raise ValueError(f"warmup={warmup}: at least one untimed call is made (it is also "
                         "the call whose result is checked)")
    if warmup_time < 0:
        raise ValueError(f"warmup_time={warmup_time!r} must be >= 0 seconds")


def _number(value, what: str) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}={value!r}: give a number ({what} per call)") from None
    if out < 0 or not math.isfinite(out):
        raise ValueError(f"{what}={value!r} must be a finite number >= 0")
    return out


def _default_name(fn) -> str:
    for attr in ("name", "__name__"):
        value = getattr(fn, attr, None)
        if isinstance(value, str) and value:
            return value
    func = getattr(fn, "func", None)  # functools.partial
    if func is not None:
        return _default_name(func)
    return type(fn).__name__


def _device_name(b) -> str:
    try:
        return b.device_properties().name
    except Exception:  # a value the driver cannot give is N/A, not an error
        return "N/A"
