"""Execution backends and the one function that picks between them.

Order: the GPU through CuPy when CuPy is installed and sees a device, else the
CPU simulator. ``WORKBENCH_BACKEND=simulator`` (or ``cupy``) forces a choice.
"""
from __future__ import annotations

import glob
import inspect
import os
import re

from ..errors import ArgumentTypeError, BackendUnavailable
from .contract import Backend, CompileFailed, CompileOptions  # noqa: F401  (re-exported)

BACKEND_NAMES = ("cupy", "simulator")


#: What ``gpu_unavailable_reason`` says on a machine without an NVIDIA GPU (a laptop, CI).
NO_GPU = "no NVIDIA GPU found"


def nvidia_driver_version() -> tuple[int, ...] | None:
    """The loaded NVIDIA kernel driver's version (``(580, 65, 6)``), read from
    ``/proc/driver/nvidia/version`` (Linux; no library loaded), or None."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", text)
    return tuple(int(part) for part in m.group(1).split(".")) if m else None


def nvidia_gpu_present() -> bool:
    """True when this machine shows an NVIDIA GPU to the driver (a device
    file, the driver's list of GPUs, or the driver WSL maps in), without
    loading any CUDA library."""
    return (bool(glob.glob("/dev/nvidia[0-9]*")) or bool(glob.glob("/proc/driver/nvidia/gpus/*"))
            or os.path.exists("/usr/lib/wsl/lib/libcuda.so"))


def gpu_extra() -> str:
    """The install that brings the GPU backend for this machine's driver:
    CuPy for CUDA 13 needs a driver of the 580 series or newer."""
    driver = nvidia_driver_version()
    extra = "cuda12" if driver is not None and driver[0] < 580 else "cuda13"
    return f"pip install 'cuda-workbench[{extra}]'"


def gpu_unavailable_reason() -> str | None:
    """``None`` when CuPy can use a GPU here, else a short reason why not
    (:data:`NO_GPU` on a machine without an NVIDIA GPU)."""
    try:
        import cupy  # lazy: CuPy is optional and costs a second to import
    except ImportError:
        if not nvidia_gpu_present():
            return NO_GPU
        return f"an NVIDIA GPU is here but CuPy is not installed ({gpu_extra()})"
    except Exception as exc:  # a broken CuPy install must not break the workbench
        return f"CuPy failed to import: {exc}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CuPy sees no CUDA device ({type(exc).__name__}: {exc})".replace("\n", " ")
    if count == 0:
        return "CuPy sees no CUDA device"
    return None


def simulator_reason(gpu_reason: str) -> str:
    """Why the simulator runs the kernels, in a laptop user's words (the reason
    ``wb.backend()`` and ``%load_ext workbench`` show)."""
    if gpu_reason == NO_GPU:
        return (f"{NO_GPU}: the CPU simulator runs your kernels; on a machine with one, "
                f"pip install 'cuda-workbench[cuda13]' ([cuda12] for a driver older than 580)")
    return f"{gpu_reason}: the CPU simulator runs your kernels"


def create_backend(name: str, **options) -> Backend:
    """Instantiate backend ``name`` ("cupy" or "simulator") with ``options``."""
    name = canonical_name(name)
    if name == "cupy":
        reason = gpu_unavailable_reason()
        if reason:
            raise BackendUnavailable(f"The GPU backend cannot run here: {reason}. "
                                     "Use wb.backend('simulator') to run kernels on the CPU.")
        from .gpu.backend import CupyBackend  # lazy: imports CuPy
        check_options(CupyBackend, name, options)
        return CupyBackend(**options)
    if name == "simulator":
        from .simulator import SimulatorBackend  # lazy: a GPU session never loads the simulator
        check_options(SimulatorBackend, name, options)
        return SimulatorBackend(**options)
    forced = os.environ.get("WORKBENCH_BACKEND")
    where = (f" It comes from the environment variable WORKBENCH_BACKEND={forced}: set it to one "
             "of these, or unset it to let the workbench choose."
             if forced and canonical_name(forced) == name else
             " (The environment variable WORKBENCH_BACKEND chooses one for the whole session.)")
    raise BackendUnavailable(f"Unknown backend {name!r}; choose one of "
                             f"'cupy' (or 'gpu') and 'simulator' (or 'sim', 'cpu').{where}")


def check_options(accepts, name: str, options: dict) -> None:
    """TypeError naming the options of ``wb.backend(name, ...)`` unless
    ``accepts`` (a backend class, or its ``configure``) takes ``options``."""
    params = [p for p in inspect.signature(accepts).parameters.values()
              if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - {p.name for p in params})
    if unknown:
        raise ArgumentTypeError(
            f"wb.backend({name!r}, ...) has no option {', '.join(unknown)}; its "
            f"options: {', '.join(p.name for p in params if p.name != 'self')}")


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
    return "simulator", simulator_reason(reason)
