"""The active backend's memory pool: counts, limit and cache.

Everything goes through the :class:`~workbench.backends.contract.Backend`
interface; this module only adds what the user-facing calls need on top
(fractions of the device, messages, counts that never fail a report).
"""
from __future__ import annotations

from ..errors import ArgumentValueError, WorkbenchError


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
    """Cap the pool at ``nbytes`` or at ``fraction`` of the device; neither: no
    cap. A cap of 0 bytes is refused (the backends read 0 as no cap)."""
    asked = f"bytes={nbytes}" if fraction is None else f"fraction={fraction}"
    if fraction is not None:
        _, total = device_memory(backend)
        if total is None:
            raise WorkbenchError(f"the {backend.name} backend does not report its total memory; "
                                 "give the limit in bytes instead of as a fraction")
        nbytes = int(total * fraction)
    if nbytes is not None and nbytes <= 0:
        raise ArgumentValueError(
            f"set_limit({asked}) is a limit of 0 bytes, which would refuse every "
            "allocation; give a size (set_limit(bytes=\"1GiB\")), or set_limit() to "
            "remove the limit")
    backend.set_pool_limit(nbytes)
