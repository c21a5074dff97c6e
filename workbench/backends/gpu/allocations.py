"""Device allocations and frees seen through an allocator of our own.

CuPy's memory hooks cost about 2.7 µs per allocation and free on their own
(six Python hook methods called with keyword arguments), so the GPU backend
does not use them. While someone listens, :class:`AllocationWatcher` is
CuPy's allocator (``cupy.cuda.set_allocator``): it takes each block from the
allocator that was installed before (normally the default ``MemoryPool``),
hands CuPy a :class:`_WatchedMemory` holding that block and tells the
listeners; when CuPy drops the memory object its ``__del__`` tells the
listeners of the free, and only then does the block go back to the pool, so a
listener hears of a free before any allocation that reuses the address.

Why a Python subclass of ``cupy.cuda.memory.BaseMemory`` and not
``PythonFunctionAllocator``: the latter's memory objects call their *free*
from a Cython ``__dealloc__``, and when such an object is part of a garbage
cycle the collector clears its free function first (its ``tp_clear``): the
free then fails ("Exception ignored ... 'NoneType' object is not callable")
and the block is never given back. A ``__del__`` runs before any clearing
(PEP 442), cycle or not.

What follows from this design (checked against CuPy 14's ``memory.pyx``):

- The pool does the work as before: ``used_bytes()``, ``total_bytes()``,
  limits and out-of-memory behaviour (``OutOfMemoryError`` raised by the pool,
  after it has freed its cache and collected garbage) are CuPy's own.
- ``set_allocator`` is process-wide: allocations of every thread are seen,
  except those of a thread inside ``cupy.cuda.using_allocator`` (its own
  allocator). Allocations on a device other than the one current when
  listening started are served but not reported (the tracker follows one
  device's pool).
- Memory allocated before the first listener came is the pool's own: its
  free reaches no allocator and is not reported (the tracker re-reads the
  pool for it, see :mod:`workbench.memory.tracker`). Memory allocated through
  the watcher is freed through it whenever it goes, listeners or not.
- When the last listener goes, the allocator installed before is put back
  exactly (the same object), unless someone replaced ours meanwhile: theirs
  is left in place. Theirs may call ours (a wrapper around the allocator
  they found): when tracking starts again, ours goes over theirs and takes
  blocks from the pool as before (wrapping theirs would recurse without end),
  and theirs is put back when tracking stops.

The allocator in C (``native/allocations.c``, built once per machine by
:mod:`..native_build`; ``WORKBENCH_NATIVE_ALLOCATIONS=0`` turns it off,
:func:`unavailable_reason` says why it is not used) does the same as
:meth:`AllocationWatcher._malloc` and :class:`_WatchedMemory` without a
Python frame: its memory objects are a C subclass of ``BaseMemory`` (no
garbage-collector support, like ``BaseMemory`` itself: never cleared, never
in a cycle) whose dealloc reports the free and then releases the block. A
listener whose ``on_alloc`` carries a ``native_sink`` attribute (the memory
tracker's) is not called at all: the C allocator appends the listener's raw
records itself, in the format and with the frames its Python callbacks
would give (see allocations.c); other listeners are called from C.
"""
from __future__ import annotations

import threading

import cupy
from cupy.cuda import memory as _memory
from cupy.cuda import runtime as _runtime

from ...errors import WorkbenchError
from .. import native_build
from . import NATIVE_DIR

SOURCE = NATIVE_DIR / "allocations.c"
_MemoryPointer = _memory.MemoryPointer
_native_reason: str | None = None


def _native_allocator():
    """A new C allocator (``_wb_allocations.Allocator``), or None where the C
    module cannot be built or loaded here (:func:`unavailable_reason`)."""
    global _native_reason
    try:
        built, _native_reason = native_build.build(
            SOURCE, "_wb_allocations", "WORKBENCH_NATIVE_ALLOCATIONS")
    except Exception as exc:  # noqa: BLE001 -- tracking must work regardless: the Python watcher
        built, _native_reason = None, f"the build failed ({type(exc).__name__}: {exc})"
    if built is None:
        return None
    try:
        return built.Allocator(built.memory_type(_memory.BaseMemory, _MemoryPointer))
    except Exception as exc:  # noqa: BLE001 -- a CuPy whose classes differ: the Python watcher
        _native_reason = f"CuPy's memory classes do not fit the C allocator ({exc})"
        return None


def unavailable_reason() -> str | None:
    """Why the watcher runs in Python (None: in C, or not decided yet)."""
    return _native_reason


def implementation() -> str:
    """Which allocator the watcher installs: ``"C"``, ``"Python (why)"``, or
    ``"not decided yet"`` before the first listener."""
    native = watcher()._native
    if native is False:
        return "not decided yet"
    return "C (native/allocations.c)" if native else f"Python ({_native_reason})"


def _fan_out(callbacks: list):
    """One callable calling each of ``callbacks`` (None for none)."""
    if not callbacks:
        return None
    if len(callbacks) == 1:
        return callbacks[0]
    callbacks = tuple(callbacks)

    def call(ptr, size):
        for callback in callbacks:
            try:
                callback(ptr, size)
            except Exception:  # one listener must not keep the others from hearing
                pass
    return call


class _WatchedMemory(_memory.BaseMemory):
    """A block of the wrapped allocator, as CuPy's memory object while the
    watcher hands it out (``ptr``, ``size``, ``device_id`` are the block's)."""

    __slots__ = ("_block",)

    def __del__(self):
        try:
            watcher = _WATCHER
            on_free = watcher._on_free
            if on_free is not None and self.device_id == watcher._device:
                on_free(self.ptr, self.size)
        except Exception:  # a listener must not break freeing (nor the interpreter's exit)
            pass
        self._block = None   # back to the pool only now, after the listeners heard


class AllocationWatcher:
    """CuPy's allocator while listeners are registered (one per process: CuPy's
    allocator is process-wide)."""

    def __init__(self):
        self._listeners: list[tuple] = []
        self._on_alloc = None               # read on every allocation: one callable or None
        self._on_free = None
        self._device = -1                   # the device whose allocations are reported
        self._wrapped = None                # the allocator we take blocks from (the one before us)
        self._installed = None              # the allocator given to set_allocator
        self._replaced = None               # what set_allocator replaced (put back at the end)
        self._covered = False               # someone's allocator went over ours while listening
        self._native = False                # the C allocator; False: not looked for yet
        self._lock = threading.Lock()       # add/remove only; never taken on the hot path

    # -- the hot path: called by CuPy (memory.alloc) ------------------------------------
    def _malloc(self, size: int):
        block = self._wrapped(size)          # raises CuPy's OutOfMemoryError as before
        ptr = block.ptr
        if not ptr:                          # size 0: nothing allocated, nothing to report
            return block
        mem = _WatchedMemory()
        mem.ptr = ptr
        mem.size = nbytes = block.mem.size   # the pool's block (rounded up), as used_bytes() counts it
        mem.device_id = device = block.device_id
        mem._block = block
        on_alloc = self._on_alloc
        if on_alloc is not None and device == self._device:
            try:
                on_alloc(ptr, nbytes)
            except Exception:  # a listener must not break allocating
                pass
        return _MemoryPointer(mem, 0)

    # -- listeners -----------------------------------------------------------------------
    def add_listener(self, on_alloc, on_free):
        """Report allocations to ``on_alloc(ptr, size)`` and frees to
        ``on_free(ptr, size)`` from now on; returns the function that stops it."""
        entry = (on_alloc, on_free)
        with self._lock:
            if not self._listeners:
                self._install()
            self._listeners.append(entry)
            self._update()

        def remove():
            with self._lock:
                if entry in self._listeners:
                    self._listeners.remove(entry)
                    self._update()
                    if not self._listeners:
                        self._uninstall()
        # The tracker must re-read the pool for memory from before (module docstring).
        remove.reports_earlier_frees = False
        return remove

    def _update(self) -> None:
        self._on_alloc = _fan_out([a for a, _ in self._listeners])
        self._on_free = _fan_out([f for _, f in self._listeners])
        if self._native:
            # One listener that records raw events is served by the C allocator
            # directly; the others are called from C.
            sink, others = None, []
            for on_alloc, on_free in self._listeners:
                spec = getattr(on_alloc, "native_sink", None)
                if sink is None and spec is not None:
                    sink = spec
                else:
                    others.append((on_alloc, on_free))
            self._native.configure(self._device, _fan_out([a for a, _ in others]),
                                   _fan_out([f for _, f in others]), sink)

    def _ours(self, allocator) -> bool:
        return (allocator is not None and allocator is self._native) or \
            getattr(allocator, "__self__", None) is self

    def _install(self) -> None:
        if self._native is False:
            self._native = _native_allocator()
        current = cupy.cuda.get_allocator()
        if self._ours(current) or self._covered:
            # Ours, put back by someone who kept it; or someone's installed over ours
            # while we listened, which may call ours: never wrap ourselves (that
            # would recurse without end), take blocks from what we wrapped before.
            wrapped = self._wrapped
        else:
            wrapped = current
        installed = self._native or self._malloc
        if self._native:
            self._native.configure(-1, None, None, None)   # reports nothing until _update
            self._native.wrapped = wrapped
        try:
            cupy.cuda.set_allocator(installed)
        except ValueError as exc:  # CuPy refuses inside `using_allocator` on this thread
            if self._native:
                self._native.wrapped = self._wrapped
            raise WorkbenchError(
                "cannot track device allocations inside a cupy.cuda.using_allocator(...) block: "
                f"turn tracking on outside it ({exc})") from None
        self._wrapped = wrapped
        # what goes back when tracking stops: what was there (not ourselves)
        self._replaced = wrapped if self._ours(current) else current
        self._covered = False
        self._installed = installed
        self._device = _runtime.getDevice()

    def _uninstall(self) -> None:
        installed, self._installed = self._installed, None
        if installed is None:
            return
        if cupy.cuda.get_allocator() is installed:
            cupy.cuda.set_allocator(self._replaced)   # exactly the allocator from before
        else:  # someone installed theirs over ours (it may call ours): theirs stays
            self._covered = True
        # `_wrapped` stays: a caller that kept our allocator still gets blocks from it.

    @property
    def installed(self) -> bool:
        """Whether the watcher is CuPy's allocator now."""
        return self._installed is not None and cupy.cuda.get_allocator() is self._installed


_WATCHER: AllocationWatcher | None = None
_WATCHER_LOCK = threading.Lock()


def watcher() -> AllocationWatcher:
    """The process's watcher (made on first use)."""
    global _WATCHER
    with _WATCHER_LOCK:
        if _WATCHER is None:
            _WATCHER = AllocationWatcher()
        return _WATCHER


def add_allocation_listener(on_alloc, on_free):
    """:meth:`Backend.add_allocation_listener <workbench.backends.contract.Backend.add_allocation_listener>`
    for CuPy (see the module docstring)."""
    return watcher().add_listener(on_alloc, on_free)
