"""The active backend's memory pool: counts, limit and cache.

Everything goes through the :class:`~workbench.backends.contract.Backend`
interface; this module only adds what the user-facing calls need on top
(fractions of the device, messages, counts that never fail a report).
"""
from __future__ import annotations

from ..errors import WorkbenchError


def pool_counts(backend) -> dict:
    """The backend's pool counts; keys missing where the pool cannot tell."""
    try:
        return dict(backend.pool_stats() or {})
    except Exception:  # counts are for display: never fail a report on them
        return {}


def device_memory(backend) -> tuple[int | None, int | None]:
    """``(free, total)`` bytes of the device, ``(None, None)`` if unknown."""
    try:
        free, total = backend.memory_info()
        return int(free), int(total)
    except Exception:
        return None, None


def set_limit(backend, nbytes: int | None, fraction: float | None) -> None:
    """Cap the pool at ``nbytes`` or at ``fraction`` of the device; neither: no cap."""
    if fraction is not None:
        _, total = device_memory(backend)
        if total is None:
            raise WorkbenchError(f"the {backend.name} backend does not report its total memory; "
                                 "give the limit in bytes instead of as a fraction")
        nbytes = int(total * fraction)
    backend.set_pool_limit(nbytes or None)
