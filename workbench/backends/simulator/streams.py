"""Streams and events on the simulator.

Launches are synchronous: when one returns, its kernel has finished. So work
on every stream runs in the order it was queued, every stream is idle, and
an event's work is done when it is recorded: the ordering CUDA promises
holds trivially and waiting never blocks. What remains is which stream is
current, per Python thread as in CUDA, what an event measured, and graph
capture: while a stream captures, kernels and copies queued on it are kept
(``capture``), not run, and a graph launch runs them in order.
"""
from __future__ import annotations

import contextlib
import threading
import time

from ...errors import ArgumentValueError, DeviceError, WorkbenchError
from ..contract import Events, Graphs, Streams


class SimStream:
    """A simulator stream (see the module docstring)."""

    __slots__ = ("priority", "non_blocking", "device", "capture", "invalidated", "__weakref__")

    def __init__(self, priority: int = 0, non_blocking: bool = False, device: int | None = 0):
        self.priority = priority
        self.non_blocking = non_blocking
        #: its device; None for the default (null) stream, which, as CUDA's
        #: legacy stream handle 0, is the current device's wherever it is used
        self.device = device
        #: While capturing: the operations queued, ``(callable, args)`` each.
        self.capture = None
        #: what invalidated the capture going on (CUDA then fails its end)
        self.invalidated = None

    def synchronize(self) -> None:
        """Nothing to wait for: launches are synchronous."""

    def __repr__(self) -> str:
        return (f"<simulator stream{' (default)' if self is DEFAULT_STREAM else ''}"
                f"{f' (device {self.device})' if self.device else ''}>")


#: The stream current in a thread that chose none (CUDA's legacy default stream).
DEFAULT_STREAM = SimStream(device=None)


class SimEvent:
    """A point in time on the CPU plus the kernel time run before it, on one
    device (the one current when it was made, as a CUDA event's). ``captured``:
    recorded into a graph capture (CUDA then refuses to query or wait for it)."""

    __slots__ = ("wall", "kernel_ns", "recorded", "device", "captured")

    def __init__(self, device: int = 0):
        self.wall = 0.0
        self.kernel_ns = 0
        self.recorded = False
        self.device = device
        self.captured = False

    def record(self, kernel_ns: int) -> None:
        """Mark now, after ``kernel_ns`` nanoseconds of kernels in all."""
        self.wall = time.perf_counter()
        self.kernel_ns = kernel_ns
        self.recorded = True
        self.captured = False


class CurrentStream(threading.local):
    """The current stream of each Python thread."""

    stream: SimStream | None = None  # None: the default stream of the current device

    @contextlib.contextmanager
    def use(self, stream: SimStream):
        """Make ``stream`` current in this thread until the block ends."""
        previous, self.stream = self.stream, stream
        try:
            yield stream
        finally:
            self.stream = previous


def elapsed_ms(start: SimEvent, end: SimEvent) -> float:
    """Kernel run time between the events (measured in the worker, without
    the round trip to it); wall-clock time when no kernel ran between them."""
    if not (start.recorded and end.recorded):
        raise ArgumentValueError("both events must be recorded before elapsed_ms")
    if end.kernel_ns != start.kernel_ns:
        return (end.kernel_ns - start.kernel_ns) / 1e6
    return (end.wall - start.wall) * 1e3


class SimulatorStreams(Streams, Events, Graphs):
    """The streams, events and graphs of :class:`~.backend.SimulatorBackend`."""

    def current_stream(self) -> SimStream:
        stream = self._current.stream
        return DEFAULT_STREAM if stream is None else stream

    def stream_device(self, stream) -> int:
        device = (stream if stream is not None else self.current_stream()).device
        return self.current_device() if device is None else device  # the null stream: current

    def is_default_stream(self, stream) -> bool:
        return stream is DEFAULT_STREAM

    def create_stream(self, priority: int | None = None, non_blocking: bool = False) -> SimStream:
        return SimStream(priority or 0, non_blocking, self.current_device())

    def use_stream(self, stream):
        return self._current.use(stream if stream is not None else self.current_stream())

    def stream_synchronize(self, stream) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            _refuse_in_capture("waiting for a capturing stream (cudaStreamSynchronize)", stream)
        # launches are synchronous: nothing to wait for

    def stream_done(self, stream) -> bool:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            _refuse_in_capture("asking whether a capturing stream is done (cudaStreamQuery)", stream)
        return True

    def create_event(self) -> SimEvent:
        return SimEvent(self.current_device())

    def destroy_event(self, event) -> None:
        event.recorded = False

    def record_event(self, event, stream=None) -> None:
        if stream is None:
            stream = self.current_stream()
        device = stream.device  # (stream_device, inline: the timing log records two per launch)
        if device is None:
            device = self.current_device()
        if device != event.device:  # cudaErrorInvalidResourceHandle on a GPU
            raise DeviceError(f"an event of device {event.device} recorded on a stream of "
                              f"device {device}: CUDA records an event on a stream of "
                              "its own device only")
        event.record(self._kernel_ns)
        event.captured = stream.capture is not None

    def stream_wait_event(self, stream, event) -> None:
        pass  # the event's work had finished when it was recorded

    def event_synchronize(self, event) -> None:
        if event.captured:
            _refuse_in_capture("waiting for an event recorded in a capture")

    def event_done(self, event) -> bool:
        if event.captured:
            _refuse_in_capture("asking whether an event recorded in a capture is done")
        return bool(event.recorded)

    def elapsed_ms(self, start, end) -> float:
        """Kernel run time between the events (measured in the worker, without
        the round trip to it); wall-clock time when no kernel ran between them."""
        return elapsed_ms(start, end)

    def timeline_offset_ms(self, anchor, event) -> float:
        """Wall-clock time between the events: launches run one after another
        on the CPU, so work placed by it never overlaps."""
        return (event.wall - anchor.wall) * 1e3

    def synchronize(self) -> None:
        if self._capturing:
            _refuse_in_capture("waiting for the device (cudaDeviceSynchronize)", *self._capturing)

    def begin_capture(self, stream) -> None:
        if stream.capture is not None:
            raise WorkbenchError("this stream is capturing already: end that capture (leave "
                                 "its wb.graph() block) before starting another on it")
        stream.capture = []
        self._capturing.add(stream)

    def end_capture(self, stream):
        ops, stream.capture = stream.capture, None
        invalidated, stream.invalidated = stream.invalidated, None
        self._capturing.discard(stream)
        if ops is None:
            raise WorkbenchError("end_capture on a stream that is not capturing")
        if invalidated:  # cudaErrorStreamCaptureInvalidated
            raise WorkbenchError(f"the capture was invalidated by {invalidated}")
        return tuple(ops)

    def graph_launch(self, graph, stream=None) -> None:
        """Run the captured operations in order (on the simulator, as the
        GPU does, a graph launched while a stream captures is captured)."""
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.graph_launch, (graph, None)))
            return
        for op, args in graph:
            op(*args)


def _refuse_in_capture(what: str, *streams):
    """CUDA's answer to a call that would wait for work being captured: the
    call fails and the capture of ``streams`` is invalidated (its end fails)."""
    for stream in streams:
        if stream.capture is not None and stream.invalidated is None:
            stream.invalidated = what
    raise WorkbenchError(f"{what} inside a graph capture: CUDA refuses it and the capture is "
                         "lost. Inside wb.graph() leave out wb.synchronize(), "
                         "Stream.synchronize(), .done, wb.timings() and launch(sync=True)")
