"""``wb.kernels``: a library of reference CUDA C++ kernels.

Every kernel is a ``.cu`` file shipped in ``workbench/kernels/cu/``, compiled
on first use through the same path as a ``%%cuda`` cell (so its launches are
checked, timed in ``wb.timings()`` and tracked), with a NumPy reference::

    x = wb.to_device(np.random.rand(1000).astype(np.float32))
    y = wb.kernels.relu(x)                # a device array
    wb.kernels.catalog()                  # every kernel: dtypes, bytes and FLOPs per element
    wb.kernels.source("relu")             # its CUDA source, highlighted
    wb.kernels.baseline("relu", 1 << 20)  # timed against NumPy on the CPU and the backend's own op
    wb.kernels.last_variant("hgemm")      # which implementation its last call ran

Importing this package compiles nothing; each kernel function is found (and
its family module imported) on first use.
"""
from __future__ import annotations

from .baselines import Baselines, baseline, baselines, plot_speedup
from .gallery import Catalog, Source, catalog, source
from .library import KernelSpec, families, last_variant, module, register, source_text, specs

__all__ = ["KernelSpec", "families", "last_variant", "module", "register", "source_text", "specs", "Catalog",
           "Source", "catalog", "source", "Baselines", "baseline", "baselines", "plot_speedup"]


def __getattr__(name: str):
    spec = specs().get(name)
    if spec is None:
        raise AttributeError(f"wb.kernels has no kernel or attribute {name!r}; "
                             f"wb.kernels.catalog() lists the kernels.")
    globals()[name] = spec.function
    return spec.function


def __dir__():
    return sorted({*__all__, *specs()})
