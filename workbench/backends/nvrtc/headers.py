"""Headers for NVRTC: the include directories of installed CUDA headers, and
the few standard headers NVRTC lacks, supplied in memory.

``cuda_fp16.h`` and ``cooperative_groups.h`` are not built into NVRTC: they
are looked up in installed ``nvidia-cuda-runtime`` / ``nvidia-cuda-cccl``
wheels and in the CUDA toolkit (``$CUDA_PATH``, ``/usr/local/cuda``).
``<cstdint>`` and ``<stdint.h>`` are supplied in memory, since NVRTC has no
C library.
"""
from __future__ import annotations

import functools
import os
import site
import sys

_STDINT_TYPES = """\
#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t; typedef unsigned long long uintptr_t;
typedef long long intmax_t; typedef unsigned long long uintmax_t;
typedef int8_t int_least8_t; typedef int16_t int_least16_t; typedef int32_t int_least32_t; typedef int64_t int_least64_t;
typedef uint8_t uint_least8_t; typedef uint16_t uint_least16_t; typedef uint32_t uint_least32_t; typedef uint64_t uint_least64_t;
typedef int8_t int_fast8_t; typedef int64_t int_fast16_t; typedef int64_t int_fast32_t; typedef int64_t int_fast64_t;
typedef uint8_t uint_fast8_t; typedef uint64_t uint_fast16_t; typedef uint64_t uint_fast32_t; typedef uint64_t uint_fast64_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32767-1)
#define INT32_MIN (-2147483647-1)
#define INT64_MIN (-9223372036854775807LL-1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define SIZE_MAX UINT64_MAX
"""
_CSTDINT = _STDINT_TYPES + """\
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
using ::int_least8_t; using ::int_least16_t; using ::int_least32_t; using ::int_least64_t;
using ::uint_least8_t; using ::uint_least16_t; using ::uint_least32_t; using ::uint_least64_t;
using ::int_fast8_t; using ::int_fast16_t; using ::int_fast32_t; using ::int_fast64_t;
using ::uint_fast8_t; using ::uint_fast16_t; using ::uint_fast32_t; using ::uint_fast64_t;
using ::size_t;
}
"""
#: Headers given to NVRTC in memory (name -> text).
BUILTIN_HEADERS = {"stdint.h": _STDINT_TYPES, "cstdint": _CSTDINT}


@functools.lru_cache(maxsize=1)
def nvrtc_include_dirs() -> tuple[str, ...]:
    """Directories holding ``cuda_fp16.h``, ``math_constants.h``,
    ``cooperative_groups.h`` (CUDA runtime headers) and ``cuda/std/...``
    (CCCL, which ``cooperative_groups.h`` needs), found in installed nvidia
    wheels, ``$CONDA_PREFIX``, ``$CUDA_PATH``/``$CUDA_HOME`` and
    ``/usr/local/cuda``. Cached for the process."""
    dirs = _pathfinder_dirs()
    # Without cuda-pathfinder, or where it found only one of the two.
    candidates = []
    for packages in _site_packages():
        candidates += [os.path.join(packages, "nvidia", "cu13", "include"),
                       os.path.join(packages, "nvidia", "cu13", "include", "cccl"),
                       os.path.join(packages, "nvidia", "cuda_runtime", "include"),
                       os.path.join(packages, "nvidia", "cuda_cccl", "include")]
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            candidates += [os.path.join(root, "include"), os.path.join(root, "include", "cccl")]
    have_runtime = any(os.path.isfile(os.path.join(d, "cuda_runtime.h")) for d in dirs)
    have_cccl = any(os.path.isfile(os.path.join(d, "cuda", "std", "version")) for d in dirs)
    for d in candidates:
        if not have_runtime and os.path.isfile(os.path.join(d, "cuda_runtime.h")):
            dirs.append(d)
            have_runtime = True
        if not have_cccl and os.path.isfile(os.path.join(d, "cuda", "std", "version")):
            dirs.append(d)
            have_cccl = True
    return tuple(dict.fromkeys(os.path.realpath(d) for d in dirs))


def _pathfinder_dirs() -> list[str]:
    """The CUDA runtime and CCCL header folders that cuda-pathfinder finds."""
    try:
        from cuda.pathfinder import locate_nvidia_header_directory  # lazy: optional package
    except ImportError:
        return []
    dirs = []
    for lib in ("cudart", "cccl"):
        try:
            found = locate_nvidia_header_directory(lib)
        except Exception:
            found = None
        if found is not None and found.abs_path:
            dirs.append(found.abs_path)
    return dirs


def _site_packages() -> list[str]:
    paths = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    paths += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(paths))
