"""The seed API's names (design document 000), for scripts written against it.

Each is a one-line alias of the main API:

- ``wb.compat.check_available()``: a GPU backend can run here;
- ``wb.compat.device_name()``: the active device's name;
- ``wb.compat.compute_capability()``: ``(major, minor)`` of the active device;
- ``wb.compat.get_memory_info()``: the active device's ``(free, total)`` bytes;
- ``wb.compat.compile_kernel(src, name)``: ``wb.compile(src).kernel(name)``;
- ``wb.compat.launch_kernel(k, grid, block, *args)``: ``k(*args, grid=grid, block=block)``.

``wb.allocate``, ``wb.to_device``, ``wb.to_host`` and ``wb.synchronize`` of
the seed API are the main API's own (:mod:`workbench.core.arrays`). Until the
next release ``wb.check_available`` and the others also answer at the top
level, with a DeprecationWarning.
"""
from __future__ import annotations

from .backends import gpu_unavailable_reason
from .core.compiler import compile
from .runtime.session import backend

__all__ = ["check_available", "device_name", "compute_capability", "get_memory_info",
           "compile_kernel", "launch_kernel"]


def check_available() -> bool:
    """True when a GPU backend can run here (the simulator always can)."""
    return gpu_unavailable_reason() is None


def device_name() -> str:
    """The active device's name; the simulator's says ``(simulated)``."""
    return backend().device_name()


def compute_capability() -> tuple[int, int]:
    """``(major, minor)`` of the active device."""
    return tuple(backend().device_properties().compute_capability)


def get_memory_info() -> tuple[int, int]:
    """``(free, total)`` bytes of the active device."""
    return backend().memory_info()


def compile_kernel(source: str, name: str | None = None, **options):
    """``wb.compile(source, **options).kernel(name)``."""
    return compile(source, **options).kernel(name)


def launch_kernel(kernel, grid, block, *args, shared_mem: int = 0, stream=None):
    """``kernel(*args, grid=grid, block=block, shared_mem=..., stream=...)``."""
    return kernel(*args, grid=grid, block=block, shared_mem=shared_mem, stream=stream)
