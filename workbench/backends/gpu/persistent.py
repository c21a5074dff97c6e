"""Persistent kernels on the GPU through CuPy (see :mod:`..contract.persistent`).

Mapped memory is ``cudaHostAlloc(cudaHostAllocMapped | cudaHostAllocPortable)``:
page-locked host memory the device reaches over PCIe/NVLink at the address
``cudaPointerGetAttributes`` gives (the host address itself under unified
addressing). A persistent launch goes to a stream of its own created
non-blocking, so the legacy default stream, and the user's work on it, never
waits for it; an event recorded after it says when it ended.
"""
from __future__ import annotations

import ctypes
import time

import cupy
import numpy as np
from cupy.cuda import runtime

from ...errors import DeviceBusy
from ..contract import MappedBuffer, PersistentLaunch

_HOST_ALLOC_PORTABLE = 0x01
_HOST_ALLOC_MAPPED = 0x02
_NOT_READY = 600  # cudaErrorNotReady

#: Persistent launches not yet seen to end, held strongly (a kernel stuck in a
#: handler outlives its Ring), so that a device-wide synchronise can leave them
#: out (it would otherwise wait for ever) and module loads can be refused.
running: "set[GpuPersistentLaunch]" = set()


def refuse_while_running(doing: str) -> None:
    """Raise DeviceBusy while a persistent kernel runs: loading a module (CUDA
    loads kernels lazily, and a load may synchronise the whole context) or
    page-locking memory can wait for it for ever."""
    busy = [launch.kernel for launch in list(running) if not launch.done()]
    if busy:
        raise DeviceBusy(
            f"cannot {doing} while a persistent kernel runs on this GPU ({', '.join(busy)}): "
            "CUDA may synchronise the whole device for it, which would wait for the ring "
            "for ever. Stop the ring first (ring.stop()), then start it again afterwards.")


def alloc_mapped(nbytes: int) -> MappedBuffer:
    """Page-locked, mapped host memory of ``nbytes`` (at least 1)."""
    nbytes = max(1, int(nbytes))
    refuse_while_running("page-lock host memory for a ring")
    ptr = runtime.hostAlloc(nbytes, _HOST_ALLOC_MAPPED | _HOST_ALLOC_PORTABLE)
    host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
    device_ptr = runtime.pointerGetAttributes(ptr).devicePointer  # == ptr under unified addressing
    return MappedBuffer(host, device_ptr, lambda: runtime.freeHost(ptr))


class GpuPersistentLaunch(PersistentLaunch):
    """A kernel running on its own non-blocking stream."""

    def __init__(self, launch, kernel: str, fault_of):
        self.kernel = kernel
        self._fault_of = fault_of
        self.stream = cupy.cuda.Stream(non_blocking=True)
        # the arguments were written on the user's streams; a non-blocking stream does not
        # wait for them by itself
        self.stream.wait_event(cupy.cuda.Stream.null.record())
        self.stream.wait_event(cupy.cuda.get_current_stream().record())
        with self.stream:
            launch()
        self._ended = cupy.cuda.Event(disable_timing=True)
        self._ended.record(self.stream)
        self._fault = None
        running.add(self)

    def done(self) -> bool:
        try:
            # the status itself: a faulted kernel's event never completes, and
            # Event.done only says "not yet"
            status = runtime.eventQuery(self._ended.ptr)
            if status not in (0, _NOT_READY):
                raise runtime.CUDARuntimeError(status)
            finished = status == 0
        except (runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as exc:
            self._fault = self._fault_of(exc) or exc
            finished = True
        if finished:
            running.discard(self)
        return finished

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(50e-6)
        if self._fault is not None:
            raise self._fault
        return True

    def kill(self) -> bool:
        return False  # a running kernel cannot be stopped from the host


def synchronize_except_persistent() -> bool:
    """When persistent kernels run, synchronise the streams the user's work
    goes to (the current one and the legacy default stream) instead of the
    whole device; True if it did (False: nothing persistent runs)."""
    if not any(not launch.done() for launch in list(running)):
        return False
    cupy.cuda.get_current_stream().synchronize()
    cupy.cuda.Stream.null.synchronize()
    return True
