"""Check CUDA C++ with NVIDIA's real NVRTC, with or without a GPU.

NVRTC is a library: it compiles CUDA C++ to PTX and to an ``sm_XX`` cubin
without a device or a driver. The CPU simulator calls
:func:`check_with_nvrtc` before it builds a cell for the CPU, so that

* compile errors and warnings are NVRTC's own (``NAME(LINE): error: ...``),
* each kernel's registers, static shared memory, local memory (stack and
  spills), user ``__constant__`` memory and the most threads a block may have
  are known for a target architecture (``sm_90`` unless told otherwise).

The figures come from ptxas's own report (:mod:`.ptxas`): NVRTC runs ptxas
internally, and ``-Xptxas=-v`` makes it append ``ptxas info`` lines to the
program log (they are removed from :attr:`NvrtcResult.log`).

The modules, one job each:

* :mod:`.bindings`: NVRTC from ``cuda.bindings`` (``pip install cuda-bindings
  nvidia-cuda-nvrtc``), or from CuPy when ``cuda.bindings`` is missing;
* :mod:`.headers`: where ``cuda_fp16.h``, ``cooperative_groups.h`` and CCCL
  are installed, and ``<cstdint>``/``<stdint.h>`` supplied in memory;
* :mod:`.ptxas`: ptxas's report, the PTX's thread limits, the cubin's sections;
* :mod:`.cache`: results on disk (``$WORKBENCH_CACHE_DIR/nvrtc``;
  ``WORKBENCH_NVRTC_CACHE=0`` turns it off);
* :mod:`.check`: :func:`check_with_nvrtc` and :class:`NvrtcResult`.
"""
from __future__ import annotations

from ..registers import max_threads_per_block
from .bindings import PROGRAM_NAME, nvrtc_available, nvrtc_version
from .cache import cache_dir, clear_cache
from .check import DEFAULT_ARCH, NvrtcResult, check_with_nvrtc
from .headers import BUILTIN_HEADERS, nvrtc_include_dirs
from .ptxas import (constant_bank_bytes, cubin_resources, cubin_sections, parse_ptxas_report,
                    ptx_thread_limits)

__all__ = [
    "BUILTIN_HEADERS", "DEFAULT_ARCH", "PROGRAM_NAME", "NvrtcResult", "cache_dir",
    "check_with_nvrtc", "clear_cache", "constant_bank_bytes", "cubin_resources", "cubin_sections",
    "max_threads_per_block", "nvrtc_available", "nvrtc_include_dirs", "nvrtc_version",
    "parse_ptxas_report", "ptx_thread_limits",
]
