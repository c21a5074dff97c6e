"""Streams, events and graphs: the order work runs in, the points that mark
it, and work recorded once and launched again.

Work on one stream runs in order; an event recorded on a stream marks the
point after the work queued before it. ``stream=None`` everywhere means the
current stream.
"""
from __future__ import annotations

import abc
import contextlib
from typing import Any


class Streams(abc.ABC):
    """Streams: made, made current, waited for, and the device they belong to.
    (:meth:`stream_done`'s default records an event: :class:`Events`.)"""

    @abc.abstractmethod
    def current_stream(self) -> Any: ...

    @abc.abstractmethod
    def create_stream(self, priority: int | None = None, non_blocking: bool = False) -> Any:
        """A new stream (``priority``: lower numbers run first, as CUDA's)."""

    @abc.abstractmethod
    def use_stream(self, stream) -> contextlib.AbstractContextManager:
        """A context manager making ``stream`` current for this thread."""

    @abc.abstractmethod
    def stream_synchronize(self, stream) -> None:
        """Wait for every piece of work queued on ``stream``."""

    def stream_done(self, stream) -> bool:
        """True when the work queued on ``stream`` so far has finished (never blocks)."""
        event = self.create_event()
        try:
            self.record_event(event, stream)
            return self.event_done(event)
        finally:
            self.destroy_event(event)

    @abc.abstractmethod
    def stream_wait_event(self, stream, event) -> None:
        """Work queued on ``stream`` from now on starts after ``event``
        (a dependency between streams; the host does not wait)."""

    @abc.abstractmethod
    def synchronize(self) -> None: ...

    def stream_device(self, stream) -> int:
        """The device ``stream`` belongs to (``None``: the current stream's)."""
        return self.current_device()

    def is_default_stream(self, stream) -> bool:
        """True for the stream a thread uses when it chose none."""
        return False

    def stream_pointer(self, stream) -> int:
        """The raw ``cudaStream_t`` of ``stream`` (``None``: the current one), for
        kernel languages with their own stream objects (Numba, Triton); 0, the
        legacy default stream, where the backend has no CUDA streams."""
        return 0


class Events(abc.ABC):
    """Events: recorded on a stream, waited for, and the time between two."""

    @abc.abstractmethod
    def create_event(self) -> Any: ...

    def destroy_event(self, event) -> None:
        """Free ``event`` (made by :meth:`create_event`); it is not used again."""

    @abc.abstractmethod
    def record_event(self, event, stream=None) -> None:
        """Mark the point after the work queued on ``stream``; the event and
        the stream must belong to one device (as CUDA requires)."""

    @abc.abstractmethod
    def event_synchronize(self, event) -> None:
        """Wait until the work before ``event`` has finished."""

    @abc.abstractmethod
    def event_done(self, event) -> bool:
        """True when the work before the event has finished (never blocks)."""

    @abc.abstractmethod
    def elapsed_ms(self, start, end) -> float:
        """Milliseconds between two recorded events (blocks until ``end``)."""

    def timeline_offset_ms(self, anchor, event) -> float:
        """Milliseconds from event ``anchor`` to ``event`` on the device's clock
        (both recorded on one device, in any order): where the timeline places work."""
        return self.elapsed_ms(anchor, event)


class Graphs(abc.ABC):
    """CUDA graphs: the work queued on a stream captured, then launched at once."""

    def begin_capture(self, stream) -> None:
        """Work queued on ``stream`` from now on is recorded into a graph, not run."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def end_capture(self, stream):
        """End a capture on ``stream``: a graph handle for :meth:`graph_launch`."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def graph_launch(self, graph, stream=None) -> None:
        """Queue every node of ``graph`` on ``stream``, in one launch."""
        raise NotImplementedError(f"the {self.name} backend cannot launch graphs")
