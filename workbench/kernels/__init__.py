"""``wb.kernels``: a library of reference CUDA C++ kernels.

Every kernel is a ``.cu`` file shipped in ``workbench/kernels/cu/``, compiled
on first use through the same path as a ``%%cuda`` cell (so its launches are
checked, timed in ``wb.timings()`` and tracked), with a NumPy reference::

    x = wb.to_device(np.random.rand(1000).astype(np.float32))
    y = wb.kernels.relu(x)                # a device array
    wb.kernels.catalog()                  # every kernel: dtypes, bytes and FLOPs per element
    wb.kernels.source("relu")             # its CUDA source, highlighted
    wb.kernels.baseline("relu", 1 << 20)  # timed against NumPy on the CPU and the backend's own op

Importing this package compiles nothing; each kernel function is found (and
its family module imported) on first use.
"""
from __future__ import annotations

import importlib

from .library import KernelSpec, families, module, register, source_text, specs

_TOOLS = {"catalog": "gallery", "source": "gallery", "Catalog": "gallery", "Source": "gallery",
          "baseline": "baselines", "baselines": "baselines", "Baselines": "baselines",
          "plot_speedup": "baselines"}

__all__ = ["KernelSpec", "families", "module", "register", "source_text", "specs", *_TOOLS]


def __getattr__(name: str):
    if name in _TOOLS:
        value = getattr(importlib.import_module(f"{__name__}.{_TOOLS[name]}"), name)
    else:
        spec = specs().get(name)
        if spec is None:
            raise AttributeError(f"wb.kernels has no kernel or attribute {name!r}; "
                                 f"wb.kernels.catalog() lists the kernels.")
        value = spec.function
    globals()[name] = value
    return value


def __dir__():
    return sorted({*__all__, *specs()})
