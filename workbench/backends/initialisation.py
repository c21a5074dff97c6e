"""Which bytes of ``wb.allocate``'s arrays were written: what initcheck needs.

An array from ``wb.allocate`` starts *uninitialised*: its memory is filled
with :data:`FILL_BYTE` and every byte counts as never written. A byte becomes
written when the workbench sees a write of it: a copy or memset into the
array (``wb.copy``, ``wb.memset``), or a store of a kernel that the simulator's
initcheck watched. Everything else (arrays of ``wb.to_device``, of ``wb.xp``,
of the kernel library) counts as written from the start.

Writes the workbench cannot see (NumPy or CuPy assignments such as
``a[:] = 0``, ``a.fill(1)``, kernels run without initcheck) never make a read
look uninitialised: before initcheck uses the tracked state, the bytes still
counted as unwritten are compared with the fill, and an array where any of
them changed counts as written, all of it. (Only a write of the fill byte
itself, 0xA5 in every byte written, would go unnoticed.)

The state is plain data: :class:`InitTracker` keeps, per tracked allocation,
its start, its size and a bitmap of the written bytes (bit ``i`` of byte
``j``: byte ``8j + i``, NumPy's ``bitorder="little"``).
"""
from __future__ import annotations

import bisect
import threading

import numpy as np

#: The byte ``wb.allocate`` fills new arrays with (floats read from it are
#: -2.9e-16 in float32, integers -1515870811 in int32: rarely what a kernel
#: computes, and never a value anyone writes to every byte of an array).
FILL_BYTE = 0xA5


class Region:
    """One tracked allocation: ``start``, ``nbytes`` and ``bits`` (a packed
    bitmap of its written bytes; None while none is written)."""

    __slots__ = ("start", "nbytes", "bits")

    def __init__(self, start: int, nbytes: int, bits: np.ndarray | None = None):
        self.start, self.nbytes, self.bits = int(start), int(nbytes), bits

    def written_mask(self) -> np.ndarray:
        """A bool per byte: written or not."""
        if self.bits is None:
            return np.zeros(self.nbytes, dtype=bool)
        return np.unpackbits(self.bits, count=self.nbytes, bitorder="little").astype(bool)

    def packed(self) -> bytes:
        """The bitmap as the worker reads it."""
        if self.bits is None:
            return bytes((self.nbytes + 7) // 8)
        return self.bits.tobytes()


def _set_bits(bits: np.ndarray, lo: int, hi: int) -> None:
    """Set bits ``[lo, hi)`` of a packed little-endian bitmap."""
    if hi <= lo:
        return
    first, last = (lo + 7) // 8, hi // 8  # whole bytes in between
    if first > last:  # within one byte
        bits[lo // 8] |= np.uint8(((1 << (hi - lo)) - 1) << (lo % 8))
        return
    if lo % 8:
        bits[lo // 8] |= np.uint8((0xFF << (lo % 8)) & 0xFF)
    bits[first:last] = 0xFF
    if hi % 8:
        bits[last] |= np.uint8((1 << (hi % 8)) - 1)


class InitTracker:
    """The uninitialised allocations of one backend (see the module docstring)."""

    def __init__(self):
        self._regions: dict[int, Region] = {}
        self._starts: list[int] = []  # sorted (allocations never overlap)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._regions)

    def _add(self, region: Region) -> None:  # (under the lock)
        if region.start not in self._regions:
            bisect.insort(self._starts, region.start)
        self._regions[region.start] = region

    def allocated(self, start: int, nbytes: int) -> None:
        """A new uninitialised allocation (replaces one at the same address)."""
        if nbytes > 0:
            with self._lock:
                self._add(Region(start, nbytes))

    def adopt(self, start: int, unwritten: np.ndarray) -> None:
        """Track a new allocation whose bytes are unwritten where ``unwritten``
        (a bool per byte) says: a copy of a tracked array keeps its state."""
        unwritten = np.asarray(unwritten, dtype=bool).reshape(-1)
        if unwritten.size and unwritten.any():
            with self._lock:
                self._add(Region(start, unwritten.size, np.packbits(~unwritten, bitorder="little")))

    def freed(self, start: int, nbytes: int = 0) -> None:
        with self._lock:
            if self._regions.pop(int(start), None) is not None:
                del self._starts[bisect.bisect_left(self._starts, int(start))]

    def forget_all(self) -> None:
        with self._lock:
            self._regions.clear()
            self._starts.clear()

    def overlapping(self, lo: int, hi: int) -> list[Region]:
        """The tracked regions that share a byte with ``[lo, hi)``."""
        with self._lock:
            found = []
            i = bisect.bisect_left(self._starts, hi) - 1
            while i >= 0:
                r = self._regions[self._starts[i]]
                if r.start + r.nbytes <= lo:
                    break
                found.append(r)
                i -= 1
            return found[::-1]

    def written(self, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` were written (a copy, a memset)."""
        for r in self.overlapping(lo, hi):
            a, b = max(lo, r.start) - r.start, min(hi, r.start + r.nbytes) - r.start
            if a == 0 and b == r.nbytes:
                self.freed(r.start)  # all of it: nothing left to track
                continue
            with self._lock:
                if r.bits is None:
                    r.bits = np.zeros((r.nbytes + 7) // 8, dtype=np.uint8)
                _set_bits(r.bits, a, b)

    def regions(self) -> list[Region]:
        with self._lock:
            return sorted(self._regions.values(), key=lambda r: r.start)

    def update(self, region: Region, bits: np.ndarray) -> None:
        """``region``'s bitmap after a watched launch (dropped once all written)."""
        with self._lock:
            if self._regions.get(region.start) is not region:
                return
            full, tail = divmod(region.nbytes, 8)
            complete = bool(np.all(bits[:full] == 0xFF)) and (
                not tail or int(bits[full]) == (1 << tail) - 1)
            if not complete:
                region.bits = np.array(bits, dtype=np.uint8, copy=True)
                return
        self.freed(region.start)

    def verify(self, read) -> None:
        """Drop each region where a byte counted as unwritten no longer holds
        :data:`FILL_BYTE` (something the workbench could not see wrote it).
        ``read(start, nbytes)`` returns the memory's bytes (a uint8 array)."""
        for r in self.regions():
            data = np.asarray(read(r.start, r.nbytes)).reshape(-1)
            unwritten = data if r.bits is None else data[~r.written_mask()]
            if unwritten.size == 0 or np.any(unwritten != FILL_BYTE):
                self.freed(r.start)

    def mask(self, lo: int, hi: int) -> np.ndarray | None:
        """A bool per byte of ``[lo, hi)``: True where never written; None when
        every byte counts as written."""
        found = self.overlapping(lo, hi)
        if not found:
            return None
        out = np.zeros(hi - lo, dtype=bool)
        for r in found:
            a, b = max(lo, r.start), min(hi, r.start + r.nbytes)
            out[a - lo:b - lo] = ~r.written_mask()[a - r.start:b - r.start]
        return out if out.any() else None
