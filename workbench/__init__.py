"""cuda-workbench: write, run, measure and understand CUDA kernels in Jupyter.

In a notebook::

    %load_ext workbench
    import workbench as wb

then write CUDA C++ in ``%%cuda`` cells; every ``extern "C" __global__``
function becomes a callable :class:`workbench.Kernel`.

Importing this package does no work: every public name below is resolved on
first use (PEP 562), so ``import workbench`` neither touches the GPU nor
imports IPython, ipywidgets or matplotlib. There is one name per job:
``wb.backend(...)`` and ``wb.device(i)`` switch, and in a ``with`` statement
switch for the block; each capability has its main call at the top level and
the rest in its namespace (``wb.tuning``, ``wb.profiling``, ...); the classes
of returned results are in ``wb.types`` and the seed API's names in
``wb.compat``. The names of the last release still work, with a
DeprecationWarning naming the new one (``_DEPRECATED`` below).
"""
from __future__ import annotations

import importlib
import warnings

from ._version import __version__

# public name -> "module:attribute" (attribute defaults to the name itself; "module:" is
# the module itself)
_LAZY = {
    # errors
    "WorkbenchError": "workbench.errors",
    "CompileError": "workbench.errors",
    "KernelArgumentError": "workbench.errors",
    "LaunchConfigError": "workbench.errors",
    "KernelFault": "workbench.errors",
    "OutOfMemoryError": "workbench.errors",
    "BackendUnavailable": "workbench.errors",
    "DeviceError": "workbench.errors",
    "DeviceBusy": "workbench.errors",
    "ProfilerUnavailable": "workbench.errors",
    "ProfileFailed": "workbench.errors",
    "ProgramError": "workbench.errors",
    "MissingExtra": "workbench.errors",
    "TuneError": "workbench.errors",
    # backend and device: calls that switch, and context managers that switch for a block
    "backend": "workbench.runtime.session",
    "device": "workbench.runtime.devices",
    "devices": "workbench.hardware.properties",
    # compile, kernels, timing
    "compile": "workbench.core.compiler",
    "modules": "workbench.core.compiler",
    "Kernel": "workbench.core.kernel",
    "timings": "workbench.runtime.session",
    "occupancy": "workbench.hardware.occupancy",
    # device arrays
    "allocate": "workbench.core.arrays",
    "to_device": "workbench.core.arrays",
    "to_host": "workbench.core.arrays",
    "synchronize": "workbench.core.arrays",
    # streams, events, copies, memory kinds, graphs, the timeline, transfers between devices
    "Stream": "workbench.core.streams",
    "Event": "workbench.core.streams",
    "copy": "workbench.core.transfers",
    "memset": "workbench.core.transfers",
    "pinned": "workbench.core.transfers",
    "managed": "workbench.core.transfers",
    "graph": "workbench.core.graphs",
    "timeline": "workbench.benchmarking.timeline",
    "peer_matrix": "workbench.benchmarking.transfers",
    "peer_bandwidth": "workbench.benchmarking.transfers",
    "host_bandwidth": "workbench.benchmarking.transfers",
    # memory
    "memory": "workbench.memory:",
    # benchmarks
    "bench": "workbench.benchmarking.timer",
    "sweep": "workbench.benchmarking.sweep",
    "compare": "workbench.benchmarking.compare",
    "report": "workbench.benchmarking.report",
    "ceilings": "workbench.benchmarking.ceilings",
    # the capabilities: their main call, and their namespace for the rest
    "tune": "workbench.tuning",
    "tuned": "workbench.tuning",
    "tuning": "workbench.tuning:",
    "kernels": "workbench.kernels:",
    "ring": "workbench.rings",
    "rings": "workbench.rings:",
    "program": "workbench.programs",
    "programs": "workbench.programs:",
    "python_kernel": "workbench.languages:kernel",
    "languages": "workbench.languages:",
    "profile": "workbench.profiling",
    "sanitize": "workbench.profiling",
    "profiling": "workbench.profiling:",
    # panels
    "DevicePanel": "workbench.widgets.device_panel",
    "MemoryPanel": "workbench.widgets.memory_panel",
    "KernelPanel": "workbench.widgets.kernel_panel",
    "BenchmarkPanel": "workbench.widgets.bench_panel",
    "RingPanel": "workbench.widgets.ring_panel",
    "dashboard": "workbench.widgets.dashboard",
    # the classes of returned results, and the seed API's names
    "types": "workbench.types:",
    "compat": "workbench.compat:",
    # for the JupyterLab extension's status bar, not for users (absent from __all__)
    "frontend_status": "workbench.ipython.status",
    # this machine, and the tutorials
    "doctor": "workbench.checkup",
    "tutorials": "workbench.tutorial_files",
}

#: Names of the last release, kept for this one: old name -> (what to use
#: now, "module:attribute" of what the old name still gives). Each warns
#: once, with a DeprecationWarning that names its replacement.
_DEPRECATED = {
    "use_backend": ("wb.backend(name)", "workbench.runtime.session:use_backend"),
    "use_device": ("wb.device(i) (and wb.devices()[i] for its properties)",
                   "workbench.hardware.properties:use_device"),
    "stream": ("`with s:` on the wb.Stream s", "workbench.core.streams:stream"),
    "kernel": ("wb.python_kernel", "workbench.languages:kernel"),
    "build_program": ("wb.programs.build_program", "workbench.programs:build_program"),
    "profile_code": ("wb.profiling.profile_code", "workbench.profiling:profile_code"),
    "profile_executable": ("wb.profiling.profile_executable",
                           "workbench.profiling:profile_executable"),
    "NcuReport": ("wb.profiling.NcuReport", "workbench.profiling:NcuReport"),
    "TuneResult": ("wb.tuning.TuneResult", "workbench.tuning:TuneResult"),
    "Ring": ("wb.rings.Ring", "workbench.rings:Ring"),
    "Module": ("wb.types.Module", "workbench.types:Module"),
    "Graph": ("wb.types.Graph", "workbench.types:Graph"),
    "Timeline": ("wb.types.Timeline", "workbench.types:Timeline"),
    "BenchResult": ("wb.types.BenchResult", "workbench.types:BenchResult"),
    "Diagnostic": ("wb.types.Diagnostic", "workbench.types:Diagnostic"),
    "prefetch": ("wb.memory.prefetch", "workbench.core.transfers:prefetch"),
    "advise": ("wb.memory.advise", "workbench.core.transfers:advise"),
    **{name: (f"wb.compat.{name}", f"workbench.compat:{name}")
       for name in ("check_available", "device_name", "compute_capability", "get_memory_info",
                    "compile_kernel", "launch_kernel")},
}
_WARNED: set = set()

# the names for users; IPython's hooks (load_ipython_extension, unload_ipython_extension)
# and the JupyterLab extension's (frontend_status) answer too, unlisted
__all__ = sorted([*(n for n in _LAZY if n != "frontend_status"), "xp", "__version__"])


def _resolve(target: str, name: str):
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return module if (":" in target and not attr) else getattr(module, attr or name)


def __getattr__(name: str):
    if name == "xp":  # not cached: it follows the active backend
        from .core.arrays import xp  # lazy: `import workbench` loads nothing (PEP 562)
        return xp()
    target = _LAZY.get(name)
    if target is not None:
        value = globals()[name] = _resolve(target, name)
        return value
    if name in _DEPRECATED:
        replacement, target = _DEPRECATED[name]
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"wb.{name} is deprecated and goes in the next release; use "
                          f"{replacement}", DeprecationWarning, stacklevel=2)
        return _resolve(target, name)  # (not cached: each use passes here)
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


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
