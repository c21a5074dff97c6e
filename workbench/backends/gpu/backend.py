"""The GPU backend: NVRTC, launches, events and memory through CuPy.

:class:`CupyBackend` is made of one part per concern of the Backend
contract: :mod:`.devices`, :mod:`.kernels` (compile and launch),
:mod:`.memory` (arrays, copies, the pool, pinned and managed memory),
:mod:`.streams` (streams, events, graphs); what times launches (CUPTI,
:mod:`.cupti`) and persistent kernels (:mod:`.persistent`) are here.
"""
from __future__ import annotations

import cupy

from ..contract import Backend, DeviceProperties
from . import cupti, persistent
from .devices import CupyDevices
from .faults import _kernel_fault
from .kernels import CupyKernels
from .memory import CupyMemory
from .streams import CupyStreams


class CupyBackend(CupyDevices, CupyKernels, CupyMemory, CupyStreams, Backend):
    """A real NVIDIA GPU through CuPy."""

    name = "cupy"
    simulated = False

    def __init__(self, device: int | None = None):
        if device is not None:
            self.set_device(device)
        self._compiled: dict = {}  # (source, options, device) -> the module built for it
        self._properties: dict[int, DeviceProperties] = {}

    def configure(self, device=None) -> bool:
        """``wb.backend('cupy', device=1)``: make another device current, in
        place (CuPy arrays, modules and kernels of every device stay usable)."""
        if device is not None:
            self.set_device(device)
        return True

    # -- activity and timing ------------------------------------------------------------
    def kernel_activity(self):
        return cupti.kernel_activity()

    def kernel_symbol(self, function) -> str | None:
        return getattr(function, "name", None)

    def timing_source(self) -> str:
        activity = cupti.kernel_activity()
        if activity is not None:
            return "CUPTI activity records" + ("" if activity.collector.startswith("in C") else
                                               f" (collected {activity.collector})")
        return f"CUDA events ({cupti.unavailable_reason()})"

    # -- persistent kernels (persistent.py) ----------------------------------------
    def alloc_mapped(self, nbytes: int):
        return persistent.alloc_mapped(nbytes)

    def launch_persistent(self, function, grid, block, args, shared_mem: int = 0,
                          cooperative: bool = False):
        return persistent.GpuPersistentLaunch(
            lambda: self.launch(function, grid, block, args, shared_mem, cooperative=cooperative),
            getattr(function, "__name__", "kernel"), _kernel_fault)

    def describe(self) -> str:
        p = self.device_properties()
        major, minor = p.compute_capability
        return (f"GPU {p.index}: {p.name} (sm_{major}{minor}, {p.total_memory / 2**30:.0f} GiB) via "
                f"CuPy {cupy.__version__}; launches timed by {self.timing_source()}, "
                f"made by {self.launch_path()}")
