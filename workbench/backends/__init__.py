"""Execution backends and the one function that picks between them.

Order: the GPU through CuPy when CuPy is installed and sees a device, else the
CPU simulator. ``WORKBENCH_BACKEND=simulator`` (or ``cupy``) forces a choice.
"""
from __future__ import annotations

import os

from ..errors import BackendUnavailable
from .contract import Backend, CompileFailed, CompileOptions  # noqa: F401  (re-exported)

BACKEND_NAMES = ("cupy", "simulator")


def gpu_unavailable_reason() -> str | None:
    """``None`` when CuPy can use a GPU here, else a short reason why not."""
    try:
        import cupy  # lazy: CuPy is optional and costs a second to import
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
    name = canonical_name(name)
    if name == "cupy":
        reason = gpu_unavailable_reason()
        if reason:
            raise BackendUnavailable(f"The GPU backend cannot run here: {reason}. "
                                     "Use wb.backend('simulator') to run kernels on the CPU.")
        from .gpu.backend import CupyBackend  # lazy: imports CuPy
        return CupyBackend(**options)
    if name == "simulator":
        from .simulator import SimulatorBackend  # lazy: a GPU session never loads the simulator
        return SimulatorBackend(**options)
    forced = os.environ.get("WORKBENCH_BACKEND")
    where = (f" It comes from the environment variable WORKBENCH_BACKEND={forced}: set it to one "
             "of these, or unset it to let the workbench choose."
             if forced and canonical_name(forced) == name else
             " (The environment variable WORKBENCH_BACKEND chooses one for the whole session.)")
    raise BackendUnavailable(f"Unknown backend {name!r}; choose one of "
                             f"'cupy' (or 'gpu') and 'simulator' (or 'sim', 'cpu').{where}")


def canonical_name(name: str) -> str:
    """``"gpu"`` -> ``"cupy"``, ``"sim"``/``"cpu"`` -> ``"simulator"``."""
    return {"gpu": "cupy", "sim": "simulator", "cpu": "simulator"}.get(name, name)


def choose_backend() -> tuple[str, str]:
    """The name of the best backend here and why, in one line."""
    forced = os.environ.get("WORKBENCH_BACKEND")
    if forced:
        return canonical_name(forced), f"WORKBENCH_BACKEND={forced}"
    reason = gpu_unavailable_reason()
    if reason is None:
        return "cupy", "CuPy sees a CUDA device"
    return "simulator", f"no GPU: {reason}"
