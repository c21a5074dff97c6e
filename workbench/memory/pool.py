"""The active backend's memory pool: counts, limit and cache, per backend.

The Backend interface gives the pool's counts (:meth:`Backend.pool_stats`)
and allocation events. Setting a limit and emptying the cache are asked of
the backend when it offers ``set_pool_limit(bytes)`` / ``empty_cache()``
(the simulator); for CuPy they go through CuPy's public pool API.
"""
from __future__ import annotations

from typing import Callable

from ..errors import WorkbenchError


def _cupy_pools():
    import cupy
    return cupy.get_default_memory_pool(), cupy.get_default_pinned_memory_pool()


def pool_counts(backend) -> dict:
    """The backend's pool counts; keys missing where the pool cannot tell."""
    try:
        counts = dict(backend.pool_stats() or {})
    except Exception:  # counts are for display: never fail a report on them
        counts = {}
    if backend.name == "cupy" and "pinned_free_blocks" not in counts:
        _, pinned = _cupy_pools()
        counts["pinned_free_blocks"] = pinned.n_free_blocks()
    return counts


def device_memory(backend) -> tuple[int | None, int | None]:
    """``(free, total)`` bytes of the device, ``(None, None)`` if unknown."""
    try:
        free, total = backend.memory_info()
        return int(free), int(total)
    except Exception:
        return None, None


def reserved_getter(backend) -> Callable[[], int] | None:
    """A cheap function giving the pool's reserved bytes, for the timeline
    (called on every allocation while tracking is on)."""
    if backend.name == "cupy":
        pool, _ = _cupy_pools()
        return pool.total_bytes
    getter = getattr(backend, "pool_reserved_bytes", None)
    if callable(getter):
        return getter
    return lambda: backend.pool_stats().get("total_bytes")


def set_limit(backend, nbytes: int | None, fraction: float | None) -> None:
    """Cap the pool at ``nbytes`` or at ``fraction`` of the device; neither: no cap."""
    if backend.name == "cupy":
        pool, _ = _cupy_pools()
        pool.set_limit(size=nbytes, fraction=fraction)
        return
    setter = getattr(backend, "set_pool_limit", None)
    if setter is None:
        hint = ("; the simulated device's size is fixed when it is created: "
                "wb.use_backend('simulator', memory_bytes=...)" if backend.name == "simulator" else "")
        raise WorkbenchError(f"the {backend.name} backend cannot limit its memory pool{hint}")
    if fraction is not None:
        _, total = device_memory(backend)
        if total is None:
            raise WorkbenchError(f"the {backend.name} backend does not report its total memory; "
                                 "give the limit in bytes instead of as a fraction")
        nbytes = int(total * fraction)
    setter(nbytes or None)


def empty_cache(backend) -> None:
    """Give every cached free block back to the device (and pinned blocks to the host)."""
    if backend.name == "cupy":
        pool, pinned = _cupy_pools()
        pool.free_all_blocks()
        pinned.free_all_blocks()
        return
    emptier = getattr(backend, "empty_cache", None)
    if emptier is not None:
        emptier()
