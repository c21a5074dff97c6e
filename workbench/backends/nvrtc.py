"""Check CUDA C++ with NVIDIA's real NVRTC, with or without a GPU.

NVRTC is a library: it compiles CUDA C++ to PTX and to an ``sm_XX`` cubin
without a device or a driver. The CPU simulator calls
:func:`check_with_nvrtc` before it builds a cell for the CPU, so that

* compile errors and warnings are NVRTC's own (``NAME(LINE): error: ...``),
* each kernel's registers, static shared memory, local memory (stack and
  spills), user ``__constant__`` memory and the most threads a block may have
  are known for a target architecture (``sm_90`` unless told otherwise).

The figures come from ptxas's own report: NVRTC runs ptxas internally, and
``-Xptxas=-v`` makes it append ``ptxas info`` lines to the program log (they
are removed from :attr:`NvrtcResult.log`). ``__constant__`` bytes are the size
of the cubin's ``.nv.constant3`` section, which ptxas no longer prints.

NVRTC comes from ``cuda.bindings`` (``pip install cuda-bindings
nvidia-cuda-nvrtc``), or from CuPy when ``cuda.bindings`` is missing. Headers
such as ``cuda_fp16.h`` and ``cooperative_groups.h`` are not built into NVRTC:
they are looked up in installed ``nvidia-cuda-runtime`` / ``nvidia-cuda-cccl``
wheels and in the CUDA toolkit (``$CUDA_PATH``, ``/usr/local/cuda``); see
:func:`nvrtc_include_dirs`. ``<cstdint>`` and ``<stdint.h>`` are supplied in
memory, since NVRTC has no C library.

Results are cached on disk (``$WORKBENCH_CACHE_DIR/nvrtc`` or
``~/.cache/cuda-workbench/nvrtc``) by a hash of source, options, architecture,
NVRTC version and include directories: a cell that includes
``cooperative_groups.h`` takes seconds to compile. ``WORKBENCH_NVRTC_CACHE=0``
turns the cache off; sources with ``#include "..."`` are never cached (their
headers may change unseen).
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import glob
import hashlib
import json
import os
import re
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from .base import CompileFailed, KernelResources, normalise_arch

if TYPE_CHECKING:
    from .base import CompileOptions

DEFAULT_ARCH = "sm_90"
#: The name NVRTC gives the source in its log: ``cell.cu(LINE): error: ...``.
PROGRAM_NAME = "cell.cu"

_PTXAS_VERBOSE = "-Xptxas=-v"
_CACHE_FORMAT = 1
#: Registers in one block's share of the register file (every sm_50+ GPU).
_REGISTERS_PER_BLOCK = 65536
_REGISTER_ALLOCATION_UNIT = 256  # registers, allocated per warp
_WARP_SIZE = 32

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


@dataclass
class NvrtcResult:
    """What NVRTC made of one source.

    ``log`` is NVRTC's log (warnings; ptxas's resource report removed),
    ``ptx`` the PTX text, ``cubin`` the ``sm_XX`` binary, ``lowered_names``
    maps each name expression (``"scale<float>"``) to its mangled name, and
    ``resources`` maps each ``extern "C"`` kernel name and each name
    expression to its :class:`KernelResources`.
    """

    log: str
    ptx: str
    cubin: bytes | None
    arch: str
    lowered_names: dict[str, str] = field(default_factory=dict)
    resources: dict[str, KernelResources] = field(default_factory=dict)
    cache_hit: bool = False
    compile_seconds: float = 0.0

    def __repr__(self) -> str:
        kernels = ", ".join(f"{name}: {_short(r)}" for name, r in self.resources.items())
        warnings = sum(1 for line in self.log.splitlines() if ": warning" in line)
        return (f"<NvrtcResult {self.arch}, {len(self.resources)} kernel(s)"
                f"{', ' + str(warnings) + ' warning(s)' if warnings else ''}"
                f"{', cached' if self.cache_hit else ''}: {kernels or 'none'}>")

    def to_pandas(self):
        """One row per kernel: registers, shared/local/constant bytes..."""
        import pandas as pd
        rows = [{"kernel": name, **dataclasses.asdict(r)} for name, r in self.resources.items()]
        return pd.DataFrame(rows, columns=["kernel"] + [f.name for f in dataclasses.fields(KernelResources)])

    def _repr_html_(self) -> str:
        return f"<p>NVRTC, {self.arch}</p>" + self.to_pandas().to_html(index=False)


def _short(r: KernelResources) -> str:
    return (f"{r.registers} regs, {r.shared_bytes} B smem, {r.local_bytes} B local, "
            f"max {r.max_threads_per_block} threads")


# -- the NVRTC library, through cuda.bindings or CuPy ------------------------

class _CudaBindingsNvrtc:
    """NVRTC calls through ``cuda.bindings.nvrtc`` (each returns a status tuple)."""

    def __init__(self):
        from cuda.bindings import nvrtc
        self.lib = nvrtc

    def _check(self, result):
        status, *values = result
        if status != self.lib.nvrtcResult.NVRTC_SUCCESS:
            _, text = self.lib.nvrtcGetErrorString(status)
            raise RuntimeError(f"NVRTC: {text.decode()}")
        return values[0] if len(values) == 1 else values

    def version(self) -> tuple[int, int]:
        return tuple(self._check(self.lib.nvrtcVersion()))

    def compile(self, source, options, name_expressions, headers):
        """``(ok, log, ptx, cubin, lowered_names)``."""
        nv = self.lib
        prog = self._check(nv.nvrtcCreateProgram(
            source.encode(), PROGRAM_NAME.encode(), len(headers),
            [h.encode() for h in headers.values()], [n.encode() for n in headers]))
        try:
            for expr in name_expressions:
                self._check(nv.nvrtcAddNameExpression(prog, expr.encode()))
            (status,) = nv.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
            log = self._read(nv.nvrtcGetProgramLogSize, nv.nvrtcGetProgramLog, prog).decode(errors="replace")
            if status != nv.nvrtcResult.NVRTC_SUCCESS:
                return False, log, "", None, {}
            ptx = self._read(nv.nvrtcGetPTXSize, nv.nvrtcGetPTX, prog).decode(errors="replace")
            cubin = None
            if _is_real_arch(options):
                cubin = self._read(nv.nvrtcGetCUBINSize, nv.nvrtcGetCUBIN, prog, text=False) or None
            lowered = {e: self._check(nv.nvrtcGetLoweredName(prog, e.encode())).decode()
                       for e in name_expressions}
            return True, log, ptx, cubin, lowered
        finally:
            nv.nvrtcDestroyProgram(prog)

    def _read(self, get_size, get, prog, text: bool = True) -> bytes:
        size = self._check(get_size(prog))
        buf = b" " * size
        self._check(get(prog, buf))
        # text ends with a NUL; a binary (the cubin) may end in zero bytes that belong to it
        return buf.rstrip(b"\0") if text else buf


class _CupyNvrtc:
    """NVRTC calls through CuPy's wrapper (raises ``NVRTCError``)."""

    def __init__(self):
        from cupy_backends.cuda.libs import nvrtc
        self.lib = nvrtc

    def version(self) -> tuple[int, int]:
        return tuple(self.lib.getVersion())

    def compile(self, source, options, name_expressions, headers):
        nv = self.lib
        prog = nv.createProgram(source, PROGRAM_NAME, [h.encode() for h in headers.values()],
                                [n.encode() for n in headers])
        try:
            for expr in name_expressions:
                nv.addNameExpression(prog, expr)
            try:
                nv.compileProgram(prog, list(options))
            except nv.NVRTCError:
                return False, nv.getProgramLog(prog), "", None, {}
            log = nv.getProgramLog(prog)
            ptx = nv.getPTX(prog)
            ptx = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
            cubin = nv.getCUBIN(prog) if _is_real_arch(options) else None
            lowered = {e: nv.getLoweredName(prog, e) for e in name_expressions}
            return True, log.rstrip("\0"), ptx.rstrip("\0"), cubin or None, lowered
        finally:
            nv.destroyProgram(prog)


@functools.lru_cache(maxsize=1)
def _library():
    """The first NVRTC wrapper that loads and answers, or ``None``."""
    for wrapper in (_CudaBindingsNvrtc, _CupyNvrtc):
        try:
            lib = wrapper()
            lib.version()  # loads libnvrtc: fails here when only the Python module exists
            return lib
        except Exception:  # ImportError, missing libnvrtc.so, ...
            continue
    return None


def nvrtc_available() -> bool:
    """True when NVRTC can be loaded (from cuda.bindings or CuPy). Cached."""
    return _library() is not None


def nvrtc_version() -> str | None:
    """NVRTC's version as ``"13.0"``, or ``None`` without NVRTC."""
    lib = _library()
    if lib is None:
        return None
    major, minor = lib.version()
    return f"{major}.{minor}"


# -- include directories ----------------------------------------------------

@functools.lru_cache(maxsize=1)
def nvrtc_include_dirs() -> tuple[str, ...]:
    """Directories holding ``cuda_fp16.h``, ``math_constants.h``,
    ``cooperative_groups.h`` (CUDA runtime headers) and ``cuda/std/...``
    (CCCL, which ``cooperative_groups.h`` needs), found in installed nvidia
    wheels, ``$CONDA_PREFIX``, ``$CUDA_PATH``/``$CUDA_HOME`` and
    ``/usr/local/cuda``. Cached for the process."""
    dirs: list[str] = []
    try:
        from cuda.pathfinder import locate_nvidia_header_directory
        for lib in ("cudart", "cccl"):
            try:
                found = locate_nvidia_header_directory(lib)
            except Exception:
                found = None
            if found is not None and found.abs_path:
                dirs.append(found.abs_path)
    except ImportError:
        pass
    # Without cuda-pathfinder, or where it found only one of the two.
    candidates = []
    for site in _site_packages():
        candidates += [os.path.join(site, "nvidia", "cu13", "include"),
                       os.path.join(site, "nvidia", "cu13", "include", "cccl"),
                       os.path.join(site, "nvidia", "cuda_runtime", "include"),
                       os.path.join(site, "nvidia", "cuda_cccl", "include")]
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


def _site_packages() -> list[str]:
    import site
    import sys
    paths = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    paths += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(paths))


# -- compiling --------------------------------------------------------------

def check_with_nvrtc(source: str, options: "CompileOptions", kernel_names: Sequence[str],
                     arch: str | None = None) -> NvrtcResult:
    """Compile ``source`` exactly as given with NVRTC for ``arch`` (else
    ``options.arch``, else ``sm_90``) and report each kernel's resources.

    ``kernel_names`` are the ``extern "C"`` kernels in the source; the
    template instantiations in ``options.name_expressions`` are added with
    ``nvrtcAddNameExpression``. A ``compute_XX`` architecture is checked as
    ``sm_XX`` so that ptxas runs and resources are known.

    Raises :class:`~workbench.backends.base.CompileFailed` with NVRTC's log
    (``cell.cu(LINE): error: ...``) when the source does not compile, and
    :class:`~workbench.errors.BackendUnavailable` when NVRTC is not installed.
    """
    lib = _library()
    if lib is None:
        from ..errors import BackendUnavailable
        raise BackendUnavailable(
            "NVRTC is not installed: pip install cuda-bindings nvidia-cuda-nvrtc "
            "(or CuPy) to check CUDA C++ with NVIDIA's compiler.")
    target = normalise_arch(arch or options.arch or DEFAULT_ARCH)
    if target.startswith("compute_"):
        target = "sm_" + target[len("compute_"):]
    flags = list(options.nvrtc_options(target))
    # options.arch may differ from the override; the last --gpu-architecture wins in NVRTC,
    # but keep a single one so the log and the cache key say what was compiled.
    flags = [f for f in flags if not f.startswith("--gpu-architecture=")]
    flags.insert(0, f"--gpu-architecture={target}")
    flags += [f"--include-path={d}" for d in nvrtc_include_dirs()]
    flags.append(_PTXAS_VERBOSE)
    names = tuple(options.name_expressions)

    key = _cache_key(source, flags, names, nvrtc_version(), target)
    cache_path = _cache_path(key) if _cacheable(source, options) else None
    start = time.perf_counter()
    cached = _cache_read(cache_path)
    if cached is not None:
        ok, log, ptx, cubin, lowered = cached
    else:
        ok, log, ptx, cubin, lowered = lib.compile(source, flags, names, BUILTIN_HEADERS)
        if not ok and "ptxas" in log and "option" in log.lower():
            # An NVRTC too old for -Xptxas: compile without the resource report.
            flags.remove(_PTXAS_VERBOSE)
            ok, log, ptx, cubin, lowered = lib.compile(source, flags, names, BUILTIN_HEADERS)
        _cache_write(cache_path, ok, log, ptx, cubin, lowered)
    seconds = time.perf_counter() - start
    if not ok:
        raise CompileFailed(log, compiler="NVRTC")
    user_log, per_function = parse_ptxas_report(log)
    result = NvrtcResult(log=user_log, ptx=ptx, cubin=cubin, arch=target,
                         lowered_names=dict(lowered), cache_hit=cached is not None,
                         compile_seconds=seconds)
    const_bytes = constant_bank_bytes(cubin) if cubin else None
    max_ntid = ptx_thread_limits(ptx)
    wanted = {n: n for n in kernel_names}
    wanted.update({expr: lowered[expr] for expr in names if expr in lowered})
    for key_name, symbol in wanted.items():
        report = per_function.get(symbol)
        if report is None:
            continue
        result.resources[key_name] = _resources(report, const_bytes, max_ntid.get(symbol), target)
    return result


def _is_real_arch(options: Sequence[str]) -> bool:
    return any(o.startswith("--gpu-architecture=sm_") for o in options)


def _resources(report: dict, const_bytes, thread_limit, arch) -> KernelResources:
    registers = report.get("registers")
    return KernelResources(
        registers=registers,
        shared_bytes=report.get("smem", 0 if registers is not None else None),
        local_bytes=report.get("stack"),
        const_bytes=const_bytes,
        max_threads_per_block=max_threads_per_block(registers, thread_limit),
        arch=arch,
        spill_stores=report.get("spill_stores"),
        spill_loads=report.get("spill_loads"),
    )


def max_threads_per_block(registers: int | None, thread_limit: int | None = None) -> int | None:
    """The largest block the kernel can be launched with: 1024, less where
    ``__launch_bounds__``/``.maxntid`` (``thread_limit``) says so or where the
    block's registers would exceed 64 K. Registers are allocated per warp in
    units of 256, and a block's warps are spread over the multiprocessor's four
    sub-partitions (16 K registers each), so the warp count rounds up to 4."""
    if registers is None:
        return None
    limit = 1024 if thread_limit is None else min(1024, thread_limit)
    if registers > 0:
        per_warp = -(-registers * _WARP_SIZE // _REGISTER_ALLOCATION_UNIT) * _REGISTER_ALLOCATION_UNIT
        warps_per_partition = (_REGISTERS_PER_BLOCK // 4) // per_warp
        limit = min(limit, 4 * warps_per_partition * _WARP_SIZE)
    return limit


# -- reading ptxas's report, the PTX and the cubin ---------------------------

# NVRTC prefixes every ptxas line; the ptxas program leaves the prefix off "N bytes stack frame".
_PTXAS_LINE = re.compile(r"^(?:ptxas(?: info)?\s+[:.]|\s+\d+ bytes stack frame)")
_FUNCTION = re.compile(r"Function properties for (\S+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FIGURES = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def parse_ptxas_report(log: str) -> tuple[str, dict[str, dict[str, int]]]:
    """Split NVRTC's log into the user's log (without ``ptxas info`` lines)
    and ``{mangled name: {"registers": .., "smem": .., "stack": ..,
    "spill_stores": .., "spill_loads": .., "barriers": ..}}``."""
    kept: list[str] = []
    functions: dict[str, dict[str, int]] = {}
    entry = current = None
    for line in log.splitlines():
        if not _PTXAS_LINE.match(line):
            kept.append(line)
            continue
        if m := _ENTRY.search(line):
            entry = current = m.group(1)
            functions.setdefault(entry, {})
            continue
        if m := _FUNCTION.search(line):
            current = m.group(1)
            continue
        target = current if "stack frame" in line else entry
        if target is None:
            continue
        for figure, pattern in _FIGURES.items():
            if m := pattern.search(line):
                functions.setdefault(target, {})[figure] = int(m.group(1))
    text = "\n".join(kept).strip()
    return (text + "\n" if text else ""), functions


_ENTRY_PTX = re.compile(r"\.entry\s+([\w$]+)\s*\(.*?\)\s*([^{]*)\{", re.S)
_NTID = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def ptx_thread_limits(ptx: str) -> dict[str, int]:
    """``{entry: threads}`` from ``.maxntid``/``.reqntid`` (``__launch_bounds__``)."""
    limits = {}
    for m in _ENTRY_PTX.finditer(ptx):
        if d := _NTID.search(m.group(2)):
            limits[m.group(1)] = int(d.group(2)) * int(d.group(3) or 1) * int(d.group(4) or 1)
    return limits


def cubin_sections(cubin: bytes) -> dict[str, int]:
    """``{section name: size}`` of a 64-bit little-endian ELF (a cubin)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return {}
    (section_offset,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, section_offset + i * entry_size) for i in range(count)]
    names_offset = headers[names_index][4]
    sections = {}
    for name_at, _type, _flags, _addr, _offset, size in headers:
        start = names_offset + name_at
        sections[cubin[start:cubin.index(b"\0", start)].decode(errors="replace")] = size
    return sections


def constant_bank_bytes(cubin: bytes) -> int:
    """Bytes of user ``__constant__`` memory (the ``.nv.constant3`` bank)."""
    try:
        return cubin_sections(cubin).get(".nv.constant3", 0)
    except (struct.error, ValueError, IndexError):
        return 0


# -- the on-disk cache -------------------------------------------------------

def _cacheable(source: str, options) -> bool:
    if os.environ.get("WORKBENCH_NVRTC_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if re.search(r'^\s*#\s*include\s*"', source, re.M):
        return False
    return not any(o.startswith(("-I", "--include-path")) for o in options.extra)


def _cache_key(source, flags, names, version, arch) -> str:
    text = json.dumps([_CACHE_FORMAT, version, arch, source, list(flags), list(names),
                       BUILTIN_HEADERS], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def cache_dir() -> str:
    """Where NVRTC results are cached: ``$WORKBENCH_CACHE_DIR/nvrtc`` or
    ``~/.cache/cuda-workbench/nvrtc``."""
    root = os.environ.get("WORKBENCH_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "cuda-workbench")
    return os.path.join(root, "nvrtc")


def _cache_path(key: str) -> str:
    return os.path.join(cache_dir(), key[:2], key + ".json")


def _cache_read(path):
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        cubin = base64.b64decode(d["cubin"]) if d["cubin"] else None
        return d["ok"], d["log"], d["ptx"], cubin, d["lowered"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_write(path, ok, log, ptx, cubin, lowered) -> None:
    if path is None:
        return
    record = {"ok": ok, "log": log, "ptx": ptx, "lowered": lowered,
              "cubin": base64.b64encode(cubin).decode() if cubin else None}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home directory only costs speed


def clear_cache() -> int:
    """Delete every cached NVRTC result; returns how many were removed."""
    removed = 0
    for path in glob.glob(os.path.join(cache_dir(), "*", "*.json")):
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    return removed
