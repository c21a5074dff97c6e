"""The interface every execution backend implements.

A backend owns a device: it allocates and copies arrays, compiles CUDA C++
source into modules, launches kernels, records events and reports the
device's properties and memory. It knows nothing of Jupyter, widgets or
plots, and nothing of the workbench's checks: the core
(:mod:`workbench.core`) parses signatures, validates arguments, converts
Python scalars to exact C types and keeps the timing log, then calls the
backend with arguments that are already right.

Two implementations: :mod:`workbench.backends.cupy_gpu` (a real GPU through
CuPy) and :mod:`workbench.backends.simulator` (CUDA C++ on the CPU).
"""
from __future__ import annotations

import abc
import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


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
    defines: tuple[str, ...] = ()      # "NAME" or "NAME=VALUE"
    std: str | None = None             # "c++17"
    fast_math: bool = False
    extra: tuple[str, ...] = ()        # any other NVRTC option, verbatim
    name_expressions: tuple[str, ...] = ()  # "kern<float>" template instantiations
    checked: bool = False              # simulator: bounds-checked build

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


def visible_device(index: int, visible: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a child process that is to see only
    device ``index`` of a process whose own ``CUDA_VISIBLE_DEVICES`` is
    ``visible`` (None or empty: every device, numbered as CUDA numbers them):
    the ``index``-th entry of that list (an ordinal or a ``GPU-uuid``)."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if not entries:
        return str(index)
    if not 0 <= index < len(entries):
        raise ValueError(f"device {index} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    return entries[index]


class Backend(abc.ABC):
    """One device and the operations the workbench needs on it."""

    #: Short identifier: "cupy" or "simulator".
    name: str = "?"
    #: True when kernels run on the CPU and times are simulated.
    simulated: bool = False

    # -- arrays -----------------------------------------------------------
    @property
    @abc.abstractmethod
    def xp(self):
        """The NumPy-compatible array module whose arrays live on this
        backend's device (``cupy`` on a GPU)."""

    @abc.abstractmethod
    def allocate(self, shape, dtype) -> Any:
        """An uninitialised device array."""

    @abc.abstractmethod
    def to_device(self, host_array) -> Any:
        """Copy a NumPy array (or anything ``numpy.asarray`` takes) to the device."""

    @abc.abstractmethod
    def to_host(self, device_array):
        """Copy a device array to a new NumPy array (synchronises)."""

    @abc.abstractmethod
    def is_device_array(self, obj) -> bool:
        """True when ``obj`` is an array this backend's kernels can take as a pointer."""

    #: The usual type of device arrays, for a fast ``type(a) is ...`` check on
    #: the launch path before :meth:`is_device_array`; ``None`` skips it.
    device_array_type: type | None = None

    # -- devices ----------------------------------------------------------
    @abc.abstractmethod
    def device_count(self) -> int: ...

    @abc.abstractmethod
    def current_device(self) -> int: ...

    @abc.abstractmethod
    def set_device(self, index: int) -> None: ...

    def child_environment(self) -> dict[str, str]:
        """Environment variables that make a CUDA program started from this
        process run on the active device (``CUDA_VISIBLE_DEVICES``, in this
        process's own numbering of the devices it sees); none on the simulator."""
        if self.simulated:
            return {}
        return {"CUDA_VISIBLE_DEVICES": visible_device(self.current_device(),
                                                       os.environ.get("CUDA_VISIBLE_DEVICES"))}

    @abc.abstractmethod
    def device_properties(self, index: int | None = None) -> DeviceProperties: ...

    @abc.abstractmethod
    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the current device."""

    def versions(self) -> dict[str, str]:
        """Driver, runtime, compiler and library versions, as strings."""
        return {}

    def device_name(self, index: int | None = None) -> str:
        """The device's name as a user should read it (a simulated device
        says so)."""
        name = self.device_properties(index).name
        return f"{name} (simulated)" if self.simulated else name

    def device_attribute(self, name: str, index: int | None = None) -> int | None:
        """A CUDA device attribute by its runtime name (``"cudaDevAttrGlobalMemoryBusWidth"``),
        or ``None`` where the backend cannot tell."""
        return None

    def can_access_peer(self, index: int, peer: int) -> bool | None:
        """Whether device ``index`` can read and write device ``peer``'s memory
        directly; ``None`` where the backend cannot tell."""
        return None

    # -- compile and launch -----------------------------------------------
    @abc.abstractmethod
    def compile(self, source: str, options: CompileOptions,
                kernel_names: Sequence[str]) -> CompiledModule:
        """Compile ``source``; ``kernel_names`` are the ``extern "C"`` kernels
        found in it (name expressions are in ``options``). Raises
        :class:`CompileFailed` with the log on error."""

    @abc.abstractmethod
    def launch(self, function, grid: tuple[int, int, int],
               block: tuple[int, int, int], args: tuple,
               shared_mem: int = 0, stream=None, cooperative: bool = False) -> None:
        """Launch asynchronously. ``args`` are device arrays and NumPy scalars
        of the exact C types, already checked by the core (None: a null
        pointer). ``cooperative``: every block runs at once, so that
        ``this_grid().sync()`` works (``cudaLaunchCooperativeKernel``)."""

    def make_launcher(self, function, params, cooperative: bool = False) -> Callable:
        """A callable ``(grid, block, args, shared_mem, stream)`` that launches
        ``function``, built once per kernel. ``params`` are the kernel's parsed
        parameters (:class:`workbench.core.signature.Param`), so a backend can
        prepare the argument layout ahead of time. The default calls
        :meth:`launch`. A launcher that packs Python ints and floats into the
        parameters' C types itself (the caller has range-checked them) says so
        with an attribute ``packs_python_numbers = True``: calls then skip
        making NumPy scalars of the exact types. A launcher may also carry
        ``between(start, end, grid, block, args, shared_mem, stream)``: the
        launch with events ``start`` and ``end`` recorded on ``stream`` around
        it, in one call (the timing log uses it where it times by events).
        A launcher that can run a whole call in native code carries
        ``fast_call(checks, configs, session, log, template, slots)``, which
        the core calls once per kernel for an object taking the common
        calls (see ``native/launch.c``), and ``failed(status)``, which raises
        the error of a launch that returned ``status``."""
        launch = self.launch

        def launcher(grid, block, args, shared_mem, stream):
            launch(function, grid, block, args, shared_mem, stream, cooperative=cooperative)
        return launcher

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        """A block size with the best occupancy for ``function``."""
        return 256

    # -- streams, events, synchronisation ----------------------------------
    # Work on one stream runs in order; an event recorded on a stream marks
    # the point after the work queued before it. ``stream=None`` everywhere
    # means the current stream.
    @abc.abstractmethod
    def current_stream(self) -> Any: ...

    def stream_pointer(self, stream) -> int:
        """The raw ``cudaStream_t`` of ``stream`` (``None``: the current one), for
        kernel languages with their own stream objects (Numba, Triton); 0, the
        legacy default stream, where the backend has no CUDA streams."""
        return 0

    @abc.abstractmethod
    def create_stream(self, priority: int | None = None, non_blocking: bool = False) -> Any:
        """A new stream (``priority``: lower numbers run first, as CUDA's)."""

    @abc.abstractmethod
    def use_stream(self, stream) -> contextlib.AbstractContextManager:
        """A context manager making ``stream`` current for this thread."""

    @abc.abstractmethod
    def stream_synchronize(self, stream) -> None:
        """Wait for every piece of work queued on ``stream``."""

    @abc.abstractmethod
    def create_event(self) -> Any: ...

    def destroy_event(self, event) -> None:
        """Free ``event`` (made by :meth:`create_event`); it is not used again."""

    @abc.abstractmethod
    def record_event(self, event, stream=None) -> None:
        """Mark the point after the work queued on ``stream``; the event and
        the stream must belong to one device (as CUDA requires)."""

    def stream_done(self, stream) -> bool:
        """True when the work queued on ``stream`` so far has finished (never blocks)."""
        event = self.create_event()
        try:
            self.record_event(event, stream)
            return self.event_done(event)
        finally:
            self.destroy_event(event)

    @abc.abstractmethod
    def stream_wait_event(self, stream, event) -> None:
        """Work queued on ``stream`` from now on starts after ``event``
        (a dependency between streams; the host does not wait)."""

    @abc.abstractmethod
    def event_synchronize(self, event) -> None:
        """Wait until the work before ``event`` has finished."""

    @abc.abstractmethod
    def event_done(self, event) -> bool:
        """True when the work before the event has finished (never blocks)."""

    @abc.abstractmethod
    def elapsed_ms(self, start, end) -> float:
        """Milliseconds between two recorded events (blocks until ``end``)."""

    def timeline_offset_ms(self, anchor, event) -> float:
        """Milliseconds from event ``anchor`` to ``event`` on the device's clock
        (both recorded on one device, in any order): where the timeline places work."""
        return self.elapsed_ms(anchor, event)

    @abc.abstractmethod
    def synchronize(self) -> None: ...

    def stream_device(self, stream) -> int:
        """The device ``stream`` belongs to (``None``: the current stream's)."""
        return self.current_device()

    def is_default_stream(self, stream) -> bool:
        """True for the stream a thread uses when it chose none."""
        return False

    # -- copies, memory kinds, graphs (workbench/core/streams.py, copies.py, graphs.py) ---
    def copy(self, dst, src, stream=None) -> None:
        """Queue a copy of ``src`` into ``dst`` on ``stream`` (``None``: the current
        one). Each is a C-contiguous host NumPy array or a device array (of any
        device) of the same number of bytes; the core has checked that. A copy from
        or to pageable host memory may return only when it is done (as CUDA's)."""
        raise NotImplementedError(f"the {self.name} backend cannot copy")

    def memset(self, array, value: int, stream=None) -> None:
        """Queue setting every byte of the device array ``array`` to ``value``."""
        raise NotImplementedError(f"the {self.name} backend cannot memset")

    def array_device(self, array) -> int:
        """The device whose memory holds the device array ``array``."""
        return self.current_device()

    def alloc_pinned(self, shape, dtype):
        """A NumPy array in page-locked host memory (faster, asynchronous copies)."""
        raise NotImplementedError(f"the {self.name} backend has no pinned host memory")

    def alloc_managed(self, shape, dtype):
        """A device array in managed (unified) memory: the host and every device
        address it; the driver moves pages on demand."""
        raise NotImplementedError(f"the {self.name} backend has no managed memory")

    #: True where managed arrays come from the device pool (and count in its figures).
    managed_in_pool: bool = False

    def managed_prefetch_supported(self, index: int | None = None) -> bool:
        """Whether device ``index`` takes prefetch and advice for managed memory
        (``cudaDevAttrConcurrentManagedAccess``)."""
        return False

    def release_pinned_cache(self) -> None:
        """Give the pinned (page-locked) host blocks that no array uses back to
        the system (a pool keeps them otherwise)."""

    def prefetch(self, array, device: int, stream=None) -> None:
        """Queue moving managed ``array``'s pages to ``device`` (-1: the host)."""
        raise NotImplementedError(f"the {self.name} backend cannot prefetch managed memory")

    def advise(self, array, advice: str, device: int) -> None:
        """``cudaMemAdvise``: ``advice`` is ``"read_mostly"``,
        ``"preferred_location"`` or ``"accessed_by"`` (``unset_...`` too)."""
        raise NotImplementedError(f"the {self.name} backend cannot advise managed memory")

    def enable_peer_access(self, index: int, peer: int) -> bool:
        """Let device ``index`` address device ``peer``'s memory; False where it cannot."""
        return False

    def begin_capture(self, stream) -> None:
        """Work queued on ``stream`` from now on is recorded into a graph, not run."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def end_capture(self, stream):
        """End a capture on ``stream``: a graph handle for :meth:`graph_launch`."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def graph_launch(self, graph, stream=None) -> None:
        """Queue every node of ``graph`` on ``stream``, in one launch."""
        raise NotImplementedError(f"the {self.name} backend cannot launch graphs")

    def kernel_activity(self):
        """Where kernel start and end times come from without events on the
        launch path: an object with ``take()``, ``pause()`` and ``resume()``
        (see :mod:`.cupti_activity`), or None: the timing log records two
        events around each launch."""
        return None

    def kernel_symbol(self, function) -> str | None:
        """The name ``function`` (from :meth:`CompiledModule.get_function`) has
        in the compiled code, as profilers report it (mangled for C++)."""
        return None

    def timing_source(self) -> str:
        """In words: what times the launches of the timing log."""
        return "events"

    def launch_path(self) -> str:
        """In words: what launches a kernel's call (a compiled launcher, or Python)."""
        return "the backend's launch()"

    # -- memory accounting --------------------------------------------------
    def add_allocation_listener(self, on_alloc: Callable[[int, int], None],
                                on_free: Callable[[int, int], None]) -> Callable[[], None]:
        """Call ``on_alloc(ptr, size)`` / ``on_free(ptr, size)`` for every
        device allocation and free from now on; returns a function that
        removes the listener. Backends that cannot report return a no-op."""
        return lambda: None

    @abc.abstractmethod
    def pool_stats(self) -> dict[str, int]:
        """The allocator's own counts: ``used_bytes``, ``total_bytes``
        (reserved), ``free_blocks``, ``largest_free_block``, ``limit``,
        ``pinned_free_blocks``; a key is absent where the pool cannot tell."""

    @abc.abstractmethod
    def pool_reserved_bytes(self) -> int:
        """Bytes the pool holds from the device (in use plus cached). Cheap:
        called on every allocation while memory is tracked."""

    @abc.abstractmethod
    def set_pool_limit(self, nbytes: int | None) -> None:
        """Cap the pool at ``nbytes`` (``None`` or 0: no cap). Allocations
        beyond it raise the backend's out-of-memory error."""

    @abc.abstractmethod
    def empty_cache(self) -> None:
        """Give the pool's cached free blocks (device and pinned host) back."""

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """True when ``exc`` is this backend's out-of-memory error."""
        return isinstance(exc, MemoryError)

    def device_pointer(self, array) -> int:
        """The device address of ``array``'s first element."""
        return int(array.data.ptr)

    # -- persistent kernels (backends/persistent.py) ------------------------------------
    def alloc_mapped(self, nbytes: int):
        """A :class:`~.persistent.MappedBuffer` of ``nbytes``: host memory that
        kernels read and write directly."""
        raise NotImplementedError(f"the {self.name} backend has no mapped host memory")

    def launch_persistent(self, function, grid, block, args, shared_mem: int = 0):
        """Launch ``function`` and return at once with a
        :class:`~.persistent.PersistentLaunch`; the kernel runs until it returns
        by itself, while other launches go on."""
        raise NotImplementedError(f"the {self.name} backend cannot run persistent kernels")

    def concurrent_blocks(self) -> int | None:
        """How many blocks of one launch can run at once apart from the kernel's
        own occupancy (None: only occupancy limits it, as on a GPU)."""
        return None

    def activity(self) -> dict:
        """Cumulative counters of the backend's own work, for the live device
        panel: ``launches`` (kernels launched), ``kernel_seconds`` (time the
        launches ran), ``threads`` (OS threads that run blocks). Empty where
        the backend keeps none (on a GPU, NVML gives the live figures)."""
        return {}

    def configure(self, **options) -> bool:
        """Change ``options`` (those of the constructor) on this instance,
        keeping its arrays, modules and kernels; False where one of them
        cannot change in place (the session then makes a new instance)."""
        return not options

    def foreign_array(self, obj) -> str | None:
        """Where ``obj`` is a device array of another instance of this kind
        of backend (not usable here), words that say so; else None."""
        return None

    #: Why this backend was chosen (set by the session).
    reason: str = ""

    def describe(self) -> str:
        """One line saying what this backend runs on."""
        return self.name

    def __repr__(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"<workbench backend {self.name}: {self.describe()}{why}>"

    # -- counted launches ----------------------------------------------------------------
    # (the lead moves this block into the interface's right place)
    def count_launches(self, kernel: str | None = None, skip: int = 0, count: int | None = None,
                       max_blocks: int | None = None):
        """A context manager: the kernel launches made inside it run from an
        instrumented build that counts every memory access (grouped into
        warp-level instructions) and basic block, and each one's
        :class:`~workbench.backends.counting.LaunchCounts` is appended to the
        list it yields. The kernels really run. ``kernel``: only kernels of
        this name (``"regex:..."``: a regular expression); ``skip``: so many
        matching launches run plainly first; ``count``: at most so many are
        counted; ``max_blocks``: count at most about so many blocks of a
        launch (evenly spaced; the rest run uncounted).

        Backends that cannot count raise NotImplementedError (on a GPU,
        Nsight Compute measures instead)."""
        raise NotImplementedError(f"the {self.name} backend does not count memory accesses; "
                                  "Nsight Compute measures them on a GPU")
