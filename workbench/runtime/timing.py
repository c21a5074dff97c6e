"""The launch timing log: two events around every launch, read lazily.

The launch path only records events: no host synchronisation, no query.
Elapsed times are read when someone asks (``wb.timings()``), which returns
the events to a pool for reuse; only after very many unread launches does
the launch path read the finished ones itself (amortised, never waiting).
Records are plain lists on the launch path (the cheapest thing to build) and
become a DataFrame on demand.
"""
from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import threading
import time

from ..present.tables import pandas


# fields of a launch record (a list, built on the hot path)
KERNEL, GRID, BLOCK, SHARED, CELL, WALL, START, END, MS, BACKEND, LANGUAGE = range(11)
COLUMNS = ["kernel", "grid", "block", "shared_mem", "ms", "cell", "time", "backend", "language"]


class TimingLog:
    """Every launch of the session, in order."""

    #: Unread launches above which the launch path reads finished ones.
    RESOLVE_AFTER = 65536
    #: Launches kept: the oldest are dropped beyond this (a loop of millions of
    #: launches must not grow the log without end).
    MAX_RECORDS = 200_000

    def __init__(self, session):
        """``session`` supplies the cell being run (its ``cell`` attribute)."""
        self.records: collections.deque = collections.deque(maxlen=self.MAX_RECORDS)
        self._pending: collections.deque = collections.deque()
        self._free: collections.deque = collections.deque()
        self._backend = None
        self._lock = threading.Lock()
        self._session = session

    #: False inside :meth:`paused`: launches run without events or records.
    enabled = True

    @contextlib.contextmanager
    def paused(self):
        """Launch without logging inside the block (benchmarks time their own
        repeats and would otherwise flood the log)."""
        previous, self.enabled = self.enabled, False
        try:
            yield self
        finally:
            self.enabled = previous

    def timed_launch(self, b, name: str, grid, block, shared_mem: int, stream, launcher, args,
                     language: str = "cuda") -> None:
        """Launch ``launcher(grid, block, args, shared_mem, stream)`` between two
        recorded events on ``stream`` and log it (``language``: what the kernel
        was written in: "cuda", "numba", "triton"). Nothing here waits for the
        device."""
        if not self.enabled:
            launcher(grid, block, args, shared_mem, stream)
            return
        if b is not self._backend:
            self._switch(b)
        free = self._free
        try:  # (another thread may take the last free event between a check and a pop)
            start = free.pop()
        except IndexError:
            start = b.create_event()
        try:
            end = free.pop()
        except IndexError:
            end = b.create_event()
        b.record_event(start, stream)
        try:
            launcher(grid, block, args, shared_mem, stream)
        except BaseException:
            free.append(start)
            free.append(end)
            raise
        b.record_event(end, stream)
        rec = [name, grid, block, shared_mem, self._session.cell, time.time(), start, end, None, b.name,
               language]
        self.records.append(rec)
        pending = self._pending
        pending.append(rec)
        if len(pending) > self.RESOLVE_AFTER:
            self.resolve_finished(b)

    def _switch(self, b) -> None:
        if self._backend is not None:
            self.resolve_all(self._backend)
        self._free = collections.deque()
        self._backend = b

    def resolve_finished(self, b) -> int:
        """Read the times of the oldest launches that have finished, without
        waiting; returns how many were read."""
        done = 0
        with self._lock:
            pending = self._pending
            while pending and b.event_done(pending[0][END]):
                self._resolve(b, pending.popleft())
                done += 1
        return done

    def resolve_all(self, b=None) -> None:
        """Wait for every pending launch and read its time."""
        b = b or self._backend
        if b is None:  # nothing was ever launched
            return
        with self._lock:
            while self._pending:
                self._resolve(b, self._pending.popleft())

    def _resolve(self, b, rec: list) -> None:
        try:
            rec[MS] = b.elapsed_ms(rec[START], rec[END])
        except Exception:  # e.g. a faulted launch: its time is unknown
            rec[MS] = float("nan")
        if b is self._backend:
            self._free.append(rec[START])
            self._free.append(rec[END])
        rec[START] = rec[END] = None

    def clear(self) -> None:
        self.resolve_all()
        self.records.clear()

    def to_pandas(self, kernel=None):
        """The log as a DataFrame (see :func:`timings`)."""
        pd = pandas()
        self.resolve_all()
        name = getattr(kernel, "name", kernel)
        rows = [r for r in self.records if name is None or r[KERNEL] == name]
        return pd.DataFrame({
            "kernel": [r[KERNEL] for r in rows],
            "grid": [r[GRID] for r in rows],
            "block": [r[BLOCK] for r in rows],
            "shared_mem": [r[SHARED] for r in rows],
            "ms": [r[MS] for r in rows],
            "cell": pd.array([r[CELL] for r in rows], dtype="Int64"),
            "time": pd.to_datetime([_dt.datetime.fromtimestamp(r[WALL]) for r in rows]),
            "backend": [r[BACKEND] for r in rows],
            "language": [r[LANGUAGE] for r in rows],
        }, columns=COLUMNS)

