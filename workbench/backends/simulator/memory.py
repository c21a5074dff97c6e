"""The simulator's arrays and memory (:class:`SimulatorMemory`): device
arrays are NumPy arrays over the shared :mod:`.arena`, which is also the
pool; pinned host memory is plain host memory and managed memory the arena."""
from __future__ import annotations

import ctypes

import numpy as np

from ...errors import ArgumentTypeError, DeviceError
from ..contract import Arrays, MemoryKinds, MemoryPool
from .arena import Arena
from .launch import address
from .protocol import ARENA_RESERVED
from .xp import ArrayNamespace, DeviceArray, empty_in, in_arena


class SimulatorMemory(Arrays, MemoryPool, MemoryKinds):
    """Arrays, copies, the pool and the memory kinds of
    :class:`~.backend.SimulatorBackend` (the arena is made on first use)."""

    # -- arrays and copies ----------------------------------------------------------
    @property
    def arena(self) -> Arena:
        if self._arena is None:
            self._arena = Arena(self._properties.total_memory)
            self._printf_words = memoryview(self._arena.control[:64]).cast("Q")
            self._array_class = type("DeviceArray", (DeviceArray,), {"_arena": self._arena,
                                                                     "__module__": __name__})
        return self._arena

    @property
    def array_class(self):
        self.arena  # noqa: B018 (creates the class)
        return self._array_class

    @property
    def xp(self):
        if self._xp is None:
            self._xp = ArrayNamespace(self.array_class)
        return self._xp

    def allocate(self, shape, dtype):
        array = empty_in(self.array_class, shape, dtype)
        if self.devices > 1:
            self._tag_device(array)
        return array

    def _tag_device(self, array) -> None:
        device = self.current_device()
        if device:
            self._array_devices[self.device_pointer(array)] = device
        else:
            self._array_devices.pop(self.device_pointer(array), None)

    def array_device(self, array) -> int:
        return self._array_devices.get(self.device_pointer(array), 0) if self.devices > 1 else 0

    def to_device(self, host_array):
        if self.is_device_array(host_array):
            return host_array
        arr = np.asarray(host_array)
        if arr.dtype == object:
            raise ArgumentTypeError("cannot copy an array of Python objects to the device; "
                                    "give a numeric NumPy array")
        dest = self.allocate(arr.shape, arr.dtype)
        np.copyto(dest.view(np.ndarray), arr)
        return dest

    def to_host(self, device_array):
        return np.array(np.asarray(device_array).view(np.ndarray), copy=True)

    def is_device_array(self, obj) -> bool:
        arena = self._arena
        if arena is None or not isinstance(obj, np.ndarray):
            return False
        if obj.flags.c_contiguous and obj.size:  # (the common case, without byte_bounds)
            start = address(obj)
            return arena.base + ARENA_RESERVED <= start and start + obj.nbytes <= arena.base + arena.size
        return in_arena(arena, obj)

    def device_pointer(self, array) -> int:
        return int(array.__array_interface__["data"][0])

    def foreign_array(self, obj) -> str | None:
        if isinstance(obj, DeviceArray) and not self.is_device_array(obj):
            return ("a device array of another simulator backend (one made before the device "
                    "or its memory size was changed); copy it over: wb.to_device(np.array(x))")
        return None

    def copy(self, dst, src, stream=None) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.copy, (dst, src, None)))
            return
        with self.lock:  # not while a kernel of another thread runs over the same memory
            np.copyto(np.asarray(dst).view(np.ndarray).reshape(-1).view(np.uint8),
                      np.asarray(src).view(np.ndarray).reshape(-1).view(np.uint8))
        self.mark_written(dst)

    def memset(self, array, value: int, stream=None) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.memset, (array, value, None)))
            return
        with self.lock:
            np.asarray(array).view(np.ndarray).reshape(-1).view(np.uint8)[...] = int(value) & 0xFF
        self.mark_written(array)

    def read_device_bytes(self, address: int, nbytes: int):
        """The arena's bytes (a view: no copy)."""
        return np.ctypeslib.as_array((ctypes.c_uint8 * int(nbytes)).from_address(int(address)))

    # -- the pool ----------------------------------------------------------------------
    def add_allocation_listener(self, on_alloc, on_free):
        return self.arena.add_listener(on_alloc, on_free)

    def pool_stats(self) -> dict[str, int]:
        return self.arena.stats()

    def pool_reserved_bytes(self) -> int:
        """In use plus cached bytes of the arena (cheap: for the memory timeline)."""
        return self.arena.reserved_bytes()

    def set_pool_limit(self, nbytes: int | None) -> None:
        """Cap the bytes in use below the virtual device's size (None or 0: no cap)."""
        self.arena.limit = int(nbytes) if nbytes else None

    def empty_cache(self) -> None:
        """Release the arena's free blocks to the host (as CuPy's free_all_blocks)."""
        self.arena.empty_cache()

    # -- pinned and managed memory ---------------------------------------------------------
    def alloc_pinned(self, shape, dtype):
        """Host memory is all alike on the simulator: a NumPy array."""
        return np.empty(shape, dtype=dtype)

    def alloc_managed(self, shape, dtype):
        """Device memory that the host reads and writes: the arena is both."""
        return self.allocate(shape, dtype)

    managed_in_pool = True

    def managed_prefetch_supported(self, index: int | None = None) -> bool:
        return True

    def prefetch(self, array, device: int, stream=None) -> None:
        if not -1 <= int(device) < self.devices:
            raise DeviceError(f"prefetch to device {device}: the simulator has {self.devices} "
                              f"device{'s' if self.devices != 1 else ''} (and -1, the host)")

    def advise(self, array, advice: str, device: int) -> None:
        if advice.replace("unset_", "") not in ("read_mostly", "preferred_location", "accessed_by"):
            raise DeviceError(f"unknown advice {advice!r}; one of read_mostly, preferred_location, "
                              "accessed_by (and unset_...)")
