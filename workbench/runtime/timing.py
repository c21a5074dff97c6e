"""The launch timing log: every launch's (and copy's) device time, read lazily.

Kernels, copies, memsets and graph launches go through the same log (``kind``),
with the stream they were queued on. Kernel times come from one of two
sources, chosen by the backend (:meth:`Backend.kernel_activity`):

- **CUPTI activity records** (on a GPU where CUPTI is found): the launch path
  records nothing on the device; CUPTI writes each kernel's start and end
  timestamps into its buffers, and reading the log matches them to the
  entries, in launch order, by the kernel's symbol (other kernels of the
  process, CuPy's own say, are passed over).
- **Two events around every launch** (elsewhere, and always for copies,
  memsets and graph launches): the launch path only records them, no host
  synchronisation, no query; reading the log returns them to a pool for reuse.

Elapsed times are read when someone asks (``wb.timings()``); only after very
many unread launches does the launch path read the finished ones itself
(amortised, never waiting). Records are plain lists on the launch path (the
cheapest thing to build; their fields are :mod:`.records`) and become a
DataFrame on demand.
"""
from __future__ import annotations

import collections
import contextlib
import math
import threading
import time

from ..errors import WorkbenchError
from .clocks import DeviceClocks
from .records import (BLOCK, CELL, DEVICE, END, GRID, KERNEL, MS, SHARED, START, STREAM, T0, WALL,
                      StreamLabels, cupti_record, table)

#: Launches looked ahead for a CUPTI record's entry once every kernel has
#: finished (a record CUPTI dropped then costs its own entry its time only).
_LOOKAHEAD = 64


class _Pool(collections.deque):
    """Free events of one device (``device``): CUDA events belong to the
    device current when they were made, and are recorded on its streams only."""

    __slots__ = ("device",)

    def __init__(self, device):
        super().__init__()
        self.device = device


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
        self._free = _Pool(None)  # the current device's free events
        self._pools: dict = {}  # device -> its _Pool
        self._device = None  # the current device (CUPTI-timed records carry it)
        #: (event, arrays, pool) of copies queued while paused: the arrays stay
        #: referenced until the event is done (an asynchronous copy reads them later)
        self._kept: collections.deque = collections.deque()
        self._backend = None
        self._activity = None  # the backend's CUPTI records (None: events)
        self._awaiting: collections.deque = collections.deque()  # launches CUPTI times
        self._held: list = []  # CUPTI records that came before their launch's turn
        self._cupti_offset = None  # host ms - CUPTI ms, set at the first CUPTI record
        self._lock = threading.Lock()
        self._session = session
        self._clocks = DeviceClocks()  # the device clocks paired with the host's (timeline)
        self._stream_labels = StreamLabels()  # the ``stream`` column's names
        #: the graph being captured (core/graphs.py): launches are its nodes
        self.capture = None

    #: False inside :meth:`paused`: launches run without events or records.
    enabled = True

    @contextlib.contextmanager
    def paused(self):
        """Launch without logging inside the block (benchmarks time their own
        repeats and would otherwise flood the log)."""
        previous, self.enabled = self.enabled, False
        activity = self._activity if previous else None
        if activity is not None:
            activity.pause()  # the launches in the block make no records to pass over
        try:
            yield self
        finally:
            self.enabled = previous
            if activity is not None:
                activity.resume()

    @contextlib.contextmanager
    def timed_by_events(self):
        """Time launches with events inside the block even where CUPTI could
        (benchmarks compare the two)."""
        self.resolve_all()
        activity, self._activity = self._activity, None
        if activity is not None:
            activity.pause()
        try:
            yield self
        finally:
            self.resolve_all()
            self._activity = activity
            if activity is not None:
                activity.resume()

    def timed_launch(self, b, name: str, grid, block, shared_mem: int, stream, launcher, args,
                     language: str = "cuda", symbol: str | None = None) -> None:
        """Launch ``launcher(grid, block, args, shared_mem, stream)`` and log it
        with its device time (``language``: what the kernel was written in:
        "cuda", "numba", "triton"; ``symbol``: the kernel's name in the
        compiled code, where it differs from ``name`` or is not known: then a
        symbol containing ``name``). Nothing here waits for the device."""
        if not self.enabled:
            capture = self.capture
            if capture is not None and capture.owns(stream):  # (raises for another stream)
                launcher(grid, block, args, shared_mem, stream)
                capture.add_launch(name, grid, block, shared_mem, launcher, args)  # once queued
                return
            launcher(grid, block, args, shared_mem, stream)
            return
        if b is not self._backend:
            self._switch(b)
        if self._activity is not None:
            launcher(grid, block, args, shared_mem, stream)
            rec = cupti_record(name, grid, block, shared_mem, self._session.cell, time.time(), symbol,
                                b, language, stream, self._device)
            self.records.append(rec)
            awaiting = self._awaiting
            awaiting.append(rec)
            if len(awaiting) > self.MAX_RECORDS:  # (CUPTI's buffers hold as many: read at the end)
                self.resolve_finished(b)
            return
        free = self._free
        try:  # (another thread may take the last free event between a check and a pop)
            start = free.pop()
        except IndexError:
            start = b.create_event()
        try:
            end = free.pop()
        except IndexError:
            end = b.create_event()
        between = getattr(launcher, "between", None)
        if between is None:
            b.record_event(start, stream)
        try:
            if between is not None:
                between(start, end, grid, block, args, shared_mem, stream)
            else:
                launcher(grid, block, args, shared_mem, stream)
        except BaseException:
            free.append(start)
            free.append(end)
            raise
        if between is None:
            b.record_event(end, stream)
        rec = [name, grid, block, shared_mem, self._session.cell, time.time(), start, end, None, b.name,
               language, "kernel", stream, None, free.device, None]
        self.records.append(rec)
        pending = self._pending
        pending.append(rec)
        if len(pending) > self.RESOLVE_AFTER:
            self.resolve_finished(b)

    @staticmethod
    def cupti_record_template(b, name: str, language: str, symbol: str | None):
        """For a launch path that logs CUPTI-timed launches itself (the C call
        of ``backends/gpu/native/launch.c``, which does what :meth:`timed_launch` does): the
        record of a launch of ``name`` with the per-launch fields empty, and
        their indices (grid, block, shared memory, cell, wall time, stream,
        device)."""
        return (cupti_record(name, None, None, None, None, None, symbol, b, language, None, None),
                (GRID, BLOCK, SHARED, CELL, WALL, STREAM, DEVICE))

    def timed_op(self, b, kind: str, name: str, nbytes, stream, op, *args, keep=None):
        """Run ``op(*args)`` (a copy, a memset, a graph launch queued on ``stream``)
        between two events on ``stream`` and log it as ``kind`` with ``nbytes``;
        returns what ``op`` returns. Inside a graph capture it becomes a node.
        ``keep`` (the arrays of an asynchronous copy) stays referenced until the
        operation is done, as CuPy's own asynchronous copies keep theirs."""
        if not self.enabled:
            capture = self.capture
            if capture is not None and capture.owns(stream):
                result = op(*args)
                capture.add_op(kind, name, nbytes, op, args)  # (the node keeps the arrays)
                return result
            result = op(*args)
            if keep is not None:
                self._keep_until_done(b, stream, keep)
            return result
        if b is not self._backend:
            self._switch(b)
        free = self._free
        try:
            start = free.pop()
        except IndexError:
            start = b.create_event()
        try:
            end = free.pop()
        except IndexError:
            end = b.create_event()
        b.record_event(start, stream)
        # CUPTI would report a graph's kernels as kernels: none must be taken
        # for a kernel call's record (the events time the graph)
        quiet = self._activity if kind == "graph" else None
        if quiet is not None:
            quiet.pause()
        try:
            result = op(*args)
        except BaseException:
            free.append(start)
            free.append(end)
            raise
        finally:
            if quiet is not None:
                quiet.resume()
        b.record_event(end, stream)
        rec = [name, None, None, None, self._session.cell, time.time(), start, end, None, b.name,
               None, kind, stream, nbytes, free.device, keep]
        self.records.append(rec)
        self._pending.append(rec)
        if len(self._pending) > self.RESOLVE_AFTER:
            self.resolve_finished(b)
        return result

    def _keep_until_done(self, b, stream, keep) -> None:
        """Keep ``keep`` referenced until the work queued on ``stream`` so far is
        done (an event polled here, at the next such call, and when the log is read)."""
        if self._kept:
            self._release_kept(wait=False)
        free = self._free if b is self._backend else None
        event = None
        if free:
            try:
                event = free.pop()
            except IndexError:
                pass
        if event is None:
            event = b.create_event()
        b.record_event(event, stream)
        self._kept.append((event, keep, free, b))

    def _release_kept(self, b=None, wait: bool = False) -> None:
        """Let go of the arrays of paused copies that are done (all, waiting for
        them, with ``wait``); their events go back to their pools."""
        kept = self._kept
        while kept:
            event, _, pool, owner = kept[0]
            try:
                if wait:
                    owner.event_synchronize(event)
                elif not owner.event_done(event):
                    break
            except Exception:  # a fault: raised where the user waits
                pass
            kept.popleft()
            if pool is not None:
                pool.append(event)
            else:
                try:
                    owner.destroy_event(event)
                except Exception:
                    pass

    def name_stream(self, stream, label: str) -> None:
        """Call ``stream`` (a backend stream) ``label`` in the ``stream`` column."""
        self._stream_labels.name(stream, label)

    def stream_label(self, b, stream) -> str:
        """The ``stream`` column's text for a backend stream (:class:`.records.StreamLabels`)."""
        return self._stream_labels.label(b, stream)

    def _switch(self, b) -> None:
        old = self._backend
        if old is not None:
            self.resolve_all(old)
            self._release_kept(wait=True)
            self._free_events(old)
        self._pools = {}
        self._device = _device_of(b)
        self._free = self._pools.setdefault(self._device, _Pool(self._device))
        self._backend = b
        self._activity = b.kernel_activity()

    def _free_events(self, b) -> None:
        """Destroy the pooled and anchor events of backend ``b`` (the log leaves it)."""
        events = [e for pool in self._pools.values() for e in pool]
        for pool in self._pools.values():
            pool.clear()
        for event in events:
            try:
                b.destroy_event(event)
            except Exception:  # a context that is gone: nothing left to free
                pass
        self._clocks.free(b)

    @property
    def source(self) -> str:
        """What times the launches: "CUPTI activity records" or "events"."""
        return "CUPTI activity records" if self._activity is not None else "events"

    def device_changed(self, b) -> None:
        """The current device changed: CUDA events belong to one device, so the
        launch path takes them from that device's pool from now on (nothing waits)."""
        if b is self._backend:
            device = self._device = _device_of(b)
            pool = self._pools.get(device)
            if pool is None:
                pool = self._pools[device] = _Pool(device)
            self._free = pool

    def resolve_finished(self, b) -> int:
        """Read the times of the oldest launches that have finished, without
        waiting; returns how many were read."""
        done = 0
        with self._lock:
            pending = self._pending
            while pending and b.event_done(pending[0][END]):
                self._resolve(b, pending.popleft())
                done += 1
            if self._awaiting and b is self._backend:
                done += self._match(self._activity.take(forced=False), final=False)
            if self._kept:
                self._release_kept(wait=False)
        return done

    def resolve_all(self, b=None) -> None:
        """Wait for every pending launch and read its time."""
        b = b or self._backend
        if b is None:  # nothing was ever launched
            return
        with self._lock:
            while self._pending:
                self._resolve(b, self._pending.popleft())
            if self._awaiting and b is self._backend:
                try:
                    b.synchronize()  # CUPTI writes a kernel's record once it has finished
                except Exception:  # a faulted launch: the fault is raised where it is waited for
                    pass
                self._match(self._activity.take(), final=True)
            if self._kept:
                self._release_kept(wait=False)

    def _match(self, records: list, final: bool) -> int:
        """Give the awaiting launches, in order, the times of CUPTI's records
        (sorted by correlation id, that is in launch order). Before every
        kernel has finished, only the next awaiting launch can take a record,
        and records that came early are held; once all have (``final``), a
        launch whose record never came gets NaN."""
        if self._held:
            records = sorted(self._held + records)
            self._held = []
        awaiting = self._awaiting
        matched, last, kept = 0, -1, []
        for rec in records:
            corr, symbol = rec[0], rec[1]
            depth = min(len(awaiting), _LOOKAHEAD if final else 1)
            for i in range(depth):
                entry = awaiting[i]
                if (symbol == entry[START]) if entry[END] else (entry[START] in symbol):
                    break
            else:
                kept.append(rec)
                continue
            for _ in range(i):  # launches CUPTI reported no record for
                self._time(awaiting.popleft(), math.nan)
            self._time(awaiting.popleft(), (rec[3] - rec[2]) / 1e6, rec[2])
            matched, last = matched + 1, corr
        if final:
            while awaiting:
                self._time(awaiting.popleft(), math.nan)
        else:  # a record before the last matched one belongs to no awaiting launch
            self._held = [r for r in kept if r[0] > last][-self.MAX_RECORDS:]
        return matched

    def _time(self, rec: list, ms: float, start_ns: int | None = None) -> None:
        """A CUPTI-timed launch's time; its start on the timeline from CUPTI's
        clock, paired with the host clock when the first record is read
        (``cupti.get_timestamp()`` then ``time.time()``). Without
        ``get_timestamp`` in the binding, the first record's launch time stands
        in for its start (placing CUPTI-timed kernels up to a launch's latency
        early against event-timed copies)."""
        rec[MS] = ms
        rec[START] = rec[END] = None
        try:
            rec[STREAM] = self.stream_label(self._backend, rec[STREAM])
        except Exception:  # (a backend without streams: the label is made when asked)
            pass
        if start_ns is None:
            return
        if rec[DEVICE] is None:
            rec[DEVICE] = 0
        if self._cupti_offset is None:
            clock = getattr(self._activity, "timestamp_ns", None)
            now_ns = clock() if clock is not None else None
            if now_ns is not None:
                self._cupti_offset = time.time() * 1e3 - now_ns / 1e6
            else:
                self._cupti_offset = rec[WALL] * 1e3 - start_ns / 1e6
        rec[T0] = start_ns / 1e6 + self._cupti_offset

    def _resolve(self, b, rec: list) -> None:
        rec[T0] = None  # (the arrays a copy kept: it is done once its end event is)
        if rec[DEVICE] is None:
            rec[DEVICE] = _stream_device(b, rec[STREAM])
        try:
            rec[MS] = b.elapsed_ms(rec[START], rec[END])
        except Exception:  # e.g. a faulted launch: its time is unknown
            rec[MS] = float("nan")
        else:
            try:
                self._place(b, rec)
            except Exception:  # no start time: the record stays off the timeline
                rec[T0] = None
        # events go back to the pool of the device they were made on (the one
        # current when the work was queued)
        pool = self._pools.get(rec[DEVICE]) if b is self._backend else None
        if pool is not None:
            pool.append(rec[START])
            pool.append(rec[END])
        rec[START] = rec[END] = None
        rec[STREAM] = self.stream_label(b, rec[STREAM])  # (the log keeps no stream alive)

    def _place(self, b, rec: list) -> None:
        """Set the record's start time on the timeline (see :mod:`.clocks`)."""
        rec[T0] = self._clocks.place(b, rec[DEVICE], rec[START], rec[WALL])

    def clear(self) -> None:
        self.resolve_all()
        self.records.clear()

    def resolved(self) -> list:
        """Every record, its events read (copies of the lists)."""
        self.check_not_capturing("reading the timing log")
        self.resolve_all()
        return [list(r) for r in self.records]

    def check_not_capturing(self, what: str) -> None:
        """Raise in the thread capturing a graph: reading the log waits for the device."""
        capture = self.capture
        if capture is not None and capture.captures_here():
            raise WorkbenchError(
                f"{what} inside wb.graph(): reading the log waits for the device, which CUDA "
                "refuses while a graph is captured (the capture is lost); read it after the block")

    def to_pandas(self, kernel=None):
        """The log as a DataFrame (see :func:`timings`)."""
        self.check_not_capturing("wb.timings()")
        self.resolve_all()
        name = getattr(kernel, "name", kernel)
        rows = [r for r in self.records if name is None or r[KERNEL] == name]
        b = self._backend
        return table(rows, lambda stream: self.stream_label(b, stream))


def _stream_device(b, stream):
    try:
        return b.stream_device(stream)
    except Exception:
        return 0


def _device_of(b):
    try:
        return b.current_device()
    except Exception:
        return None
