"""The GPU backend's streams, events and graphs (:class:`CupyStreams`):
CuPy's streams, raw CUDA runtime events (cheaper than ``cupy.cuda.Event`` on
the launch path), and CuPy's stream capture."""
from __future__ import annotations

import contextlib

import cupy
from cupy.cuda import runtime

from ..contract import Events, Graphs, Streams
from . import persistent
from .faults import _faults_as_kernel_faults


class CupyStreams(Streams, Events, Graphs):
    """The streams, events and graphs of :class:`~.backend.CupyBackend`."""

    def current_stream(self):
        return cupy.cuda.get_current_stream()

    def stream_pointer(self, stream) -> int:
        return int((stream if stream is not None else cupy.cuda.get_current_stream()).ptr)

    def create_stream(self, priority: int | None = None, non_blocking: bool = False):
        return cupy.cuda.Stream(non_blocking=non_blocking, priority=priority or 0)

    def use_stream(self, stream):
        # a cupy.cuda.Stream is its own context manager
        return stream if stream is not None else contextlib.nullcontext(self.current_stream())

    def stream_synchronize(self, stream) -> None:
        with _faults_as_kernel_faults():
            (stream or cupy.cuda.get_current_stream()).synchronize()

    def create_event(self):
        return runtime.eventCreate()

    def destroy_event(self, event) -> None:
        runtime.eventDestroy(event)

    def stream_done(self, stream) -> bool:
        return (stream or cupy.cuda.get_current_stream()).done  # cudaStreamQuery

    def stream_wait_event(self, stream, event) -> None:
        runtime.streamWaitEvent((stream or cupy.cuda.get_current_stream()).ptr, event, 0)

    def event_synchronize(self, event) -> None:
        with _faults_as_kernel_faults():
            runtime.eventSynchronize(event)

    def record_event(self, event, stream=None) -> None:
        runtime.eventRecord(event, (stream or cupy.cuda.get_current_stream()).ptr)

    def event_done(self, event) -> bool:
        try:
            return runtime.eventQuery(event) == 0
        except runtime.CUDARuntimeError:  # cudaErrorNotReady
            return False

    def elapsed_ms(self, start, end) -> float:
        with _faults_as_kernel_faults():
            runtime.eventSynchronize(end)
            return runtime.eventElapsedTime(start, end)

    def synchronize(self) -> None:
        with _faults_as_kernel_faults():
            if not persistent.synchronize_except_persistent():
                runtime.deviceSynchronize()

    def stream_device(self, stream) -> int:
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        if not hasattr(stream, "ptr"):
            raise TypeError(f"not a CUDA stream: {stream!r}")
        device = getattr(stream, "device_id", -1)
        return device if device >= 0 else runtime.getDevice()  # -1: the null stream singletons

    def is_default_stream(self, stream) -> bool:
        return int(stream.ptr) in (0, 1, 2)  # legacy, per-thread or null

    def begin_capture(self, stream) -> None:
        stream.begin_capture()  # relaxed mode: the memory pool may still cudaMalloc

    def end_capture(self, stream):
        return stream.end_capture()

    def graph_launch(self, graph, stream=None) -> None:
        with _faults_as_kernel_faults():
            graph.launch(stream=stream if stream is not None else cupy.cuda.get_current_stream())
