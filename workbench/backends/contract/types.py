"""What crosses the Backend contract besides arrays and streams: compile
options and failures, a kernel's resources, a device's properties, and the
compiled module (:class:`CompiledModule`) that :meth:`Kernels.compile
<workbench.backends.contract.Kernels.compile>` returns.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from ...cxx.defines import normalise_defines


class CompileFailed(Exception):
    """Raised by :meth:`Backend.compile` with the compiler's raw log.

    The core turns it into :class:`workbench.CompileError` with diagnostics on
    the user's line numbers. ``compiler`` names the tool (``"NVRTC"``,
    ``"g++"``) and ``line_shift`` is how many lines the backend itself
    prepended to the source before compiling it (subtracted from the log's
    line numbers).
    """

    def __init__(self, log: str, compiler: str = "NVRTC", line_shift: int = 0):
        self.log = log
        self.compiler = compiler
        self.line_shift = line_shift
        super().__init__(log)


@dataclass(frozen=True)
class CompileOptions:
    """What the user asked for when compiling (``%%cuda`` options)."""

    arch: str | None = None            # "sm_90", "compute_90", "90"; None: the device's
    defines: tuple[str, ...] = ()      # "NAME" or "NAME=VALUE" (given: also a dict)
    std: str | None = None             # "c++17"
    fast_math: bool = False
    extra: tuple[str, ...] = ()        # any other NVRTC option, verbatim
    name_expressions: tuple[str, ...] = ()  # "kern<float>" template instantiations
    checked: bool = False              # simulator: bounds-checked build

    def __post_init__(self):
        # a dict {"NAME": value} or a list of "NAME" / "NAME=VALUE", checked (cxx.defines)
        object.__setattr__(self, "defines", normalise_defines(self.defines))

    def nvrtc_options(self, default_arch: str | None = None) -> tuple[str, ...]:
        """The options as NVRTC spells them (without the architecture when
        neither ``arch`` nor ``default_arch`` is given)."""
        opts: list[str] = []
        arch = normalise_arch(self.arch or default_arch)
        if arch:
            opts.append(f"--gpu-architecture={arch}")
        opts += [f"-D{d}" for d in self.defines]
        if self.std:
            opts.append(f"--std={self.std}")
        if self.fast_math:
            opts.append("--use_fast_math")
        opts += list(self.extra)
        return tuple(opts)


def normalise_arch(arch: str | None) -> str | None:
    """``"90"``, ``"sm90"``, ``"sm_90"`` -> ``"sm_90"``; ``compute_XX`` kept."""
    if arch is None:
        return None
    a = str(arch).strip().lower()
    if a.startswith("compute_") or a.startswith("sm_"):
        return a
    if a.startswith("sm"):
        return "sm_" + a[2:]
    if a.isdigit() or (a[:-1].isdigit() and a[-1] in "af"):
        return "sm_" + a
    return a


@dataclass(frozen=True)
class KernelResources:
    """What a compiled kernel uses, per thread or per block, in bytes.

    Any field may be ``None`` where the backend cannot tell.
    """

    registers: int | None = None          # per thread
    shared_bytes: int | None = None       # static shared memory per block
    local_bytes: int | None = None        # local memory (spills, stack) per thread
    const_bytes: int | None = None        # user __constant__ memory
    max_threads_per_block: int | None = None
    arch: str | None = None               # the architecture these figures are for
    spill_stores: int | None = None
    spill_loads: int | None = None

    def summary(self) -> str:
        """One line for a kernel's repr (empty when the registers are unknown):
        ``"32 registers, 0 B shared, 0 B local (spills), 0 B constant on sm_90"``."""
        if self.registers is None:
            return ""
        constant = f", {self.const_bytes} B constant" if self.const_bytes is not None else ""
        return (f"{self.registers} registers, {self.shared_bytes} B shared, "
                f"{self.local_bytes} B local (spills){constant}"
                f"{' on ' + self.arch if self.arch else ''}")

    def fields(self) -> tuple:
        """``(label, value)`` rows for a kernel's table (``None``: unknown)."""
        return (("registers / thread", self.registers), ("static shared (B)", self.shared_bytes),
                ("local / spills (B)", self.local_bytes), ("constant (B)", self.const_bytes),
                ("max threads / block", self.max_threads_per_block), ("architecture", self.arch))


@dataclass
class DeviceProperties:
    """Static properties of one device. ``extra`` holds anything else the
    backend knows (the panels show it); values it cannot give are absent."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 48 * 1024
    shared_memory_per_multiprocessor: int = 64 * 1024
    registers_per_block: int = 65536
    registers_per_multiprocessor: int = 65536
    max_threads_per_multiprocessor: int = 2048
    max_blocks_per_multiprocessor: int = 32
    l2_cache_bytes: int | None = None
    clock_khz: int | None = None
    memory_clock_khz: int | None = None
    memory_bus_width: int | None = None
    simulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class CompiledModule(abc.ABC):
    """The result of :meth:`Backend.compile`."""

    #: True when the backend's compile cache supplied the binary.
    cache_hit: bool = False
    #: Seconds spent in compile() (including cache look-up).
    compile_seconds: float = 0.0
    #: Compiler log of a successful compile (warnings), possibly empty.
    log: str = ""
    #: Name of the tool whose messages are in ``log``.
    compiler: str = "NVRTC"
    #: Lines the backend prepended to the user's source (see CompileFailed).
    line_shift: int = 0
    #: What NVRTC produced for this source when it compiled it (PTX, cubin,
    #: log, per-kernel resources: :class:`workbench.backends.nvrtc.NvrtcResult`),
    #: kept so that nothing compiles the same source twice; None otherwise.
    nvrtc = None

    @abc.abstractmethod
    def get_function(self, name: str) -> Any:
        """A launchable handle for an ``extern "C"`` kernel name or a name
        expression given in ``CompileOptions.name_expressions``."""

    def resources(self, name: str) -> KernelResources:
        """Registers and memory of kernel ``name``."""
        return KernelResources()

    def write_global(self, name: str, data: bytes) -> None:
        """Copy ``data`` to the start of the module's ``__constant__`` or
        ``__device__`` variable ``name`` (``cudaMemcpyToSymbol``); ``name`` is
        the variable's name as written, or ``ns::name`` inside a namespace.
        KeyError when there is no such variable."""
        raise NotImplementedError(f"{type(self).__name__} cannot write module variables")

    def read_global(self, name: str, nbytes: int) -> bytes:
        """The first ``nbytes`` of module variable ``name`` (``cudaMemcpyFromSymbol``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot read module variables")
