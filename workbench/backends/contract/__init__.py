"""The Backend contract: everything the layers above may ask of a device.

A backend owns a device: it allocates and copies arrays, compiles CUDA C++
source into modules, launches kernels, records events and reports the
device's properties and memory. It knows nothing of Jupyter, widgets or
plots, and nothing of the workbench's checks: the core
(:mod:`workbench.core`) parses signatures, validates arguments, converts
Python scalars to exact C types and keeps the timing log, then calls the
backend with arguments that are already right.

The contract is a few small interfaces, each an ABC of its own module
(``docs/backends.md`` lists every method):

- :class:`Kernels` (kernels.py): compile and launch;
- :class:`Arrays`, :class:`MemoryPool`, :class:`MemoryKinds` (memory.py):
  device arrays and copies, the pool, pinned and managed memory;
- :class:`Streams`, :class:`Events`, :class:`Graphs` (streams.py);
- :class:`Devices` (devices.py): count, current device, properties, peers;
- :class:`PersistentKernels` (persistent.py): mapped memory, background launches;
- :class:`Activity` (activity.py): what times launches, activity counters;
- :class:`Instrumentation` (instrumentation.py): launches counted access by access;

and :class:`Backend` (backend.py), the one class both backends are, which
inherits them all. A default method of one interface may call the methods of
another (``stream_done`` records an event): every backend is all of them.
The values that cross the contract are in types.py.

Two implementations: :mod:`workbench.backends.gpu` (a real GPU through
CuPy) and :mod:`workbench.backends.simulator` (CUDA C++ on the CPU).
"""
from __future__ import annotations

from .activity import Activity
from .backend import Backend
from .devices import Devices, visible_device
from .instrumentation import Instrumentation
from .kernels import Kernels
from .memory import Arrays, MemoryKinds, MemoryPool
from .persistent import MappedBuffer, PersistentKernels, PersistentLaunch
from .streams import Events, Graphs, Streams
from .types import (CompiledModule, CompileFailed, CompileOptions, DeviceProperties,
                    KernelResources, normalise_arch)

__all__ = ["Activity", "Arrays", "Backend", "CompiledModule", "CompileFailed", "CompileOptions",
           "DeviceProperties", "Devices", "Events", "Graphs", "Instrumentation", "KernelResources", "Kernels",
           "MappedBuffer", "MemoryKinds", "MemoryPool", "PersistentKernels", "PersistentLaunch",
           "Streams", "normalise_arch", "visible_device"]
