"""The simulator's "device memory": one shared-memory file mapped at the same
address in the notebook process and in the worker, so a device pointer means
the same thing on both sides and survives a worker crash.

The file is a ``memfd`` as large as the virtual device's memory; pages cost
nothing until touched and are given back (hole punched) when a large block
is freed. The first :data:`.protocol.ARENA_RESERVED` bytes hold the control page
(:class:`.protocol.ControlPage`) and the ``printf`` buffer; allocations come after, 256-byte aligned, first fit, with
a gap after each block so that checked launches see writes past its end.
"""
from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import gc
import os
import threading
import weakref

import numpy as np

from ...errors import OutOfMemoryError
from ...present.units import format_bytes
from . import host_memory
from .protocol import ARENA_RESERVED, CONTROL_MAGIC, PRINTF_BYTES, PRINTF_OFFSET
from .protocol import ControlPage, FaultRecord

ALIGNMENT = 256
#: Free space kept after every block (checked launches poison it).
GUARD = 256
#: Freed blocks at least this large give their pages back to the system.
RELEASE_THRESHOLD = 1 << 20
_HINT_ADDRESS = 0x200000000000
_HINT_STEP = 1 << 30
_HINT_LIMIT = 0x600000000000
_next_hint = _HINT_ADDRESS

_PROT_READ, _PROT_WRITE = 1, 2
_MAP_SHARED = 1
_FALLOC_PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE

_libc = None


def _lib():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long]
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        _libc = lib
    return _libc


class _Block:
    """Owner of one allocation; numpy arrays over it keep it alive."""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, address: int, nbytes: int):
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (address, False), "version": 3}


class Arena:
    """The shared mapping and its allocator."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.size = ARENA_RESERVED + self.capacity
        self.fd = os.memfd_create("cuda-workbench-sim-arena", 0)
        os.ftruncate(self.fd, self.size)
        self.base = _map_at_free_hint(self.fd, self.size)
        weakref.finalize(self, _unmap, self.base, self.size, self.fd)
        self._lock = threading.RLock()
        self._releasing = 0   # frees between leaving _used and rejoining _free
        self._released = threading.Condition(self._lock)
        self._free: list[tuple[int, int]] = [(ARENA_RESERVED, self.capacity)]  # (offset, size), sorted
        self._used: dict[int, int] = {}   # offset -> size of live blocks (excluding guard)
        self.used_bytes = 0
        self.high_water = ARENA_RESERVED
        self.limit: int | None = None  # a soft cap below capacity (wb.memory.set_limit)
        self._listeners: list[tuple] = []
        self.control = np.asarray(_Block(self.base, ARENA_RESERVED))  # bytes of the control area
        self.page = ControlPage.from_address(self.base)
        ctypes.memset(self.base, 0, ctypes.sizeof(ControlPage))
        self.page.magic = CONTROL_MAGIC
        self.page.printf_capacity = PRINTF_BYTES

    # -- allocation -----------------------------------------------------------
    def allocate(self, nbytes: int) -> tuple[int, _Block]:
        """``(address, owner)`` of a new block of ``nbytes``; the block is freed
        when ``owner`` is garbage collected."""
        nbytes = int(nbytes)
        span = _round_up(max(nbytes, 1), ALIGNMENT) + GUARD
        if self.limit is not None and self.used_bytes + nbytes > self.limit:
            gc.collect()
            if self.used_bytes + nbytes > self.limit:
                raise OutOfMemoryError(
                    f"out of memory on the simulated device: {nbytes:,} bytes requested, "
                    f"{self.used_bytes:,} in use under the pool limit of {self.limit:,} bytes. "
                    f"Delete arrays you no longer need (del x) or raise the limit.", requested=nbytes)
        if nbytes >= host_memory.CHECK_FROM_BYTES:
            self._check_host(nbytes)
        offset = self._take(span)
        if offset is None:
            gc.collect()  # arrays that are only waiting for the collector
            offset = self._take(span)
        if offset is None and self._releasing:
            # blocks other threads are freeing come back once their listeners have heard
            with self._released:
                self._released.wait_for(lambda: not self._releasing, timeout=1.0)
            offset = self._take(span)
        if offset is None:
            free = self.capacity - self.used_bytes
            raise OutOfMemoryError(
                f"out of memory on the simulated device: {nbytes:,} bytes requested, "
                f"{free:,} of {self.capacity:,} bytes free"
                f"{'' if free < nbytes else ' but not in one piece'}. Delete arrays you no "
                f"longer need (del x) or use smaller ones.", requested=nbytes)
        address = self.base + offset
        block = _Block(address, nbytes)
        with self._lock:
            self._used[offset] = nbytes
            self.used_bytes += nbytes
            self.high_water = max(self.high_water, offset + span)
            listeners = list(self._listeners)
        weakref.finalize(block, self._release, offset, span, nbytes)
        for on_alloc, _ in listeners:
            on_alloc(address, nbytes)
        return address, block

    def _check_host(self, nbytes: int) -> None:
        """Refuse a block the host's memory cannot back now: its pages are taken
        when first touched, and then the out-of-memory killer would end a process."""
        available = host_memory.available_bytes()
        if available is not None and nbytes > available:
            gc.collect()  # freed arrays give their pages back
            available = host_memory.available_bytes()
        if available is not None and nbytes > available:
            raise OutOfMemoryError(
                f"out of memory on the simulated device: {format_bytes(nbytes)} requested and the "
                f"host has {format_bytes(available)} available to back it (the simulated device's "
                f"memory is the host's RAM, taken when touched). Delete arrays you no longer need "
                f"(del x), use smaller ones, or free memory on the host.", requested=nbytes)

    def _take(self, span: int) -> int | None:
        with self._lock:
            for i, (off, size) in enumerate(self._free):
                if size >= span:
                    if size == span:
                        del self._free[i]
                    else:
                        self._free[i] = (off + span, size - span)
                    return off
        return None

    def _release(self, offset: int, span: int, nbytes: int) -> None:
        # The range is taken out of use, the listeners are told, and only then
        # is it free again: a listener hears of the free of an address before
        # the allocation that reuses it, whichever threads free and allocate.
        # (Listeners run outside the lock: they take their own locks, and a
        # thread holding one of those may free an array.)
        with self._lock:
            if offset not in self._used:
                return
            del self._used[offset]
            self.used_bytes -= nbytes
            self._releasing += 1
            listeners = list(self._listeners)
        try:
            for _, on_free in listeners:
                try:
                    on_free(self.base + offset, nbytes)
                except Exception:  # a listener must not break freeing
                    pass
            if span >= RELEASE_THRESHOLD:   # before the range can be handed out and written
                page = 4096
                lo, hi = _round_up(offset, page), (offset + span) // page * page
                if hi > lo:
                    _lib().fallocate(self.fd, _FALLOC_PUNCH, lo, hi - lo)
        finally:
            with self._lock:
                self._insert_free(offset, span)
                self._releasing -= 1
                self._released.notify_all()

    def _insert_free(self, offset: int, span: int) -> None:
        """Put ``[offset, offset + span)`` back on the free list, merged with its
        neighbours (under the lock)."""
        i = bisect.bisect(self._free, (offset, 0))
        start, end = offset, offset + span
        if i < len(self._free) and self._free[i][0] == end:
            end += self._free.pop(i)[1]
        if i > 0 and sum(self._free[i - 1]) == start:
            start = self._free[i - 1][0]
            self._free.pop(i - 1)
            i -= 1
        self._free.insert(i, (start, end - start))

    def contains(self, address: int, nbytes: int = 1) -> bool:
        return self.base + ARENA_RESERVED <= address and address + nbytes <= self.base + self.size

    def live_blocks(self) -> list[tuple[int, int]]:
        """``(address, nbytes)`` of every live block."""
        with self._lock:
            return [(self.base + off, n) for off, n in self._used.items()]

    def add_listener(self, on_alloc, on_free):
        entry = (on_alloc, on_free)
        with self._lock:
            self._listeners.append(entry)

        def remove():
            with self._lock:
                if entry in self._listeners:
                    self._listeners.remove(entry)
        return remove

    def stats(self) -> dict[str, int]:
        with self._lock:
            # free space below the high-water mark is the "cache" (as in CuPy's pool)
            top = self.high_water
            sizes = [min(off + size, top) - off for off, size in self._free if off < top]
            return {"used_bytes": self.used_bytes,
                    "total_bytes": top - ARENA_RESERVED,
                    "free_blocks": len(sizes),
                    "largest_free_block": max(sizes, default=0),
                    "limit": self.limit if self.limit is not None else self.capacity,
                    "allocations": len(self._used)}

    def reserved_bytes(self) -> int:
        """Bytes below the high-water mark (in use plus cached)."""
        return self.high_water - ARENA_RESERVED

    def empty_cache(self) -> None:
        """Lower the high-water mark to the end of the last live block and give
        the pages of every free range back to the host."""
        gc.collect()  # arrays that are only waiting for the collector
        page = 4096
        with self._lock:   # held while punching: no free range is handed out and written meanwhile
            ends = [off + _round_up(max(n, 1), ALIGNMENT) + GUARD for off, n in self._used.items()]
            self.high_water = max(ends, default=ARENA_RESERVED)
            for off, size in self._free:
                lo, hi = _round_up(off, page), (off + size) // page * page
                if hi > lo:
                    _lib().fallocate(self.fd, _FALLOC_PUNCH, lo, hi - lo)

    # -- control page ------------------------------------------------------------
    def take_printf(self) -> tuple[bytes, int]:
        """The device ``printf`` output since the last call, and how many bytes
        did not fit in the buffer; empties the buffer."""
        page = self.page
        dropped, committed = page.printf_dropped, page.printf_committed
        if page.printf_len == 0 and dropped == 0:
            return b"", 0
        text = self.control[PRINTF_OFFSET:PRINTF_OFFSET + min(committed, PRINTF_BYTES)].tobytes()
        page.printf_len = page.printf_dropped = page.printf_committed = 0
        return text, dropped

    def fault_record(self) -> FaultRecord | None:
        """A copy of the fault the worker wrote before it ended, or None."""
        fault = self.page.fault
        return fault.copy() if fault.kind else None

    def clear_fault(self) -> None:
        ctypes.memset(ctypes.addressof(self.page.fault), 0, ctypes.sizeof(FaultRecord))


def _map_at_free_hint(fd: int, size: int) -> int:
    """Map ``fd`` in a region far from the usual heap and library addresses,
    so that a fresh worker process finds the same addresses free."""
    global _next_hint
    lib = _lib()
    failed = ctypes.c_void_p(-1).value
    for _ in range(4096):
        hint = _next_hint
        _next_hint += _round_up(size, _HINT_STEP) + _HINT_STEP
        if _next_hint > _HINT_LIMIT:
            _next_hint = _HINT_ADDRESS
        addr = lib.mmap(hint, size, _PROT_READ | _PROT_WRITE, _MAP_SHARED, fd, 0)
        if addr in (None, failed):
            break
        if addr == hint:
            return addr
        lib.munmap(addr, size)  # the region was taken: try the next one
    err = ctypes.get_errno()
    os.close(fd)
    raise OSError(err, f"cannot map the simulator's device memory ({size:,} bytes): "
                       f"{os.strerror(err) if err else 'no free address range'}")


def _unmap(base: int, size: int, fd: int) -> None:
    try:
        _lib().munmap(base, size)
        os.close(fd)
    except OSError:
        pass


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m
