"""What the JupyterLab extension's status bar shows (``workbench.frontend_status()``)."""
from __future__ import annotations

from ..present.units import format_bytes
from ..runtime.session import active_backend_or_none


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
    gib = 2 ** 30
    label = f"{'simulator' if b.simulated else short} · {used / gib:.1f}/{total / gib:.0f} GB"
    return {"backend": b.name, "device": device, "short": short, "simulated": b.simulated,
            "used_bytes": int(used), "total_bytes": int(total), "label": label}
