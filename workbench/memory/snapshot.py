"""``wb.memory.stats()``: the pool and the device at one moment."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..present.tables import html_fields, pandas
from ..present.units import format_bytes, format_fraction
from .pool import device_memory, pool_counts

#: Below this much cached memory, fragmentation says nothing useful (a few
#: small blocks are always "fragmented"); reports and the panel leave it out.
FRAGMENTATION_FROM = 1 << 20


@dataclass(frozen=True)
class MemoryStats:
    """Device memory as the pool and the driver see it, in bytes.

    ``in_use``: held by live arrays. ``cached``: kept by the pool in free
    blocks for reuse (not a leak: :func:`workbench.memory.empty_cache` gives
    back every block that no live array shares; a block the pool split for a
    smaller array stays until that array goes). ``reserved`` = in use +
    cached, what the pool holds from the device. ``peak``: most in use since tracking started (or the last
    ``reset_peak``). ``fragmentation``: 1 - largest free block / cached bytes.
    ``limit``: the pool's cap (``None``: none). Values the backend cannot give
    are ``None`` and shown as N/A.
    """

    backend: str
    simulated: bool
    in_use: int | None
    cached: int | None
    reserved: int | None
    peak: int | None
    free_blocks: int | None
    largest_free_block: int | None
    fragmentation: float | None
    limit: int | None
    device_free: int | None
    device_total: int | None
    pinned_in_use: int | None
    pinned_reserved: int | None
    pinned_free_blocks: int | None
    tracking: bool
    live_allocations: int | None
    tracked_in_use: int | None

    def rows(self) -> list[tuple[str, str, str]]:
        """``(quantity, value, explanation)`` for display."""
        b = format_bytes
        live = (f"{self.live_allocations} live allocation"
                f"{'s' if self.live_allocations != 1 else ''} tracked"
                if self.live_allocations is not None else "tracking off: wb.memory.tracking(True)")
        blocks = (f"{self.free_blocks} free block{'s' if self.free_blocks != 1 else ''}") if self.free_blocks is not None else "free blocks N/A"
        pinned = ", ".join(part for part in (
            f"{b(self.pinned_in_use)} in use" if self.pinned_in_use is not None else "",
            f"{b(self.pinned_reserved)} reserved" if self.pinned_reserved is not None else "",
            f"{self.pinned_free_blocks} free blocks" if self.pinned_free_blocks is not None else "",
        ) if part) or "N/A"
        return [
            ("in use", b(self.in_use), live),
            ("cached", b(self.cached), f"{blocks} kept by the pool for reuse, not a leak: "
                                       "wb.memory.empty_cache() frees those no live array shares"),
            ("reserved", b(self.reserved), "in use + cached, taken from the device by the pool"),
            ("peak in use", b(self.peak), "since tracking started or wb.memory.reset_peak()"),
            ("fragmentation", format_fraction(self.fragmentation)
             if (self.cached or 0) >= FRAGMENTATION_FROM else "N/A (under 1 MiB cached)",
             "1 - largest free block / cached"
             + (f" (largest free block {b(self.largest_free_block)})"
                if self.largest_free_block is not None else "")),
            ("pool limit", "none" if self.limit is None else b(self.limit),
             "wb.memory.set_limit(bytes=..., fraction=...)"),
            ("device free", b(self.device_free), f"of {b(self.device_total)} on the device"
                                                 + (" (simulated)" if self.simulated else "")),
            ("pinned host pool", pinned, "page-locked host memory for fast copies"),
        ]

    def _title(self) -> str:
        return f"Device memory ({self.backend}{': virtual device' if self.simulated else ''})"

    def __repr__(self) -> str:
        width = max(len(q) for q, _, _ in self.rows())
        lines = [f"{self._title()}:"]
        lines += [f"  {q:<{width}}  {v:>12}  {why}" for q, v, why in self.rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_fields(self.rows(), caption=self._title(), align=("right", "left"))

    def to_dict(self) -> dict:
        """Every field as a plain value (bytes as integers, N/A as None)."""
        return asdict(self)

    def to_pandas(self):
        """A Series of every field (bytes as integers, N/A as None)."""
        return pandas().Series(self.to_dict(), name="memory")


def in_use_cached_reserved(counts: dict, tracked_in_use: int | None = None) -> tuple:
    """``(in use, cached, reserved)`` bytes from a backend's pool counts (in
    use from the tracker where the pool cannot count it): the one reckoning
    of the memory panel, the device panel, the status bar and :func:`collect`."""
    used = counts.get("used_bytes")
    if used is None:
        used = tracked_in_use
    total = counts.get("total_bytes")
    cached = total - used if total is not None and used is not None else None
    return used, cached, total


def collect(backend, tracker) -> MemoryStats:
    """Read the pool, the driver and the tracker into a :class:`MemoryStats`."""
    counts = pool_counts(backend)
    device_free, device_total = device_memory(backend)
    tracking = tracker.enabled and tracker.backend is backend
    same_backend = tracker.backend is backend
    used, cached, total = in_use_cached_reserved(counts, tracker.in_use if tracking else None)
    largest = counts.get("largest_free_block")
    if cached == 0:
        fragmentation = 0.0
    elif largest is not None and cached:
        fragmentation = max(0.0, 1.0 - largest / cached)
    else:
        fragmentation = None
    limit = counts.get("limit") or None   # 0 means no limit in CuPy
    if limit is not None and device_total is not None and limit >= device_total:
        limit = None                          # a cap at the device's size caps nothing
    return MemoryStats(
        backend=backend.name, simulated=bool(backend.simulated),
        in_use=used, cached=cached, reserved=total,
        peak=max(tracker.peak, used or 0) if same_backend else None,
        free_blocks=counts.get("free_blocks"), largest_free_block=largest,
        fragmentation=fragmentation, limit=limit,
        device_free=device_free, device_total=device_total,
        pinned_in_use=counts.get("pinned_used_bytes"),
        pinned_reserved=counts.get("pinned_total_bytes"),
        pinned_free_blocks=counts.get("pinned_free_blocks"),
        tracking=tracking,
        live_allocations=len(tracker.live) if tracking else None,
        tracked_in_use=tracker.in_use if tracking else None,
    )
