"""Records every device allocation and free of the active backend.

One :class:`Tracker` per process (:func:`tracker`). It listens to the
backend through :meth:`Backend.add_allocation_listener` and keeps:

- the live allocations (pointer -> the raw record ``(size, perf_counter
  time, cell, frames, reserved, pointer)``: the notebook cell and the
  allocating user frames; :meth:`Tracker.allocations` gives them as
  :class:`Allocation` objects);
- per-cell counters (:class:`CellCounts`: allocated, freed, still alive, peak);
- a bounded timeline of ``(time, in_use, reserved, event, size, cell)``
  tuples, bytes in use and reserved as they were after each event.

Two halves. The callbacks (the hot path, every allocation and free; on the
GPU, where the C allocator can be built, C code appending the same tuples in
their place: ``on_alloc.native_sink``) only append one raw tuple to a list: the time, the cell, the pool's reserved bytes
and the allocating frames as ``(code, instruction offset)`` pairs (no frame
objects, which would keep arrays alive; see :mod:`.sources`). Everything else
is counted later, when anything is read (:meth:`Tracker._counted`) or when
:data:`COUNT_EVERY` raw events have piled up: the raw events are replayed in
order, so live allocations, per-cell counts, the peak (every allocation is
looked at) and the timeline are exactly what counting them one by one gave.
Bytes in use that were allocated before tracking started are counted as
"untracked" so that :attr:`Tracker.in_use` always equals the pool's own count.

Threads: the callbacks may run on any thread (the simulator's allocator, and
on the GPU the CuPy allocator the backend installs, call them from whichever
thread allocates or frees). ``list.append`` is atomic, and the counting half
takes the raw events from the front of the list under one lock, so events
keep the order in which the callbacks ran; a callback that runs inside the
counting (a garbage collection freeing an array) only appends. The records
are keyed by address, so a backend must report the free of an address before
the allocation that reuses it (the simulator's arena and the GPU allocator
both hand a freed range out again only after their listeners have heard of
the free). Limits of what is seen:

- Memory allocated before tracking started: the simulator reports its frees
  (the "untracked" count goes down with each); CuPy does not (its pool frees
  it without calling any allocator), so on the GPU the untracked count is
  re-read from the pool (in use minus tracked) whenever the tracker is read,
  and what went is put on the timeline then as one ``"untracked freed"``
  event. Until that read, the timeline's ``in_use`` and the peak still count
  such freed memory.
- On the GPU, a thread inside ``cupy.cuda.using_allocator`` uses its own
  allocator: its allocations are not seen (they show as untracked).
- Tracking follows the current device only: the pool figures it is checked
  against (:func:`.pool.pool_counts`) are those of the current device's pool.
"""
from __future__ import annotations

import collections
import gc
import threading
import time
from bisect import bisect_right

from ..runtime.session import session as _session
from . import sources
from .pool import pool_counts

_now = time.perf_counter

#: Events the timeline keeps (the oldest are dropped first).
TIMELINE_LENGTH = 200_000
#: Raw events the callbacks keep before they are counted (bounds their memory:
#: about 0.3 KB each; read when tracking starts). Reads count them at once
#: whatever their number.
COUNT_EVERY = 1 << 17

_NO_CELL = object()


class Allocation:
    """One live device allocation (built on demand from the tracker's raw
    record of a live allocation)."""

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
        self._frees_reported = True   # does the backend report frees of memory from before?
        # Counting takes it; the callbacks never do. Re-entrant: a read may
        # start a count inside another (a garbage collection frees an array).
        self._lock = threading.RLock()
        self._raw: list[tuple] = []   # appended by the callbacks, emptied by _count()
        self._counting = False
        self._reset_counts(0)

    def _reset_counts(self, untracked: int) -> None:
        self._live: dict[int, tuple] = {}   # ptr -> (size, perf_counter time, cell, frames, reserved, ptr)
        self._cells: dict = {}
        self._timeline = collections.deque(maxlen=self._timeline_length)
        self._tracked = 0
        self._untracked = untracked
        self._peak = untracked
        self.t0 = _now()
        self._last_t = 0.0
        self._last_reserved = self._reserved_now()

    # -- switching on and off ------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self._remove_listener is not None

    def start(self, backend) -> None:
        """Listen to ``backend`` from now on (resets the counts when it is a
        different backend from the one tracked before)."""
        if self.enabled and backend is self.backend:
            return
        self.stop()
        used = pool_counts(backend).get("used_bytes") or 0
        with self._lock:
            if backend is not self.backend:
                del self._raw[:]
                self.backend = backend
                self._reserved = backend.pool_reserved_bytes
                self._reset_counts(used)
            else:
                # Back on after a pause: what happened meanwhile is unknown, so
                # everything in use now counts as untracked; cell history stays.
                self._count()
                self._live.clear()
                for counts in self._cells.values():
                    counts.alive = 0
                self._tracked = 0
                self._untracked = used
                self._peak = max(self._peak, used)
        self._session = _session()
        remove = backend.add_allocation_listener(*self._callbacks())
        self._frees_reported = getattr(remove, "reports_earlier_frees", True)
        self._remove_listener = remove
        self.mark("tracking on")

    def stop(self) -> None:
        """Stop listening; what was recorded stays readable."""
        if self._remove_listener is not None:
            remove, self._remove_listener = self._remove_listener, None
            remove()
            with self._lock:
                self._count()
            self.mark("tracking off")

    # -- the allocation callbacks (hot path) -----------------------------------
    def _callbacks(self):
        """``(on_alloc, on_free)``: each appends one raw tuple; closures, so
        that the hot path reads no attributes."""
        raw = self._raw
        append = raw.append
        session = self._session
        capture = sources.capture
        reserved = self._reserved
        now = _now
        count_now = self._count_now
        count_every = COUNT_EVERY   # read when tracking starts

        def on_alloc(ptr: int, size: int) -> None:
            try:
                after = reserved()   # the pool may have grown: read per allocation
            except Exception:
                after = None
            append((size, now(), session.cell, capture(), after, ptr))   # kept as the live entry
            if len(raw) >= count_every:
                count_now()

        def on_free(ptr: int, size: int) -> None:
            append((ptr, size, now(), session.cell))

        # A backend able to append these records itself (the C allocator of
        # backends/gpu/allocations.py) takes them from here instead of calling
        # the callbacks: the list, what each record reads, and how frames are
        # classified (the same dict as sources.capture, so both walk alike).
        on_alloc.native_sink = (raw, session, reserved, count_now, count_every,
                                sources.kinds_by_file(), sources.frame_kind, sources.DEPTH)
        return on_alloc, on_free

    def _count_now(self) -> None:
        with self._lock:
            self._count()

    # -- counting (under the lock) -------------------------------------------------
    def _count(self) -> None:
        """Count the raw events appended so far, in order; then, where the
        backend does not report frees of memory from before tracking, re-read
        the untracked bytes from the pool."""
        if self._counting:
            return   # re-entered on this thread (a finalizer run inside): the outer count goes on
        self._counting = True
        try:
            raw = self._raw
            n = len(raw)
            if n:
                events = raw[:n]
                del raw[:n]   # callbacks append behind: nothing is lost
                # A long replay makes two tuples per event: without the collector
                # running over them again and again (one collection follows later).
                paused = n > 1000 and gc.isenabled()
                if paused:
                    gc.disable()
                try:
                    self._replay(events)
                finally:
                    if paused:
                        gc.enable()
            if self._untracked and not self._frees_reported and self._remove_listener is not None:
                self._recount_untracked()
        finally:
            self._counting = False

    def _stamp(self, t: float) -> float:
        """Seconds since start, no earlier than the last event (a garbage
        collection inside a callback can append its frees first)."""
        t -= self.t0
        if t < self._last_t:
            return self._last_t
        self._last_t = t
        return t

    def _replay(self, events: list) -> None:
        live, cells, timeline = self._live, self._cells, self._timeline
        t0, last_t = self.t0, self._last_t
        tracked, untracked, peak = self._tracked, self._untracked, self._peak
        reserved = self._last_reserved
        last_cell, counts = _NO_CELL, None   # most batches are one cell's: look it up once
        done = 0
        try:
            for done, event in enumerate(events):
                if len(event) == 6:
                    size, t, cell, _frames, reserved, ptr = event
                    t -= t0
                    if t < last_t:
                        t = last_t
                    last_t = t
                    live[ptr] = event
                    tracked += size
                    in_use = tracked + untracked
                    if in_use > peak:
                        peak = in_use
                    if cell is not last_cell:
                        last_cell, counts = cell, cells.get(cell)
                    if counts is None:
                        counts = cells[cell] = CellCounts(cell, in_use - size)
                    counts.allocated += size
                    counts.n_allocs += 1
                    counts.alive += size
                    if in_use > counts.peak:
                        counts.peak = in_use
                    timeline.append((t, in_use, reserved, "alloc", size, cell))
                else:
                    ptr, size, t, cell = event
                    t -= t0
                    if t < last_t:
                        t = last_t
                    last_t = t
                    entry = live.pop(ptr, None)
                    if entry is not None:
                        tracked -= entry[0]
                        owner = cells.get(entry[2])
                        if owner is not None:
                            owner.alive -= entry[0]
                    else:  # allocated before tracking started
                        untracked = max(0, untracked - size)
                    in_use = tracked + untracked
                    if cell is not last_cell:
                        last_cell, counts = cell, cells.get(cell)
                    if counts is None:
                        counts = cells[cell] = CellCounts(cell, in_use + size)
                    counts.freed += size
                    counts.n_frees += 1
                    # a free returns the block to the pool: reserved does not change
                    timeline.append((t, in_use, reserved, "free", size, cell))
            done = len(events)
        finally:
            if done < len(events):
                # interrupted (Ctrl-C): the events not counted go back in front of the
                # new ones, and the totals follow the live table (an event cut in the
                # middle is counted again: at worst the figures are off by that one event)
                self._raw[0:0] = events[done:]
                tracked = sum(entry[0] for entry in live.values())
                peak = max(peak, tracked + untracked)
            self._last_t = last_t
            self._tracked, self._untracked, self._peak = tracked, untracked, peak
            self._last_reserved = reserved

    def _recount_untracked(self) -> None:
        """Lower the untracked bytes to what the pool says is in use beyond
        the tracked allocations (see the module docstring)."""
        raw = self._raw
        n = len(raw)
        used = pool_counts(self.backend).get("used_bytes")
        if used is None or len(raw) != n:
            return   # an allocation or free came meanwhile: the next read tries again
        if n:
            events = raw[:n]
            del raw[:n]
            self._replay(events)
        gone = min(self._tracked + self._untracked - used, self._untracked)
        if gone > 0:
            self._untracked -= gone
            t = self._stamp(_now())
            self._timeline.append((t, self._tracked + self._untracked, self._last_reserved,
                                   "untracked freed", gone, self._current_cell()))

    def _reserved_now(self):
        try:
            return self._reserved() if self._reserved is not None else None
        except Exception:
            return None

    # -- counts (each read counts what is pending first) -----------------------------
    @property
    def in_use(self) -> int:
        """Bytes in use: tracked live allocations plus those made before tracking."""
        with self._lock:
            self._count()
            return self._tracked + self._untracked

    @property
    def tracked_bytes(self) -> int:
        """Bytes of the live allocations made while tracking."""
        with self._lock:
            self._count()
            return self._tracked

    @property
    def untracked_bytes(self) -> int:
        """Bytes in use that were allocated before tracking started."""
        with self._lock:
            self._count()
            return self._untracked

    @property
    def peak(self) -> int:
        """Most bytes in use since tracking started or :meth:`reset_peak`."""
        with self._lock:
            self._count()
            return self._peak

    @property
    def live(self) -> dict:
        """The live allocations: pointer -> ``(size, perf_counter time, cell,
        frames, reserved, pointer)`` (:meth:`allocations` makes objects of them)."""
        with self._lock:
            self._count()
            return self._live

    @property
    def n_allocs(self) -> int:
        """Allocations recorded since tracking started."""
        with self._lock:
            self._count()
            return sum(c.n_allocs for c in self._cells.values())

    # -- cells and marks ---------------------------------------------------------
    def _current_cell(self):
        s = self._session
        return s.cell if s is not None else None

    def begin_cell(self, cell) -> None:
        """A notebook cell starts (called from IPython's ``pre_run_cell``)."""
        with self._lock:
            self._count()
            counts = self._cells.get(cell)
            if counts is None:
                self._cells[cell] = CellCounts(cell, self._tracked + self._untracked)
            else:  # the same count again (a silent re-run): keep adding to it
                counts.in_use_after = None
        self.mark(f"cell {cell} start", cell=cell)

    def end_cell(self, cell) -> None:
        """A notebook cell ends (called from IPython's ``post_run_cell``)."""
        with self._lock:
            self._count()
            counts = self._cells.get(cell)
            if counts is not None:
                counts.in_use_after = self._tracked + self._untracked
        self.mark(f"cell {cell} end", cell=cell)

    def mark(self, event: str, cell=None) -> None:
        """Put a named event (cell boundary, cache emptied...) on the timeline."""
        reserved = self._reserved_now()
        if cell is None:
            cell = self._current_cell()
        with self._lock:
            self._count()
            t = self._stamp(_now())
            self._last_reserved = reserved
            self._timeline.append((t, self._tracked + self._untracked, reserved, event, 0, cell))

    def reset_peak(self) -> None:
        with self._lock:
            self._count()
            self._peak = self._tracked + self._untracked

    # -- queries -------------------------------------------------------------------
    def events(self) -> list[tuple]:
        """A copy of the timeline: ``(time, in_use, reserved, event, size, cell)`` tuples."""
        with self._lock:
            self._count()
            return list(self._timeline)

    def cell_counts(self) -> list[CellCounts]:
        """The per-cell counters, in the order the cells were first seen."""
        with self._lock:
            self._count()
            return list(self._cells.values())

    def allocations(self) -> list[Allocation]:
        """The live allocations as :class:`Allocation` objects."""
        with self._lock:
            self._count()
            entries = list(self._live.values())
        return [self._allocation(e) for e in entries]

    def _allocation(self, entry: tuple) -> Allocation:
        size, t, cell, frames, _reserved, ptr = entry
        return Allocation(ptr, size, t - self.t0, cell, frames)

    def address_index(self):
        """A function ``address -> Allocation | None``: the allocation live now
        that contains ``address`` (views point inside one); sorted once, for
        many look-ups."""
        with self._lock:
            self._count()
            live = dict(self._live)
        starts = sorted(live)

        def lookup(address: int) -> Allocation | None:
            ptr = address if address in live else None
            if ptr is None:
                i = bisect_right(starts, address) - 1
                if i >= 0 and address < starts[i] + live[starts[i]][0]:
                    ptr = starts[i]
            return None if ptr is None else self._allocation(live[ptr])
        return lookup

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        name = self.backend.name if self.backend is not None else "no backend"
        with self._lock:
            self._count()
            return (f"<Tracker {state} ({name}): {len(self._live)} live allocations, "
                    f"{self._tracked + self._untracked} B in use, peak {self._peak} B>")


_TRACKER: Tracker | None = None


def tracker() -> Tracker:
    """The process's tracker (created on first use, not started)."""
    global _TRACKER
    if _TRACKER is None:
        _TRACKER = Tracker()
    return _TRACKER
