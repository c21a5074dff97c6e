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
        raise ValueError("both events must be recorded before elapsed_ms")
    if end.kernel_ns != start.kernel_ns:
        return (end.kernel_ns - start.kernel_ns) / 1e6
    return (end.wall - start.wall) * 1e3
