"""``wb.bench``: time any callable that launches GPU work.

The measuring is :mod:`.engine`'s (warm-up, repeats to a count or a time
budget, device events, L2 flush, input rotation, the check of the first
call's result); this module is its front: argument checking, the label, and
the device's measured ceilings kept on the result.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..core.adapters import as_launchable
from ..errors import ArgumentTypeError
from ..runtime.session import backend as active_backend
from . import ceilings as ceilings_module
from .engine import Plan, default_name, input_sets, measure, per_call_count
from .result import BenchResult

__all__ = ["bench", "BenchResult"]


def bench(fn: Callable, *args, name: str | None = None, repeat: int | None = None,
          max_time: float = 0.25, min_repeat: int = 5, max_repeat: int = 10_000,
          warmup: int = 1, warmup_time: float = 0.025, flush_l2: bool = False,
          rotate: Sequence | None = None, check=None, output=None,
          rtol: float | None = None, atol: float | None = None,
          bytes: float | None = None, flops: float | None = None,
          record: bool = True, **kwargs) -> BenchResult:
    """Time ``fn(*args, **kwargs)``, a callable that launches GPU work.

    Works with a :class:`workbench.Kernel` call (``wb.bench(k, x, y, n,
    grid=g, block=b)``), a Numba or Triton kernel (``wb.python_kernel(fn)``, or the
    ``numba.cuda.jit`` / ``triton.jit`` function itself once
    ``workbench.languages`` is loaded), CuPy: anything that enqueues work
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
    fn = as_launchable(fn)  # a Numba or Triton kernel: the workbench's wrapper
    if not callable(fn):
        raise ArgumentTypeError(
            f"wb.bench() times a callable (a kernel, a function that launches "
            f"work), got {type(fn).__name__}: wb.bench(kernel, *args, grid=..., "
            f"block=...) or wb.bench(lambda: ...)")
    inputs = input_sets(args, rotate)
    plan = Plan(repeat=repeat, max_time=max_time, min_repeat=min_repeat, max_repeat=max_repeat,
                warmup=warmup, warmup_time=warmup_time, flush_l2=flush_l2)
    label = name or default_name(fn)
    bytes, flops = per_call_count(bytes, "bytes"), per_call_count(flops, "flops")
    b = active_backend()
    roof = ceilings_module.for_results(b) if bytes is not None or flops is not None else None
    return measure(b, fn, inputs, kwargs, name=label, plan=plan, check=check, output=output,
                   rtol=rtol, atol=atol, bytes=bytes, flops=flops, ceilings=roof, record=record)
