"""NVTX ranges around launches (and cells), for Nsight Systems and Nsight Compute.

Zero cost when no profiler is attached: the launch path is not touched at
all. Only when a tool is injected (Nsight sets ``NVTX_INJECTION64_PATH`` in
the profiled process), when the workbench's own profiling child runs
(``WORKBENCH_PROFILING_CHILD``) or when :func:`enable` is called, the timing
log's ``timed_launch`` is replaced, on that one log instance, by a wrapper
that pushes a range named after the kernel. :func:`disable` removes the
wrapper again. The ``nvtx`` package (the ``[profiling]`` extra) is imported
only then; without it the ranges are left out and everything else works.
"""
from __future__ import annotations

import functools
import os

#: The NVTX domain of every range the workbench pushes.
DOMAIN = "workbench"

_state = {"domain": None, "log": None, "reason": None}


def tool_attached() -> bool:
    """True when an NVTX tool (Nsight Systems, Nsight Compute) is injected
    into this process, or the workbench's profiling child runs here."""
    return bool(os.environ.get("NVTX_INJECTION64_PATH") or os.environ.get("NVTX_INJECTION32_PATH")
                or os.environ.get("WORKBENCH_PROFILING_CHILD") or os.environ.get("WORKBENCH_NVTX"))


def enabled() -> bool:
    """Whether launches (and cells) are wrapped in NVTX ranges now."""
    return _state["domain"] is not None


def _domain():
    try:
        import nvtx  # lazy: optional extra [profiling], only under a profiler
    except ImportError:
        _state["reason"] = ("the 'nvtx' package is not installed (pip install "
                            "'cuda-workbench[profiling]'): no NVTX ranges")
        return None
    return nvtx.get_domain(DOMAIN)


def enable(timing_log) -> bool:
    """Wrap every launch logged by ``timing_log`` in an NVTX range named after
    the kernel; returns False (with :func:`reason` saying why) when the
    ``nvtx`` package is missing. Idempotent."""
    if _state["log"] is timing_log and enabled():
        return True
    disable()
    domain = _domain()
    if domain is None:
        return False
    launch = type(timing_log).timed_launch.__get__(timing_log)
    push, pop = domain.push_range, domain.pop_range
    attributes = functools.lru_cache(maxsize=1024)(lambda name: domain.get_event_attributes(message=name))

    @functools.wraps(launch)
    def timed_launch(b, name, *args, **kwargs):
        push(attributes(name))
        try:
            launch(b, name, *args, **kwargs)
        finally:
            pop()

    # an instance attribute: Kernel.__call__ finds it before the class's method
    timing_log.timed_launch = timed_launch
    _state.update(domain=domain, log=timing_log, reason=None)
    return True


def disable() -> None:
    """Remove the launch ranges: the launch path is the plain one again."""
    log = _state["log"]
    if log is not None:
        log.__dict__.pop("timed_launch", None)
    _state.update(domain=None, log=None)


def enable_if_profiled(timing_log) -> bool:
    """:func:`enable` when :func:`tool_attached`; otherwise nothing (one
    environment lookup)."""
    if not tool_attached():
        return False
    return enable(timing_log)


def reason() -> str | None:
    """Why ranges are off although asked for (the ``nvtx`` package missing)."""
    return _state["reason"]


def push(message: str) -> None:
    """Open a range (a cell's) when ranges are on; nothing otherwise."""
    domain = _state["domain"]
    if domain is not None:
        domain.push_range(domain.get_event_attributes(message=message))


def pop() -> None:
    """Close the range opened by :func:`push` when ranges are on."""
    domain = _state["domain"]
    if domain is not None:
        domain.pop_range()
