"""The seed API: thin functions over the core (``wb.to_device`` and friends).

Each works on the active backend: the GPU through CuPy, or the simulator.
"""
from __future__ import annotations

import numpy as np

from ..errors import OutOfMemoryError
from .session import backend


def out_of_memory(requested: int | None, cause: BaseException) -> OutOfMemoryError:
    """The workbench's out-of-memory error for a failed allocation or launch:
    what was asked, what holds the memory and what to do (see
    :mod:`workbench.memory.oom`)."""
    if isinstance(cause, OutOfMemoryError) and getattr(cause, "_explained", False):
        return cause
    try:
        from ..memory.oom import out_of_memory_error
    except ImportError:
        return OutOfMemoryError(f"Out of device memory: {cause}", requested=requested)
    error = out_of_memory_error(requested, cause)
    error._explained = True
    return error


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (OutOfMemoryError, MemoryError)) or type(exc).__name__ == "OutOfMemoryError"


def check_available() -> bool:
    """True when a GPU backend can run here (the simulator always can)."""
    from ..backends import gpu_unavailable_reason
    return gpu_unavailable_reason() is None


def device_name() -> str:
    """Name of the active device (the simulator's virtual device is labelled so)."""
    b = backend()
    name = b.device_properties().name
    return f"{name} (simulated)" if b.simulated else name


def compute_capability() -> tuple[int, int]:
    """``(major, minor)`` of the active device."""
    return tuple(backend().device_properties().compute_capability)


def allocate(shape, dtype=np.float32):
    """An uninitialised device array (tracked by the memory tracker)."""
    dtype = np.dtype(dtype)
    try:
        return backend().allocate(shape, dtype)
    except Exception as exc:
        if _is_oom(exc):
            size = int(np.prod(shape if isinstance(shape, tuple) else (shape,))) * dtype.itemsize
            raise out_of_memory(size, exc) from None
        raise


def to_device(array):
    """Copy a host array to the device (returns a device array); an array
    already on the device is returned as it is."""
    if backend().is_device_array(array):
        return array
    host = np.asarray(array)
    try:
        return backend().to_device(host)
    except Exception as exc:
        if _is_oom(exc):
            raise out_of_memory(host.nbytes, exc) from None
        raise


def to_host(array) -> np.ndarray:
    """Copy a device array to a new NumPy array (waits for pending work)."""
    return backend().to_host(array)


def synchronize() -> None:
    """Wait for all work on the active device."""
    backend().synchronize()


def get_memory_info() -> tuple[int, int]:
    """``(free, total)`` bytes of the active device."""
    return backend().memory_info()


def compile_kernel(source: str, name: str | None = None, **options):
    """Compile ``source`` and return its kernel ``name`` (or its only kernel)."""
    from .compiler import compile
    module = compile(source, **options)
    names = module.kernel_names()
    if name is None:
        if len(names) != 1:
            raise ValueError(f"the source has {len(names)} kernels ({', '.join(names)}); "
                             f"say which with name=")
        name = names[0]
    return module[name]


def launch_kernel(kernel, grid, block, *args, shared_mem: int = 0, stream=None):
    """``kernel(*args, grid=grid, block=block)``, spelled as in the seed API."""
    return kernel(*args, grid=grid, block=block, shared_mem=shared_mem, stream=stream)


def frontend_status() -> dict | None:
    """What the JupyterLab status bar shows: backend, device and memory
    (``None`` until a backend is in use: asking must not start one)."""
    from .session import active_backend_or_none
    b = active_backend_or_none()
    if b is None:
        return None
    try:
        props = b.device_properties()
        free, total = b.memory_info()
    except Exception:  # the status bar must never raise into the kernel
        return None
    used = total - free
    short = props.name.replace("NVIDIA ", "").split()[0] if props.name else b.name
    gib = 2 ** 30
    label = f"{'simulator' if b.simulated else short} · {used / gib:.1f}/{total / gib:.0f} GB"
    return {"backend": b.name, "device": device_name(), "short": short, "simulated": b.simulated,
            "used_bytes": int(used), "total_bytes": int(total), "label": label}
