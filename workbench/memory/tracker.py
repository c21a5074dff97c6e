"""Records every device allocation and free of the active backend.

One :class:`Tracker` per process (:func:`tracker`). It listens to the
backend through :meth:`Backend.add_allocation_listener` and keeps:

- the live allocations (pointer -> ``(size, time, cell, frames)``: the
  notebook cell and the allocating user frames; :meth:`Tracker.allocations`
  gives them as :class:`Allocation` objects);
- per-cell counters (:class:`CellCounts`: allocated, freed, still alive, peak);
- a bounded timeline of ``(time, in_use, reserved, event, size, cell)``
  tuples, bytes in use and reserved as they were after each event.

The callbacks run on every allocation, so they do plain dict and counter
updates and keep code objects instead of strings (see :mod:`.sources`).
Bytes in use that were allocated before tracking started are counted as
"untracked" so that :attr:`Tracker.in_use` always equals the pool's own count.

Threads: the callbacks may run on any thread (the simulator's allocator calls
its listeners from whichever thread allocates or frees), so every update and
every read of the records holds one lock; the stack walk is done before
taking it. The records are keyed by address, so a backend must report the
free of an address before the allocation that reuses it (the simulator's
arena hands a freed range out again only after its listeners have heard of
the free). Limits of what is seen:

- On the GPU, CuPy memory hooks are thread-local: the tracker sees the
  allocations and frees of the thread that turned tracking on (the notebook's),
  not those of other threads.
- Tracking follows the current device only: the pool figures it is checked
  against (:func:`.pool.pool_counts`) are those of the current device's pool.
"""
from __future__ import annotations

import collections
import threading
import time
from bisect import bisect_right

from ..runtime.session import session as _session
from . import sources
from .pool import pool_counts

_now = time.perf_counter
_capture = sources.capture

#: Events the timeline keeps (the oldest are dropped first).
TIMELINE_LENGTH = 200_000


class Allocation:
    """One live device allocation (built on demand from the tracker's raw
    ``(size, time, cell, frames)`` entry)."""

    __slots__ = ("ptr", "size", "time", "cell", "frames")

    def __init__(self, ptr: int, size: int, time_: float, cell, frames: tuple):
        self.ptr = ptr
        self.size = size
        self.time = time_        # seconds since tracking started
        self.cell = cell         # execution count, None outside a notebook cell
        self.frames = frames     # ((code, line), ...) innermost user frame first

    @property
    def sites(self) -> tuple:
        """The user frames as :class:`~.sources.SourceSite`, allocating line first."""
        return sources.resolve(self.frames)

    def __repr__(self) -> str:
        site = self.sites[0] if self.frames else sources.UNKNOWN_SITE
        return f"<Allocation {self.size} B at 0x{self.ptr:x} from {site.location}>"


class CellCounts:
    """What one notebook cell (execution count) did to device memory."""

    __slots__ = ("cell", "allocated", "freed", "n_allocs", "n_frees", "alive",
                 "peak", "in_use_before", "in_use_after")

    def __init__(self, cell, in_use: int):
        self.cell = cell
        self.allocated = 0        # bytes allocated while the cell ran
        self.freed = 0            # bytes freed while the cell ran (of any cell's allocations)
        self.n_allocs = 0
        self.n_frees = 0
        self.alive = 0            # bytes allocated by this cell and still not freed
        self.peak = in_use        # most bytes in use while the cell ran
        self.in_use_before = in_use
        self.in_use_after = None  # set when the cell ends


class Tracker:
    """Listens to one backend's allocations; see the module docstring."""

    def __init__(self, timeline_length: int = TIMELINE_LENGTH):
        self._timeline_length = timeline_length
        self.backend = None
        self._remove_listener = None
        self._session = None
        self._reserved = None
        # The callbacks may come from any thread. Re-entrant: a garbage
        # collection inside a locked update can free an array, and its free
        # callback then runs on the same thread.
        self._lock = threading.RLock()
        self._reset_counts(0)

    def _reset_counts(self, untracked: int) -> None:
        self.live: dict[int, tuple] = {}   # ptr -> (size, time, cell, frames)
        self.cells: dict = {}
        self.timeline = collections.deque(maxlen=self._timeline_length)
        self.tracked_bytes = 0
        self.untracked_bytes = untracked
        self.peak = untracked
        self.t0 = time.perf_counter()
        self._last_reserved = self._reserved_now()

    # -- switching on and off ------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self._remove_listener is not None

    @property
    def n_allocs(self) -> int:
        """Allocations recorded since tracking started."""
        with self._lock:
            return sum(c.n_allocs for c in self.cells.values())

    @property
    def in_use(self) -> int:
        """Bytes in use: tracked live allocations plus those made before tracking."""
        return self.tracked_bytes + self.untracked_bytes

    def start(self, backend) -> None:
        """Listen to ``backend`` from now on (resets the counts when it is a
        different backend from the one tracked before)."""
        if self.enabled and backend is self.backend:
            return
        self.stop()
        used = pool_counts(backend).get("used_bytes") or 0
        with self._lock:
            if backend is not self.backend:
                self.backend = backend
                self._reserved = backend.pool_reserved_bytes
                self._reset_counts(used)
            else:
                # Back on after a pause: what happened meanwhile is unknown, so
                # everything in use now counts as untracked; cell history stays.
                self.live.clear()
                for counts in self.cells.values():
                    counts.alive = 0
                self.tracked_bytes = 0
                self.untracked_bytes = used
        self._session = _session()   # its .cell is read on every allocation
        self._remove_listener = backend.add_allocation_listener(self._on_alloc, self._on_free)
        self.mark("tracking on")

    def stop(self) -> None:
        """Stop listening; what was recorded stays readable."""
        if self._remove_listener is not None:
            remove, self._remove_listener = self._remove_listener, None
            remove()
            self.mark("tracking off")

    # -- the allocation callbacks (hot path) -----------------------------------
    def _current_cell(self):
        s = self._session
        return s.cell if s is not None else None

    # Timeline order: a garbage collection inside an update can free arrays,
    # and their (re-entrant) free events are then appended first, with later
    # times; an event is therefore stamped no earlier than the last one. (A
    # collection resets the allocation count, so building the second tuple
    # cannot start another.)
    def _on_alloc(self, ptr: int, size: int) -> None:
        s = self._session
        cell = s.cell if s is not None else None
        frames = _capture()                   # outside the lock: the costly part
        lock = self._lock
        reserved = self._reserved_now()
        lock.acquire()   # acquire/release: half the cost of `with` here
        try:
            t = _now() - self.t0
            self.live[ptr] = (size, t, cell, frames)
            in_use = self.tracked_bytes = self.tracked_bytes + size
            in_use += self.untracked_bytes
            if in_use > self.peak:
                self.peak = in_use
            counts = self.cells.get(cell)
            if counts is None:
                counts = self.cells[cell] = CellCounts(cell, in_use - size)
            counts.allocated += size
            counts.n_allocs += 1
            counts.alive += size
            if in_use > counts.peak:
                counts.peak = in_use
            self._last_reserved = reserved
            self._append((t, in_use, reserved, "alloc", size, cell))
        finally:
            lock.release()

    def _append(self, event: tuple) -> None:
        """Add a timeline event, stamped no earlier than the last one (under the lock)."""
        timeline = self.timeline
        if timeline and timeline[-1][0] > event[0]:
            event = (timeline[-1][0],) + event[1:]
        timeline.append(event)

    def _on_free(self, ptr: int, size: int) -> None:
        s = self._session
        cell = s.cell if s is not None else None
        lock = self._lock
        lock.acquire()   # acquire/release: half the cost of `with` here
        try:
            t = _now() - self.t0
            entry = self.live.pop(ptr, None)
            if entry is not None:
                self.tracked_bytes -= entry[0]
                owner = self.cells.get(entry[2])
                if owner is not None:
                    owner.alive -= entry[0]
            else:  # allocated before tracking started
                self.untracked_bytes = max(0, self.untracked_bytes - size)
            in_use = self.tracked_bytes + self.untracked_bytes
            counts = self.cells.get(cell)
            if counts is None:
                counts = self.cells[cell] = CellCounts(cell, in_use + size)
            counts.freed += size
            counts.n_frees += 1
            # a free returns the block to the pool: reserved does not change
            self._append((t, in_use, self._last_reserved, "free", size, cell))
        finally:
            lock.release()

    def _reserved_now(self):
        try:
            return self._reserved() if self._reserved is not None else None
        except Exception:
            return None

    # -- cells and marks ---------------------------------------------------------
    def begin_cell(self, cell) -> None:
        """A notebook cell starts (called from IPython's ``pre_run_cell``)."""
        with self._lock:
            counts = self.cells.get(cell)
            if counts is None:
                self.cells[cell] = CellCounts(cell, self.in_use)
            else:  # the same count again (a silent re-run): keep adding to it
                counts.in_use_after = None
        self.mark(f"cell {cell} start", cell=cell)

    def end_cell(self, cell) -> None:
        """A notebook cell ends (called from IPython's ``post_run_cell``)."""
        with self._lock:
            counts = self.cells.get(cell)
            if counts is not None:
                counts.in_use_after = self.in_use
        self.mark(f"cell {cell} end", cell=cell)

    def mark(self, event: str, cell=None) -> None:
        """Put a named event (cell boundary, cache emptied...) on the timeline."""
        reserved = self._reserved_now()
        if cell is None:
            cell = self._current_cell()
        with self._lock:
            t = _now() - self.t0
            entry = (t, self.in_use, reserved, event, 0, cell)
            if self.timeline and self.timeline[-1][0] > t:
                entry = (self.timeline[-1][0],) + entry[1:]
            self._last_reserved = reserved
            self.timeline.append(entry)

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = self.in_use

    # -- queries -------------------------------------------------------------------
    def events(self) -> list[tuple]:
        """A copy of the timeline: ``(time, in_use, reserved, event, size, cell)`` tuples."""
        with self._lock:
            return list(self.timeline)

    def cell_counts(self) -> list[CellCounts]:
        """The per-cell counters, in the order the cells were first seen."""
        with self._lock:
            return list(self.cells.values())

    def allocations(self) -> list[Allocation]:
        """The live allocations as :class:`Allocation` objects."""
        with self._lock:
            entries = list(self.live.items())
        return [Allocation(ptr, *entry) for ptr, entry in entries]

    def address_index(self):
        """A function ``address -> Allocation | None``: the allocation live now
        that contains ``address`` (views point inside one); sorted once, for
        many look-ups."""
        with self._lock:
            live = dict(self.live)
        starts = sorted(live)

        def lookup(address: int) -> Allocation | None:
            ptr = address if address in live else None
            if ptr is None:
                i = bisect_right(starts, address) - 1
                if i >= 0 and address < starts[i] + live[starts[i]][0]:
                    ptr = starts[i]
            return None if ptr is None else Allocation(ptr, *live[ptr])
        return lookup

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        name = self.backend.name if self.backend is not None else "no backend"
        return (f"<Tracker {state} ({name}): {len(self.live)} live allocations, "
                f"{self.in_use} B in use, peak {self.peak} B>")


_TRACKER: Tracker | None = None


def tracker() -> Tracker:
    """The process's tracker (created on first use, not started)."""
    global _TRACKER
    if _TRACKER is None:
        _TRACKER = Tracker()
    return _TRACKER
