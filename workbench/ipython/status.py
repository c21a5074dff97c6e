"""What the JupyterLab extension's status bar shows (``workbench.frontend_status()``).

Sizes are in GiB (2^30 bytes) here, in the extension's tooltip and in every panel."""
from __future__ import annotations

from ..present.units import format_bytes
from ..runtime.session import active_backend_or_none


def _gib(n: int) -> str:
    """Bytes in GiB, as the extension writes them (one decimal, none for a whole number)."""
    return f"{n / 2 ** 30:.1f}".removesuffix(".0")


def frontend_status() -> dict | None:
    """Backend, device and memory for the status bar; ``None`` until a backend
    is in use (asking must not start one) and whenever reading them fails (the
    status bar must never raise into the notebook's kernel)."""
    b = active_backend_or_none()
    if b is None:
        return None
    try:
        props = b.device_properties()
        free, total = b.memory_info()
        device = b.device_name()
    except Exception:
        return None
    used = total - free
    short = props.name.replace("NVIDIA ", "").split()[0] if props.name else b.name
    label = f"{'simulator' if b.simulated else short} · {_gib(used)}/{_gib(total)} GiB"
    return {"backend": b.name, "device": device, "short": short, "simulated": b.simulated,
            "used_bytes": int(used), "total_bytes": int(total), "label": label}
