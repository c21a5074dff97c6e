"""Instrumentation: kernels run from a build that observes every memory access,
and what the sanitizer needs to know of device memory.

The simulator can build a kernel whose memory accesses, barriers and basic
blocks are counted as they run (``backends/counting.py``), or checked for
races, barrier misuse, uninitialised reads and bad addresses
(``backends/sanitizing.py``); on a GPU, Nsight Compute and compute-sanitizer
do that instead and this interface answers that it cannot. Which bytes of
``wb.allocate``'s arrays were written is kept on both backends
(``backends/initialisation.py``): initcheck reads it here, and on a GPU the
arrays sent to compute-sanitizer's process are re-created with it.
"""
from __future__ import annotations

from ..initialisation import FILL_BYTE, InitTracker


class Instrumentation:
    """Counted and sanitized launches (the simulator's), and the written
    bytes of uninitialised arrays (both backends)."""

    def count_launches(self, kernel: str | None = None, skip: int = 0, count: int | None = None,
                       max_blocks: int | None = None):
        """A context manager: the kernel launches made inside it run from an
        instrumented build that counts every memory access (grouped into
        warp-level instructions) and basic block, and each one's
        :class:`~workbench.backends.counting.LaunchCounts` is appended to the
        list it yields. The kernels really run. ``kernel``: only kernels of
        this name (``"regex:..."``: a regular expression); ``skip``: so many
        matching launches run plainly first; ``count``: at most so many are
        counted; ``max_blocks``: count at most about so many blocks of a
        launch (evenly spaced; the rest run uncounted).

        Backends that cannot count raise NotImplementedError (on a GPU,
        Nsight Compute measures instead)."""
        raise NotImplementedError(f"the {getattr(self, 'name', '?')} backend does not count memory "
                                  "accesses; Nsight Compute measures them on a GPU")

    def sanitize_launches(self, tool: str, kernel: str | None = None, skip: int = 0,
                          count: int | None = None):
        """A context manager: the kernel launches made inside it run under
        sanitizer ``tool`` (``"memcheck"``, ``"racecheck"``, ``"synccheck"`` or
        ``"initcheck"``, as compute-sanitizer names them), and each one's
        :class:`~workbench.backends.sanitizing.LaunchFindings` is appended to
        the list it yields. The kernels really run (their results are
        written); a launch that memcheck stops is a finding, not an error.
        ``kernel``, ``skip``, ``count``: as in :meth:`count_launches`.

        Backends that cannot raise NotImplementedError (on a GPU,
        compute-sanitizer checks a launch in a process of its own)."""
        raise NotImplementedError(f"the {getattr(self, 'name', '?')} backend has no sanitizer of its "
                                  "own; compute-sanitizer checks launches on a GPU")

    def explore_schedules(self, seed: int):
        """A context manager: the kernel launches made inside it run their
        blocks, and the threads of each block, in an order drawn from
        ``seed`` (the same seed, the same order), so that results that depend
        on the order show. NotImplementedError where the order cannot be chosen."""
        raise NotImplementedError(f"the {getattr(self, 'name', '?')} backend cannot choose the "
                                  "order in which blocks and threads run")

    # -- the written bytes of wb.allocate's arrays -----------------------------------------
    def initialisation(self) -> InitTracker:
        """This backend's :class:`~workbench.backends.initialisation.InitTracker`
        (made on first use; it forgets an allocation when it is freed). Here
        through an allocation listener; a backend where listening costs more
        than a callback (the GPU's: it replaces CuPy's allocator) overrides it."""
        tracker = getattr(self, "_init_tracker", None)
        if tracker is None:
            tracker = self._init_tracker = InitTracker()
            self.add_allocation_listener(lambda address, nbytes: None, tracker.freed)
        return tracker

    def track_uninitialised(self, array) -> None:
        """``array`` was just allocated and nothing wrote it: fill it with
        :data:`~workbench.backends.initialisation.FILL_BYTE` and count every
        byte as unwritten until something writes it."""
        nbytes = int(array.nbytes)
        if nbytes:
            self.memset(array, FILL_BYTE)
            self.initialisation().allocated(self.device_pointer(array), nbytes)

    def mark_written(self, array) -> None:
        """Every byte of device ``array`` (a contiguous array or view) was written."""
        tracker = getattr(self, "_init_tracker", None)
        if tracker is not None and len(tracker) and array is not None and self.is_device_array(array):
            lo = self.device_pointer(array)
            tracker.written(lo, lo + int(array.nbytes))

    def uninitialised(self, array):
        """A bool per byte of device ``array``: True where nothing wrote it
        since ``wb.allocate``; None when every byte counts as written. Bytes
        that writes the workbench could not see may have changed are
        checked first (see ``backends/initialisation.py``)."""
        tracker = getattr(self, "_init_tracker", None)
        if tracker is None or not len(tracker) or not self.is_device_array(array):
            return None
        lo = self.device_pointer(array)
        hi = lo + int(array.nbytes)
        if not tracker.overlapping(lo, hi):
            return None
        self.verify_initialisation()
        return tracker.mask(lo, hi)

    def verify_initialisation(self) -> None:
        """Forget the tracked arrays that something the workbench did not see
        has written (their unwritten bytes no longer hold the fill)."""
        tracker = getattr(self, "_init_tracker", None)
        if tracker is not None and len(tracker):
            tracker.verify(self.read_device_bytes)

    def read_device_bytes(self, address: int, nbytes: int):
        """``nbytes`` of device memory at ``address`` as a host uint8 array."""
        raise NotImplementedError(f"the {getattr(self, 'name', '?')} backend cannot read device "
                                  "memory by address")
