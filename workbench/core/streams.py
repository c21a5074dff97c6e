"""Streams and events: ``wb.Stream``, ``wb.Event``.

A :class:`Stream` is a queue of work on one device: kernels and copies queued
on it run in order; work on different streams may overlap. ``with s:`` makes
it current, so kernel calls and copies without ``stream=`` go to it. An :class:`Event` marks a point in a stream:
``e.record(a); e.wait(b)`` makes the work queued on ``b`` afterwards start only
after the work queued on ``a`` before it, without the host waiting.

Everything goes through the backend's streams and events (CuPy's on the GPU;
on the simulator launches are synchronous, so the ordering holds trivially).
Every launch and copy is logged with its stream: ``wb.timings()`` has a
``stream`` column and ``wb.timeline()`` draws one lane per stream.
"""
from __future__ import annotations

import contextlib
import itertools

import numpy as np

from ..errors import ArgumentTypeError, WorkbenchError
from ..present.tables import html_fields
from ..runtime.devices import check_index, on_device
from ..runtime.session import backend, session

_numbers = itertools.count(1)


def raw_stream(stream):
    """The backend's stream for ``stream`` (a :class:`Stream`, or a backend
    stream passed through); ``None`` stays ``None``."""
    return stream.raw if isinstance(stream, Stream) else stream


def stream_and_device(b, stream, what: str) -> tuple:
    """``(backend stream, its device)`` for an explicit ``stream=`` argument (a
    :class:`Stream` or a backend stream); a clear error for anything else."""
    if isinstance(stream, Stream):
        return stream.raw, stream.device
    try:
        return stream, b.stream_device(stream)
    except Exception:
        raise WorkbenchError(f"{what}: stream= takes a wb.Stream (wb.Stream(), "
                             f"wb.Stream.current()), got {type(stream).__name__} {stream!r}") from None


def launch_stream(b, stream, what: str):
    """The backend stream of an explicit ``stream=`` for a kernel launch: CUDA
    launches a kernel only on a stream of the current device."""
    raw, device = stream_and_device(b, stream, what)
    if device != b.current_device():
        raise WorkbenchError(
            f"{what}: stream= is a stream of device {device} but device {b.current_device()} is "
            f"current, and CUDA launches only on the current device's streams. Use "
            f"`with s:` (it makes the stream's device current) and leave out stream=.")
    return raw


@contextlib.contextmanager
def queued_on(b, stream, what: str):
    """Run the block with ``stream`` (explicit, or None: the current one)
    and its device current; yields the backend stream. Copies and memsets on
    another device's stream are queued from that device, as CUDA requires of
    the events that time them."""
    if stream is None:
        yield b.current_stream()
        return
    raw, device = stream_and_device(b, stream, what)
    with on_device(b, device):
        yield raw


def refuse_in_capture(what: str) -> None:
    """Raise if the calling thread is capturing a graph (``what`` would wait
    for work that is being recorded, not run: CUDA invalidates the capture)."""
    capture = session().timing_log.capture
    if capture is not None and capture.captures_here():
        raise WorkbenchError(
            f"{what} inside wb.graph(): it waits for work that the graph records but does not "
            "run, and CUDA invalidates the capture. Inside the block leave out "
            "wb.synchronize(), Stream.synchronize(), .done, wb.timings() and launch(sync=True); "
            "call them after the block.")


class Stream:
    """A CUDA stream on one device (default: the current one).

    ``priority``: lower numbers run first where the device has priorities
    (CUDA's convention; 0 is the default). ``name`` labels its lane in
    :func:`workbench.timeline` and the ``stream`` column of
    :func:`workbench.timings` (default ``"stream N"``). ``non_blocking``: the
    stream does not wait for CUDA's legacy default stream.
    """

    def __init__(self, priority: int | None = None, device: int | None = None,
                 name: str | None = None, non_blocking: bool = False):
        if priority is not None and (not isinstance(priority, (int, np.integer))
                                     or isinstance(priority, bool)):
            raise ArgumentTypeError(
                f"wb.Stream(priority=...) takes an int (lower runs first; 0 is the "
                f"default), got {priority!r}")
        b = self.backend = backend()
        if device is not None:
            check_index(b, device)
        self.device = b.current_device() if device is None else int(device)
        self.priority = priority or 0
        self.name = name or f"stream {next(_numbers)}"
        with on_device(b, self.device):
            self.raw = b.create_stream(priority=priority, non_blocking=non_blocking)
        session().timing_log.name_stream(self.raw, self.name)
        self._uses: list = []

    @classmethod
    def current(cls) -> "Stream":
        """The current stream of this thread as a :class:`Stream`."""
        b = backend()
        s = cls.__new__(cls)
        s.backend, s.raw = b, b.current_stream()
        s.device, s.priority = b.stream_device(s.raw), 0
        s.name = session().timing_log.stream_label(b, s.raw)
        s._uses = []
        return s

    def synchronize(self) -> None:
        """Wait (on the host) until every piece of work queued on the stream is done."""
        refuse_in_capture("Stream.synchronize()")
        self.backend.stream_synchronize(self.raw)

    def record(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one when None) here; returns it."""
        event = event if event is not None else Event(device=self.device)
        return event.record(self)

    def wait(self, event: "Event") -> "Stream":
        """Work queued here from now on starts after ``event`` (the host does not wait)."""
        event.wait(self)
        return self

    @property
    def done(self) -> bool:
        """True when the work queued so far has finished (never blocks)."""
        refuse_in_capture("Stream.done")
        return self.backend.stream_done(self.raw)

    def __enter__(self) -> "Stream":
        context = stream(self)
        self._uses.append(context)
        context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._uses.pop().__exit__(*exc)

    def __repr__(self) -> str:
        extra = f", priority {self.priority}" if self.priority else ""
        return f"<wb.Stream {self.name!r} on device {self.device}{extra} | {self.backend.name}>"

    def _repr_html_(self) -> str:
        return html_fields((("stream", self.name), ("device", self.device),
                            ("priority", self.priority), ("backend", self.backend.name)))


@contextlib.contextmanager
def stream(s: Stream):
    """``with stream(s):`` (what ``with s:`` does) kernel calls and copies
    without ``stream=`` go to ``s`` (its device becomes current for the block,
    as CUDA requires)."""
    if not isinstance(s, Stream):
        raise ArgumentTypeError(f"wb.stream() takes a wb.Stream, got {type(s).__name__}; "
                                "make one with wb.Stream()")
    b = s.backend
    if b is not backend():
        raise WorkbenchError(f"{s!r} belongs to another backend than the active one; "
                             "make a new wb.Stream()")
    with on_device(b, s.device), b.use_stream(s.raw):
        yield s


class Event:
    """A CUDA event: a point in a stream's work.

    ``record(stream=None)`` marks the point after the work queued so far,
    ``wait(stream=None)`` makes later work on another stream wait for it,
    ``synchronize()`` waits on the host, ``done`` asks without waiting, and
    ``elapsed_ms(end)`` (or ``end - start``) is the milliseconds between two
    recorded events of one device.
    """

    def __init__(self, device: int | None = None):
        self.raw = None
        b = self.backend = backend()
        if device is not None:
            check_index(b, device)
        self.device = b.current_device() if device is None else int(device)
        with on_device(b, self.device):
            self.raw = b.create_event()
        self.recorded = False

    def __del__(self):
        raw, self.raw = getattr(self, "raw", None), None
        if raw is not None:
            try:
                self.backend.destroy_event(raw)
            except Exception:  # (at exit, the context may be gone)
                pass

    def record(self, stream: Stream | None = None) -> "Event":
        """Mark the point after the work queued on ``stream`` (None: the
        current stream of the event's device). A CUDA event is recorded on a
        stream of its own device only."""
        b = self.backend
        if stream is None:
            with on_device(b, self.device):  # (the null stream is the current device's)
                b.record_event(self.raw, b.current_stream())
            self.recorded = True
            return self
        raw, device = stream_and_device(b, stream, "Event.record()")
        if device != self.device:
            raise WorkbenchError(
                f"Event.record(): the event belongs to device {self.device} and the stream to "
                f"device {device}; CUDA records an event on its own device's streams only: "
                f"make it with wb.Event(device={device}) or s.record()")
        b.record_event(self.raw, raw)
        self.recorded = True
        return self

    def wait(self, stream: Stream | None = None) -> "Event":
        """Work queued on ``stream`` (None: the current one) from now on starts
        after this event; the host does not wait."""
        self._check_recorded("wait")
        raw = (stream_and_device(self.backend, stream, "Event.wait()")[0] if stream is not None
               else self.backend.current_stream())
        self.backend.stream_wait_event(raw, self.raw)
        return self

    def synchronize(self) -> None:
        """Wait on the host until the work before the event is done."""
        self._check_recorded("synchronize")
        refuse_in_capture("Event.synchronize()")
        self.backend.event_synchronize(self.raw)

    @property
    def done(self) -> bool:
        """True when the work before the event has finished (never blocks)."""
        refuse_in_capture("Event.done")
        return self.recorded and self.backend.event_done(self.raw)

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (waits for ``end``)."""
        self._check_recorded("elapsed_ms")
        end._check_recorded("elapsed_ms")
        refuse_in_capture("Event.elapsed_ms()")
        if end.device != self.device:
            raise WorkbenchError(f"events of devices {self.device} and {end.device} have no "
                                 "common clock; time each device with its own events")
        return self.backend.elapsed_ms(self.raw, end.raw)

    def __sub__(self, start: "Event") -> float:
        return start.elapsed_ms(self)

    def _check_recorded(self, what: str) -> None:
        if not self.recorded:
            raise WorkbenchError(f"Event.{what}(): the event was never recorded; call "
                                 "event.record(stream) first")

    def __repr__(self) -> str:
        capture = session().timing_log.capture
        if capture is not None and capture.captures_here():
            state = "recorded" if self.recorded else "not recorded"
        else:
            state = ("done" if self.done else "pending") if self.recorded else "not recorded"
        return f"<wb.Event on device {self.device}: {state} | {self.backend.name}>"
