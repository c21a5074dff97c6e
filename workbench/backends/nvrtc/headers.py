"""Headers for NVRTC: the include directories of installed CUDA headers, and
the few standard headers NVRTC lacks, supplied in memory.

``cuda_fp16.h`` and ``cooperative_groups.h`` are not built into NVRTC: they
are looked up in installed ``nvidia-cuda-runtime`` / ``nvidia-cuda-cccl``
wheels and in the CUDA toolkit (``$CUDA_PATH``, ``/usr/local/cuda``).
NVRTC has no C or C++ library headers, although device code uses them: the
C headers device code includes (``<cstdint>``, ``<cstdio>``, ``<cassert>``,
``<climits>``, ``<cfloat>``, ``<cmath>``, ``<cstddef>``, ``<cstdlib>``,
``<cstring>`` and their ``.h`` forms) and ``<limits>`` (``std::numeric_limits``)
are supplied as small stand-ins: in memory to NVRTC
(:data:`BUILTIN_HEADERS`), and as files in a folder for CuPy's compiles
(:func:`standin_include_dir`). What NVRTC already declares built in (``printf``,
``assert``, ``malloc``, ``memcpy``, the math functions) they only bring into
``std``.
"""
from __future__ import annotations

import functools
import hashlib
import os
import site
import sys

from ...cache import DiskCache, write_atomic

def _cccl_first(header: str) -> str:
    """Lines that include CCCL's ``<cuda/std/header>`` where the include path
    has it: CUDA's own headers include it too, so the stand-in's definitions
    must come from the same place (each of them is guarded)."""
    return (f"#if defined(__has_include)\n#if __has_include(<cuda/std/{header}>)\n"
            f"#include <cuda/std/{header}>\n#endif\n#endif\n")


_STDINT_TYPES = "#pragma once\n" + _cccl_first("cstdint") + """\
#ifndef INT8_MIN
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
#endif
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
_STDIO = """\
#pragma once
namespace std { using ::printf; }
"""
_ASSERT = "#pragma once\n"  # NVRTC defines assert() built in
_LIMITS_MACROS = "#pragma once\n" + _cccl_first("climits") + """\
#ifndef INT_MAX
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647-1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L-1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL-1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
"""
_FLOAT_MACROS = "#pragma once\n" + _cccl_first("cfloat") + """\
#ifndef FLT_MAX
#define FLT_RADIX 2
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_MIN_EXP (-125)
#define DBL_MIN_EXP (-1021)
#define FLT_MAX_EXP 128
#define DBL_MAX_EXP 1024
#define FLT_MAX 3.40282347e+38F
#define DBL_MAX 1.7976931348623157e+308
#define FLT_MIN 1.17549435e-38F
#define DBL_MIN 2.2250738585072014e-308
#define FLT_EPSILON 1.19209290e-7F
#define DBL_EPSILON 2.2204460492503131e-16
#define FLT_TRUE_MIN 1.40129846e-45F
#define DBL_TRUE_MIN 4.9406564584124654e-324
#endif
#ifndef FLT_TRUE_MIN
#define FLT_TRUE_MIN 1.40129846e-45F
#define DBL_TRUE_MIN 4.9406564584124654e-324
#endif
"""
_MATH_NAMES = ("sqrt cbrt rsqrt hypot fabs abs fmin fmax min max fma fmod remainder modf frexp ldexp "
               "exp exp2 expm1 log log2 log10 log1p pow sin cos tan asin acos atan atan2 sinh cosh "
               "tanh asinh acosh atanh erf erfc lgamma tgamma floor ceil round trunc rint nearbyint "
               "lround llround lrint llrint copysign signbit isnan isinf isfinite").split()
_MATH = """\
#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#define HUGE_VAL __longlong_as_double(0x7ff0000000000000LL)
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
namespace std { """ + " ".join(f"using ::{n};" for n in _MATH_NAMES) + """ }
"""
_STDDEF = """\
#pragma once
typedef decltype((int*)0 - (int*)0) ptrdiff_t;
#ifndef offsetof
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
namespace std { using ::size_t; using ::ptrdiff_t; typedef decltype(nullptr) nullptr_t; }
"""
_STDLIB = """\
#pragma once
namespace std { using ::malloc; using ::free; using ::abs; }
"""
_STRING = """\
#pragma once
namespace std { using ::memcpy; using ::memset; }
"""
# std::numeric_limits for the arithmetic types, enough for device code
_NUMERIC_LIMITS = "#pragma once\n#include <climits>\n#include <cfloat>\n" + """\
namespace std {
template <class T> struct numeric_limits { static constexpr bool is_specialized = false; };
#define WB_INT_LIMITS(T, LO, HI, SIGNED, DIGITS) \\
template <> struct numeric_limits<T> { \\
  static constexpr bool is_specialized = true, is_signed = SIGNED, is_integer = true, \\
    is_exact = true, has_infinity = false, has_quiet_NaN = false; \\
  static constexpr int digits = DIGITS; \\
  __host__ __device__ static constexpr T min() noexcept { return LO; } \\
  __host__ __device__ static constexpr T max() noexcept { return HI; } \\
  __host__ __device__ static constexpr T lowest() noexcept { return LO; } \\
  __host__ __device__ static constexpr T epsilon() noexcept { return 0; } };
WB_INT_LIMITS(bool, false, true, false, 1)
WB_INT_LIMITS(char, CHAR_MIN, CHAR_MAX, true, 7)
WB_INT_LIMITS(signed char, SCHAR_MIN, SCHAR_MAX, true, 7)
WB_INT_LIMITS(unsigned char, 0, UCHAR_MAX, false, 8)
WB_INT_LIMITS(short, SHRT_MIN, SHRT_MAX, true, 15)
WB_INT_LIMITS(unsigned short, 0, USHRT_MAX, false, 16)
WB_INT_LIMITS(int, INT_MIN, INT_MAX, true, 31)
WB_INT_LIMITS(unsigned int, 0, UINT_MAX, false, 32)
WB_INT_LIMITS(long, LONG_MIN, LONG_MAX, true, 63)
WB_INT_LIMITS(unsigned long, 0, ULONG_MAX, false, 64)
WB_INT_LIMITS(long long, LLONG_MIN, LLONG_MAX, true, 63)
WB_INT_LIMITS(unsigned long long, 0, ULLONG_MAX, false, 64)
#undef WB_INT_LIMITS
#define WB_FLOAT_LIMITS(T, MIN, MAX, EPS, DIGITS, INF, QNAN, DENORM) \\
template <> struct numeric_limits<T> { \\
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, \\
    is_exact = false, has_infinity = true, has_quiet_NaN = true; \\
  static constexpr int digits = DIGITS; \\
  __host__ __device__ static constexpr T min() noexcept { return MIN; } \\
  __host__ __device__ static constexpr T max() noexcept { return MAX; } \\
  __host__ __device__ static constexpr T lowest() noexcept { return -MAX; } \\
  __host__ __device__ static constexpr T epsilon() noexcept { return EPS; } \\
  __host__ __device__ static constexpr T denorm_min() noexcept { return DENORM; } \\
  __host__ __device__ static T infinity() noexcept { return INF; } \\
  __host__ __device__ static T quiet_NaN() noexcept { return QNAN; } };
WB_FLOAT_LIMITS(float, FLT_MIN, FLT_MAX, FLT_EPSILON, 24, __int_as_float(0x7f800000),
                __int_as_float(0x7fffffff), FLT_TRUE_MIN)
WB_FLOAT_LIMITS(double, DBL_MIN, DBL_MAX, DBL_EPSILON, 53,
                __longlong_as_double(0x7ff0000000000000LL),
                __longlong_as_double(0x7fffffffffffffffLL), DBL_TRUE_MIN)
#undef WB_FLOAT_LIMITS
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};
}
"""

#: Headers given to NVRTC in memory (name -> text).
BUILTIN_HEADERS = {"stdint.h": _STDINT_TYPES, "cstdint": _CSTDINT,
                   "stdio.h": _STDIO, "cstdio": _STDIO, "assert.h": _ASSERT, "cassert": _ASSERT,
                   "limits.h": _LIMITS_MACROS, "climits": _LIMITS_MACROS,
                   "float.h": _FLOAT_MACROS, "cfloat": _FLOAT_MACROS,
                   "math.h": _MATH, "cmath": _MATH, "stddef.h": _STDDEF, "cstddef": _STDDEF,
                   "stdlib.h": _STDLIB, "cstdlib": _STDLIB, "string.h": _STRING,
                   "cstring": _STRING, "limits": _NUMERIC_LIMITS}


def standin_include_dir() -> str:
    """A folder holding :data:`BUILTIN_HEADERS` as files (for compilers that
    take include paths only, as CuPy's NVRTC compiles do), written once into
    the workbench's cache under a name that changes with their text."""
    known = _STANDIN_DIR[0]
    if known is not None and os.path.isdir(known):  # every compile asks: one stat, not one per header
        return known
    digest = hashlib.sha256(repr(sorted(BUILTIN_HEADERS.items())).encode()).hexdigest()[:12]
    folder = DiskCache("nvrtc-headers").path(digest)
    if not all((folder / name).is_file() for name in BUILTIN_HEADERS):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in BUILTIN_HEADERS.items():
            write_atomic(folder / name, text)
    _STANDIN_DIR[0] = str(folder)
    return str(folder)


_STANDIN_DIR: list = [None]  # the folder standin_include_dir() wrote, once checked


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
