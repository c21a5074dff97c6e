"""The GPU backend's copies, memory kinds (pinned, managed), peers and
graphs, through CuPy and the CUDA runtime (a part of :class:`CupyBackend`,
kept apart to keep modules small)."""
from __future__ import annotations

import cupy
import cupyx
import numpy
from cupy.cuda import runtime

from ...errors import DeviceError
from .faults import _faults_as_kernel_faults

_H2D, _D2H, _D2D = 1, 2, 3  # cudaMemcpyKind


class CupyTransfers:
    """Copies, memsets, pinned and managed memory, peers and graphs (mixed
    into :class:`~workbench.backends.gpu.backend.CupyBackend`)."""

    # -- copies, memory kinds, peers, graphs ------------------------------------------------
    def copy(self, dst, src, stream=None) -> None:
        s = (stream if stream is not None else cupy.cuda.get_current_stream()).ptr
        nbytes = int(src.nbytes)
        with _faults_as_kernel_faults():
            if isinstance(dst, cupy.ndarray):
                if isinstance(src, cupy.ndarray):
                    d, e = dst.device.id, src.device.id
                    if d != e:  # through NVLink/PCIe directly where peers can, else staged
                        runtime.memcpyPeerAsync(dst.data.ptr, d, src.data.ptr, e, nbytes, s)
                    else:
                        runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, _D2D, s)
                else:
                    runtime.memcpyAsync(dst.data.ptr, src.ctypes.data, nbytes, _H2D, s)
            else:
                runtime.memcpyAsync(dst.ctypes.data, src.data.ptr, nbytes, _D2H, s)

    def memset(self, array, value: int, stream=None) -> None:
        s = (stream if stream is not None else cupy.cuda.get_current_stream()).ptr
        with _faults_as_kernel_faults():
            runtime.memsetAsync(array.data.ptr, int(value), int(array.nbytes), s)

    def array_device(self, array) -> int:
        return array.device.id

    def alloc_pinned(self, shape, dtype):
        return cupyx.empty_pinned(shape, dtype=dtype)

    def alloc_managed(self, shape, dtype):
        dtype = numpy.dtype(dtype)
        size = int(numpy.prod(shape)) * dtype.itemsize
        return cupy.ndarray(shape, dtype, memptr=cupy.cuda.malloc_managed(max(size, 1)))

    def release_pinned_cache(self) -> None:
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def managed_prefetch_supported(self, index: int | None = None) -> bool:
        return bool(self.device_attribute("cudaDevAttrConcurrentManagedAccess", index))

    def prefetch(self, array, device: int, stream=None) -> None:
        mem = getattr(array.data, "mem", None)
        if not isinstance(mem, cupy.cuda.memory.ManagedMemory):
            raise DeviceError("prefetch takes a managed array (wb.managed(...))")
        s = stream if stream is not None else cupy.cuda.get_current_stream()
        try:
            mem.prefetch(s, device_id=device)
        except TypeError:  # an older CuPy: prefetch to the memory's own device only
            if device != mem.device_id:
                raise DeviceError(f"this CuPy prefetches to device {mem.device_id} only") from None
            mem.prefetch(s)

    _ADVICE = {"read_mostly": 1, "unset_read_mostly": 2, "preferred_location": 3,
               "unset_preferred_location": 4, "accessed_by": 5, "unset_accessed_by": 6}

    def advise(self, array, advice: str, device: int) -> None:
        mem = getattr(array.data, "mem", None)
        if not isinstance(mem, cupy.cuda.memory.ManagedMemory):
            raise DeviceError("advise takes a managed array (wb.managed(...))")
        try:
            code = self._ADVICE[advice]
        except KeyError:
            raise DeviceError(f"unknown advice {advice!r}; one of {', '.join(self._ADVICE)}") from None
        mem.advise(code, cupy.cuda.Device(device))

    def enable_peer_access(self, index: int, peer: int) -> bool:
        if not self.can_access_peer(index, peer):
            return False
        with cupy.cuda.Device(index):
            try:
                runtime.deviceEnablePeerAccess(peer)
            except runtime.CUDARuntimeError as exc:
                if "already" not in str(exc).lower():  # cudaErrorPeerAccessAlreadyEnabled
                    raise
        return True

    def begin_capture(self, stream) -> None:
        stream.begin_capture()  # relaxed mode: the memory pool may still cudaMalloc

    def end_capture(self, stream):
        return stream.end_capture()

    def graph_launch(self, graph, stream=None) -> None:
        with _faults_as_kernel_faults():
            graph.launch(stream=stream if stream is not None else cupy.cuda.get_current_stream())
