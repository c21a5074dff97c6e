"""The GPU backend's arrays and memory (:class:`CupyMemory`): CuPy arrays,
copies and memsets through the CUDA runtime, CuPy's memory pool (and the
allocator of our own that memory tracking puts around it, :mod:`.allocations`),
pinned and managed memory."""
from __future__ import annotations

import cupy
import cupyx
import numpy
from cupy.cuda import runtime

from ...errors import DeviceError
from ..contract import Arrays, MemoryKinds, MemoryPool
from ..initialisation import InitTracker
from . import allocations, persistent
from .faults import _faults_as_kernel_faults

_H2D, _D2H, _D2D = 1, 2, 3  # cudaMemcpyKind


class _AllocatedMemory(cupy.cuda.memory.BaseMemory):
    """The block of an array of :meth:`CupyMemory.allocate`: when CuPy drops
    it, the backend forgets the block's written bytes before the block goes
    back to the allocator (which may hand the address out again)."""

    __slots__ = ("_block", "_backend")

    def __del__(self):
        try:
            tracker = self._backend._init_tracker
            if tracker is not None:
                tracker.freed(self.ptr)
        except Exception:  # forgetting must never break freeing (nor the interpreter's exit)
            pass
        self._block = None


class CupyMemory(Arrays, MemoryPool, MemoryKinds):
    """Arrays, copies, the pool and the memory kinds of
    :class:`~.backend.CupyBackend`."""

    device_array_type = cupy.ndarray

    # -- arrays and copies ---------------------------------------------------------------
    @property
    def xp(self):
        return cupy

    _init_tracker = None

    def allocate(self, shape, dtype):
        # The block comes from CuPy's allocator as for cupy.empty (the pool,
        # through memory tracking's allocator while it tracks), wrapped so that
        # its free reaches the written-bytes tracker without an allocation
        # listener: a listener would make tracking's allocator CuPy's for good.
        dtype = numpy.dtype(dtype)
        nbytes = int(numpy.prod(shape)) * dtype.itemsize
        if nbytes <= 0:
            return cupy.empty(shape, dtype=dtype)
        pool = cupy.get_default_memory_pool()
        limit = pool.get_limit()
        if limit:
            # CuPy checks its limit only when it asks the driver for more: a block cached
            # from before the limit (or one split by a live array) would be handed out past it
            used = pool.used_bytes()
            if used + nbytes > limit:
                raise cupy.cuda.memory.OutOfMemoryError(nbytes, used, limit)
        block = cupy.cuda.alloc(nbytes)
        mem = _AllocatedMemory()
        mem.ptr = block.ptr
        mem.size = block.mem.size
        mem.device_id = block.device_id
        mem._block = block
        mem._backend = self
        return cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(mem, 0))

    def initialisation(self) -> InitTracker:
        """The written-bytes tracker; the arrays of :meth:`allocate` tell it of
        their frees themselves (no allocation listener: see ``allocate``)."""
        if self._init_tracker is None:
            self._init_tracker = InitTracker()
        return self._init_tracker

    def to_device(self, host_array):
        array = cupy.asarray(host_array)
        dtype = getattr(host_array, "dtype", None)
        if dtype is not None and dtype.names and array.dtype != dtype:
            array = array.view(dtype)  # (a CuPy that keeps a record's bytes but not its fields)
        return array

    def to_host(self, device_array):
        with _faults_as_kernel_faults():
            return cupy.asnumpy(device_array)

    def is_device_array(self, obj) -> bool:
        return isinstance(obj, cupy.ndarray)

    def array_device(self, array) -> int:
        return array.device.id

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
        self.mark_written(dst)

    def memset(self, array, value: int, stream=None) -> None:
        s = (stream if stream is not None else cupy.cuda.get_current_stream()).ptr
        with _faults_as_kernel_faults():
            runtime.memsetAsync(array.data.ptr, int(value), int(array.nbytes), s)
        self.mark_written(array)

    def read_device_bytes(self, address: int, nbytes: int):
        host = numpy.empty(int(nbytes), dtype=numpy.uint8)
        with _faults_as_kernel_faults():
            runtime.deviceSynchronize()
            runtime.memcpy(host.ctypes.data, int(address), int(nbytes), _D2H)
        return host

    # -- the pool -------------------------------------------------------------------------
    def add_allocation_listener(self, on_alloc, on_free):
        return allocations.add_allocation_listener(on_alloc, on_free)

    def pool_stats(self) -> dict[str, int]:
        pool = cupy.get_default_memory_pool()
        return {"used_bytes": pool.used_bytes(), "total_bytes": pool.total_bytes(),
                "free_blocks": pool.n_free_blocks(), "limit": pool.get_limit(),
                "pinned_free_blocks": cupy.get_default_pinned_memory_pool().n_free_blocks()}

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, (MemoryError, cupy.cuda.memory.OutOfMemoryError))

    @property
    def pool_reserved_bytes(self):
        # The pool's own bound method: `backend.pool_reserved_bytes()` reads it as
        # before, and the memory tracker, which calls it on every allocation,
        # skips a Python frame per call.
        return cupy.get_default_memory_pool().total_bytes

    def set_pool_limit(self, nbytes: int | None) -> None:
        cupy.get_default_memory_pool().set_limit(size=nbytes or 0)  # CuPy: 0 is no cap

    def empty_cache(self) -> None:
        persistent.refuse_while_running("give cached memory back (cudaFree synchronises)")
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    # -- pinned and managed memory ----------------------------------------------------------
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
