"""The GPU backend: CUDA through CuPy (:class:`.backend.CupyBackend`).

What happens where:

* :mod:`.backend` is the class, made of one part per interface of the
  Backend contract: :mod:`.devices`, :mod:`.kernels` (compile and launch),
  :mod:`.memory` (arrays, copies, the pool, pinned and managed memory),
  :mod:`.streams` (streams, events, graphs); :mod:`.faults` turns the CUDA
  error of a faulted kernel into a :class:`workbench.errors.KernelFault`;
* :mod:`.native_launch` (``native/launch.c``) launches from C;
  :mod:`.allocations` (``native/allocations.c``) is the allocator memory
  tracking puts around CuPy's pool; :mod:`.cupti` times launches from CUPTI's
  activity records, collected in C by :mod:`.native_cupti`
  (``native/cupti_records.c``). Each C module is built once per machine by
  :mod:`workbench.backends.native_build`, with a Python path where it cannot be;
* :mod:`.persistent`: mapped host memory and persistent launches.

Importing this package imports nothing else: CuPy loads with :mod:`.backend`.
"""
from __future__ import annotations

from pathlib import Path

#: The C sources of the GPU backend's extension modules.
NATIVE_DIR = Path(__file__).resolve().parent / "native"
