"""Execution backends and the one function that picks between them.

Order: the GPU through CuPy when CuPy is installed and sees a device, else the
CPU simulator. ``WORKBENCH_BACKEND=simulator`` (or ``cupy``) forces a choice.
"""
from __future__ import annotations

import os

from .base import Backend, CompileFailed, CompileOptions  # noqa: F401  (re-exported)

BACKEND_NAMES = ("cupy", "simulator")


def gpu_unavailable_reason() -> str | None:
    """``None`` when CuPy can use a GPU here, else a short reason why not."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'cuda-workbench[cuda13]')"
    except Exception as exc:  # a broken CuPy install must not break the workbench
        return f"CuPy failed to import: {exc}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CuPy sees no CUDA device ({type(exc).__name__}: {exc})".replace("\n", " ")
    if count == 0:
        return "CuPy sees no CUDA device"
    return None


def create_backend(name: str, **options) -> Backend:
    """Instantiate backend ``name`` ("cupy" or "simulator") with ``options``."""
    from ..errors import BackendUnavailable
    if name in ("cupy", "gpu"):
        reason = gpu_unavailable_reason()
        if reason:
            raise BackendUnavailable(f"The GPU backend cannot run here: {reason}. "
                                     "Use wb.backend('simulator') to run kernels on the CPU.")
        from .cupy_gpu import CupyBackend
        return CupyBackend(**options)
    if name in ("simulator", "sim", "cpu"):
        from .simulator import SimulatorBackend
        return SimulatorBackend(**options)
    raise BackendUnavailable(f"Unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}.")


def select_backend(**options) -> tuple[Backend, str]:
    """Pick the best backend here and say why, in one line."""
    forced = os.environ.get("WORKBENCH_BACKEND")
    if forced:
        return create_backend(forced, **options), f"WORKBENCH_BACKEND={forced}"
    reason = gpu_unavailable_reason()
    if reason is None:
        backend = create_backend("cupy", **options)
        return backend, "CuPy sees a CUDA device"
    return create_backend("simulator", **options), f"no GPU: {reason}"
