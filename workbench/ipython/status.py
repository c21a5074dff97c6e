"""What the JupyterLab extension's status bar shows (``workbench.frontend_status()``).

Its memory figures are :func:`workbench.memory.stats`'s, in its words ("in
use": held by live arrays; "cached": kept by the pool for reuse; "reserved":
the two together, taken from the device), as the memory panel shows them:
after ``del big`` the status bar says the memory moved from in use to
cached, after ``wb.memory.empty_cache()`` that the cache is gone.
Sizes are in GiB (2^30 bytes) here, in the extension's tooltip and in every panel."""
from __future__ import annotations

from ..memory.snapshot import collect
from ..memory.tracker import tracker
from ..runtime.session import active_backend_or_none


def _gib(n: int) -> str:
    """Bytes in GiB, as the extension writes them (one decimal, none for a whole number)."""
    return f"{n / 2 ** 30:.1f}".removesuffix(".0")


def memory_label(in_use: int | None, cached: int | None, total: int | None) -> str:
    """``in use 1 · cached 59 / 80 GiB``: the words of ``wb.memory.stats()``
    (cached left out while the pool caches nothing worth a tenth of a GiB);
    nothing when the size or the bytes in use are not known."""
    if total is None or in_use is None:
        return ""  # (no figure rather than a guess)
    parts = [f"in use {_gib(in_use)}"]
    if cached and _gib(cached) != "0":
        parts.append(f"cached {_gib(cached)}")
    return f"{' · '.join(parts)} / {_gib(total)} GiB"


def frontend_status() -> dict | None:
    """Backend, device and memory for the status bar; ``None`` until a backend
    is in use (asking must not start one) and whenever reading them fails (the
    status bar must never raise into the notebook's kernel).

    ``in_use_bytes``, ``cached_bytes``, ``reserved_bytes`` and ``total_bytes``
    are those of :func:`workbench.memory.stats` (``used_bytes``, for the
    extension's tooltip, is ``in_use_bytes``); ``label`` says them in its words."""
    b = active_backend_or_none()
    if b is None:
        return None
    try:
        props = b.device_properties()
        device = b.device_name()
        stats = collect(b, tracker())
    except Exception:
        return None
    total = stats.device_total
    in_use = stats.in_use
    short = props.name.replace("NVIDIA ", "").split()[0] if props.name else b.name
    name = "simulator" if b.simulated else short
    memory = memory_label(in_use, stats.cached, total)
    return {"backend": b.name, "device": device, "short": short, "simulated": b.simulated,
            "used_bytes": None if in_use is None else int(in_use),
            "in_use_bytes": None if in_use is None else int(in_use),
            "cached_bytes": stats.cached, "reserved_bytes": stats.reserved,
            "total_bytes": None if total is None else int(total),
            "label": f"{name} · {memory}" if memory else name}
