"""Compile a source with NVRTC and report each kernel's resources."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Sequence

from ...errors import BackendUnavailable
from ...present.tables import html_table, pandas
from ..contract import CompileFailed, CompileOptions, KernelResources, normalise_arch
from ..registers import max_threads_per_block
from . import bindings, cache
from .headers import BUILTIN_HEADERS, nvrtc_include_dirs
from .ptxas import constant_bank_bytes, cubin_resources, parse_ptxas_report, ptx_thread_limits

DEFAULT_ARCH = "sm_90"
_PTXAS_VERBOSE = "-Xptxas=-v"
#: NVRTC 12.9 and later keep compiled programs in the driver's compute cache
#: (~/.nv/ComputeCache) and, on a hit there, do not run ptxas: the log then has
#: no resource report. The workbench's own cache stands in for it.
_NO_NVRTC_CACHE, _NO_NVRTC_CACHE_SINCE = "--no-cache", (12, 9)
_RESOURCE_FIELDS = [f.name for f in dataclasses.fields(KernelResources)]


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

    def _rows(self) -> list[list]:
        return [[name, *(getattr(r, f) for f in _RESOURCE_FIELDS)] for name, r in self.resources.items()]

    def to_pandas(self):
        """One row per kernel: registers, shared/local/constant bytes..."""
        return pandas().DataFrame(self._rows(), columns=["kernel", *_RESOURCE_FIELDS])

    def _repr_html_(self) -> str:
        return html_table(self._rows(), ["kernel", *_RESOURCE_FIELDS], title=f"NVRTC, {self.arch}")


def _short(r: KernelResources) -> str:
    return (f"{r.registers} regs, {r.shared_bytes} B smem, {r.local_bytes} B local, "
            f"max {r.max_threads_per_block} threads")


def check_with_nvrtc(source: str, options: CompileOptions, kernel_names: Sequence[str],
                     arch: str | None = None) -> NvrtcResult:
    """Compile ``source`` exactly as given with NVRTC for ``arch`` (else
    ``options.arch``, else ``sm_90``) and report each kernel's resources.

    ``kernel_names`` are the ``extern "C"`` kernels in the source; the
    template instantiations in ``options.name_expressions`` are added with
    ``nvrtcAddNameExpression``. A ``compute_XX`` architecture is checked as
    ``sm_XX`` so that ptxas runs and resources are known.

    Raises :class:`~workbench.backends.contract.CompileFailed` with NVRTC's log
    (``cell.cu(LINE): error: ...``) when the source does not compile, and
    :class:`~workbench.errors.BackendUnavailable` when NVRTC is not installed.
    """
    lib = bindings.library()
    if lib is None:
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
    if tuple(lib.version()) >= _NO_NVRTC_CACHE_SINCE:
        flags.append(_NO_NVRTC_CACHE)
    names = tuple(options.name_expressions)

    key = cache.cache_key(source, flags, names, bindings.nvrtc_version(), target) \
        if cache.cacheable(source, options) else None
    start = time.perf_counter()
    cached = cache.read(key) if key is not None else None
    if cached is not None:
        ok, log, ptx, cubin, lowered = cached
    else:
        ok, log, ptx, cubin, lowered = lib.compile(source, flags, names, BUILTIN_HEADERS)
        if not ok and "ptxas" in log and "option" in log.lower():
            # An NVRTC too old for -Xptxas: compile without the resource report.
            flags.remove(_PTXAS_VERBOSE)
            ok, log, ptx, cubin, lowered = lib.compile(source, flags, names, BUILTIN_HEADERS)
        if key is not None:
            cache.write(key, ok, log, ptx, cubin, lowered)
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
    if cubin and not all(symbol in per_function for symbol in wanted.values()):
        per_function = {**cubin_resources(cubin), **per_function}  # a log without the report
    for name, symbol in wanted.items():
        report = per_function.get(symbol)
        if report is not None:
            result.resources[name] = _resources(report, const_bytes, max_ntid.get(symbol), target)
    return result


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
