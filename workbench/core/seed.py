"""The seed API's names (design document 000), each a one-line alias of the
main API for scripts written against it: ``wb.check_available()`` is
``wb.backend`` can be the GPU, ``wb.compile_kernel(src)`` is
``wb.compile(src).kernel()``, ``wb.launch_kernel(k, grid, block, *args)`` is
``k(*args, grid=grid, block=block)``, ``wb.get_memory_info()`` is the
device's ``(free, total)``; ``wb.allocate``, ``wb.to_device``, ``wb.to_host``
and ``wb.synchronize`` are the main API's own (:mod:`workbench.core.arrays`).
"""
from __future__ import annotations

from ..backends import gpu_unavailable_reason
from ..runtime.session import backend
from .compiler import compile


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
