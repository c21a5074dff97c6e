"""The process-wide state of the workbench: the active backend, the compiled
modules, the timing log and the notebook cell being run.

Nothing happens at import: the backend is chosen on first use.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..backends import Backend, canonical_name, check_options, choose_backend, create_backend
from ..present.frames import readable
from . import nvtx
from .timing import TimingLog


@dataclass
class Session:
    backend: Backend | None = None
    reason: str = ""                          # why this backend was chosen
    modules: dict = field(default_factory=dict)  # name -> workbench.core.compiler.Module
    cell: int | None = None                   # IPython execution count (set by the magics)
    timing_log: TimingLog = field(init=False)

    def __post_init__(self):
        self.timing_log = TimingLog(self)


_SESSION = Session()
_LOCK = threading.Lock()


def session() -> Session:
    """The workbench's state for this process."""
    return _SESSION


def backend(name: str | Backend | None = None, **options) -> Backend:
    """The active backend, chosen on first use (GPU through CuPy when one is
    visible, else the CPU simulator). ``backend("simulator")`` (a name, or a
    Backend instance) or ``backend(checked=True)`` switches or reconfigures
    it; ``with backend("simulator"):`` switches for the block and then puts
    the previous backend back (options changed in place on the same backend
    stay changed).

    ``repr()`` of the result says which backend runs and why.
    """
    if name is not None or options:
        previous, reason = _SESSION.backend, _SESSION.reason
        b = use_backend(name or (previous.name if previous else None), **options)
        _SWITCHES.last = (b, previous, reason)  # for a `with` statement around this call
        return b
    _SWITCHES.last = None
    if _SESSION.backend is None:
        with _LOCK:
            if _SESSION.backend is None:
                name, reason = choose_backend()
                _install(_instance(name, {}), reason)
    return _SESSION.backend


#: One instance per (backend name, options): switching back and forth reuses
#: it (a simulator instance owns a worker process and a large address range).
_INSTANCES: dict = {}


def _instance(name: str, options: dict) -> Backend:
    key = (canonical_name(name), tuple(sorted(options.items())))
    b = _INSTANCES.get(key)
    if b is None:
        b = _INSTANCES[key] = create_backend(name, **options)
    return b


def use_backend(which: str | Backend | None, **options) -> Backend:
    """Make ``which`` (a name, or a Backend instance) the active backend;
    the same name and options give the same instance."""
    if isinstance(which, Backend):
        _install(which, "chosen by the user")
    elif which is None:
        name, reason = choose_backend()
        _install(_instance(name, options), reason)
    else:
        current = _SESSION.backend
        same = current is not None and canonical_name(which) == current.name
        if same and options:
            check_options(current.configure, current.name, options)
        if same and current.configure(**options):
            # the same backend with other options: changed in place, so arrays,
            # modules and kernels made before keep working
            _INSTANCES[(current.name, tuple(sorted(options.items())))] = current
            _install(current, "chosen by the user")
        else:
            b = _instance(which, options)
            if options:
                # an instance changed in place since it was cached under these options
                # (several option sets share it): give it these options again
                b.configure(**options)
            _install(b, "chosen by the user")
    return _SESSION.backend


def _install(b: Backend, reason: str) -> None:
    old = _SESSION.backend
    b.reason = reason
    _SESSION.backend = b
    _SESSION.reason = reason
    if old is not None and old is not b:
        _SESSION.timing_log.resolve_all(old)
    # NVTX ranges around launches only under a profiler (an environment lookup otherwise)
    nvtx.enable_if_profiled(_SESSION.timing_log)
    for listener in list(_BACKEND_LISTENERS):
        listener(b)


def active_backend_or_none() -> Backend | None:
    """The active backend without choosing one."""
    return _SESSION.backend


def restore_backend(previous: Backend | None) -> None:
    """Put back a backend saved with :func:`active_backend_or_none`."""
    if previous is None:
        _SESSION.backend = None
    else:
        _install(previous, _SESSION.reason)


#: Per thread: ``last``, the switch :func:`backend` made just now (the new
#: backend, the one before and its reason), which a ``with`` statement around
#: the call takes; ``saved``, what each open ``with`` block puts back.
_SWITCHES = threading.local()


def _enter(b: Backend) -> Backend:
    """``with backend(name):`` (or ``with b:``): ``b`` active for the block."""
    last = getattr(_SWITCHES, "last", None)
    _SWITCHES.last = None
    if last is not None and last[0] is b:
        saved = last[1:]
    else:
        saved = (_SESSION.backend, _SESSION.reason)
        if _SESSION.backend is not b:
            use_backend(b)
    if not hasattr(_SWITCHES, "saved"):
        _SWITCHES.saved = []
    _SWITCHES.saved.append(saved)
    return b


def _exit(b: Backend, *exc) -> None:
    previous, reason = _SWITCHES.saved.pop()
    if previous is None:
        restore_backend(None)
    elif _SESSION.backend is not previous:
        _install(previous, reason)


# The session owns which backend is active, so it gives every backend the
# context-manager form (the backends know nothing of the session).
Backend.__enter__ = _enter
Backend.__exit__ = _exit


#: Callables run with the new backend whenever it changes (memory tracking
#: re-attaches its listener here).
_BACKEND_LISTENERS: list = []


def on_backend_change(callback) -> None:
    """Call ``callback(backend)`` whenever the active backend changes."""
    if callback not in _BACKEND_LISTENERS:
        _BACKEND_LISTENERS.append(callback)


#: The columns ``wb.timings()`` shows by default.
TIMINGS_SHOWN = ("kernel", "kind", "grid", "block", "ms", "stream", "cell", "time", "bytes", "gbps")


def timings(kernel=None, *, all: bool = False):  # noqa: A002 (the documented name)
    """Every kernel launch, copy, memset and graph launch so far as a
    DataFrame (kernel, grid, block, shared_mem, ms, cell, time, backend,
    language, kind, stream, device, bytes, gbps, start_ms); ``timings(kernel)``
    keeps one kernel (a :class:`~workbench.Kernel` or its name). Reading it
    waits for launches still running. On the simulator, ``ms`` is CPU
    wall-clock time.

    A notebook shows it for reading (:mod:`workbench.present.frames`): the
    durations in µs or ms, clock times, one ``N/A``, and ten columns at most
    (kernel, kind, grid, block, ms, stream, cell, time, bytes, gbps; those with
    no value left out); ``all=True`` shows every column. The data are the
    same either way; ``.to_pandas()`` gives the plain DataFrame.
    """
    frame = _SESSION.timing_log.to_pandas(kernel)
    if all:
        return readable(frame)
    return readable(frame, shown=TIMINGS_SHOWN, hide_empty=True,
                    more="wb.timings(all=True) shows them")
