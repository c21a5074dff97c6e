"""cuda-workbench: write, run, measure and understand CUDA kernels in Jupyter.

In a notebook::

    %load_ext workbench
    import workbench as wb

then write CUDA C++ in ``%%cuda`` cells; every ``extern "C" __global__``
function becomes a callable :class:`workbench.Kernel`.

Importing this package does no work: every public name below is resolved on
first use (PEP 562), so ``import workbench`` neither touches the GPU nor
imports IPython, ipywidgets or matplotlib.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> "module:attribute" (attribute defaults to the name itself)
_LAZY = {
    # errors
    "WorkbenchError": "workbench.errors",
    "CompileError": "workbench.errors",
    "Diagnostic": "workbench.errors",
    "KernelArgumentError": "workbench.errors",
    "LaunchConfigError": "workbench.errors",
    "KernelFault": "workbench.errors",
    "OutOfMemoryError": "workbench.errors",
    "BackendUnavailable": "workbench.errors",
    "DeviceError": "workbench.errors",
    "DeviceBusy": "workbench.errors",
    "ProfilerUnavailable": "workbench.errors",
    "ProfileFailed": "workbench.errors",
    # backend selection
    "backend": "workbench.runtime.session",
    "use_backend": "workbench.runtime.session",
    # compile, kernels, timing
    "compile": "workbench.core.compiler",
    "Module": "workbench.core.compiler",
    "modules": "workbench.core.compiler",
    "Kernel": "workbench.core.kernel",
    "timings": "workbench.runtime.session",
    # device arrays
    "allocate": "workbench.core.arrays",
    "to_device": "workbench.core.arrays",
    "to_host": "workbench.core.arrays",
    "synchronize": "workbench.core.arrays",
    # streams, events, copies, memory kinds, graphs, several devices
    "Stream": "workbench.core.streams",
    "stream": "workbench.core.streams",
    "Event": "workbench.core.streams",
    "device": "workbench.core.streams",
    "copy": "workbench.core.transfers",
    "memset": "workbench.core.transfers",
    "pinned": "workbench.core.transfers",
    "managed": "workbench.core.transfers",
    "prefetch": "workbench.core.transfers",
    "advise": "workbench.core.transfers",
    "graph": "workbench.core.graphs",
    "Graph": "workbench.core.graphs",
    "timeline": "workbench.benchmarking.timeline",
    "Timeline": "workbench.benchmarking.timeline",
    "peer_matrix": "workbench.benchmarking.transfers",
    "peer_bandwidth": "workbench.benchmarking.transfers",
    "host_bandwidth": "workbench.benchmarking.transfers",
    # the seed API's names: one-line aliases of the main API
    "check_available": "workbench.core.seed",
    "device_name": "workbench.core.seed",
    "compute_capability": "workbench.core.seed",
    "get_memory_info": "workbench.core.seed",
    "compile_kernel": "workbench.core.seed",
    "launch_kernel": "workbench.core.seed",
    # the JupyterLab extension's status bar
    "frontend_status": "workbench.ipython.status",
    # memory
    "memory": "workbench.memory:",
    "MemoryPanel": "workbench.widgets.memory_panel",
    # benchmarks
    "bench": "workbench.benchmarking.timer",
    "BenchResult": "workbench.benchmarking.timer",
    "sweep": "workbench.benchmarking.sweep",
    "compare": "workbench.benchmarking.compare",
    "report": "workbench.benchmarking.report",
    "ceilings": "workbench.benchmarking.ceilings",
    "BenchmarkPanel": "workbench.widgets.bench_panel",
    # autotuning
    "tune": "workbench.tuning",
    "tuned": "workbench.tuning",
    "TuneResult": "workbench.tuning",
    "tuning": "workbench.tuning:",
    # the kernel library
    "kernels": "workbench.kernels:",
    # persistent ring kernels
    "ring": "workbench.rings",
    "Ring": "workbench.rings",
    "rings": "workbench.rings:",
    "RingPanel": "workbench.widgets.ring_panel",
    # whole CUDA programs (with main())
    "program": "workbench.programs",
    "build_program": "workbench.programs",
    "programs": "workbench.programs:",
    "ProgramError": "workbench.errors",
    "MissingExtra": "workbench.errors",
    "TuneError": "workbench.errors",
    # kernels written in Numba and Triton
    "kernel": "workbench.languages",
    "languages": "workbench.languages:",
    # Nsight Compute / Nsight Systems profiles, NVTX
    "profile": "workbench.profiling",
    "profile_executable": "workbench.profiling",
    "profile_code": "workbench.profiling",
    "NcuReport": "workbench.profiling",
    "profiling": "workbench.profiling:",
    # devices, kernels, occupancy
    "devices": "workbench.hardware.properties",
    "use_device": "workbench.hardware.properties",
    "occupancy": "workbench.hardware.occupancy",
    "DevicePanel": "workbench.widgets.device_panel",
    "KernelPanel": "workbench.widgets.kernel_panel",
    "dashboard": "workbench.widgets.dashboard",
    # this machine, and the tutorials
    "doctor": "workbench.checkup",
    "tutorials": "workbench.tutorial_files",
}

__all__ = sorted([*_LAZY, "xp", "__version__", "load_ipython_extension",
                  "unload_ipython_extension"])


def __getattr__(name: str):
    if name == "xp":  # not cached: it follows the active backend
        from .runtime.session import backend  # lazy: `import workbench` loads nothing (PEP 562)
        return backend().xp
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = module if (":" in target and not attr) else getattr(module, attr or name)
    globals()[name] = value
    return value


def __dir__():
    return __all__


def load_ipython_extension(ipython):
    """``%load_ext workbench``: register the magics and cell hooks."""
    from .ipython import load  # lazy: only a notebook needs the magics
    from .widgets.progress import install  # lazy: as above
    load(ipython)
    install(ipython)


def unload_ipython_extension(ipython):
    from .ipython import unload  # lazy: only a notebook needs the magics
    from .widgets.progress import uninstall  # lazy: as above
    unload(ipython)
    uninstall()
