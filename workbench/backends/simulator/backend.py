"""``SimulatorBackend``: CUDA C++ kernels compiled with g++ and run on the CPU.

What happens where:

* :mod:`.source` rewrites a cell into C++ (same line numbers) and refuses
  what the CPU cannot run; :mod:`.build` compiles it with g++ (cached);
* :mod:`.worker` runs launches in a separate process over the shared
  :mod:`.arena` (device memory), so a crashing kernel never takes the
  notebook down; faults come back as :class:`workbench.errors.KernelFault`;
* :mod:`.xp` gives the NumPy-compatible array namespace ``wb.xp``.

Launches are synchronous: when :meth:`SimulatorBackend.launch` returns, the
kernel has finished and its ``printf`` output has been printed.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import struct
import sys
import time
from typing import Any, Sequence

import numpy as np

from ...errors import KernelArgumentError, KernelFault, LaunchConfigError
from ..base import (Backend, CompiledModule, CompileFailed, CompileOptions, DeviceProperties,
                    KernelResources, normalise_arch)
from . import build, source as source_mod
from .arena import RESERVED, Arena
from .devices import virtual_device
from .worker import OP_LAUNCH, OP_SYMBOL_READ, OP_SYMBOL_WRITE, Worker, WorkerDied, WorkerError
from .xp import ArrayNamespace, DeviceArray, empty_in, in_arena

_FAULT_SIGNALS = {1: None, 2: "trap", 3: "assert", 4: "deadlock", 5: "timeout", 6: "AddressSanitizer",
                  7: "error", 8: "unsupported"}
_SIGNAL_TEXT = {"SIGSEGV": "invalid memory access", "SIGBUS": "invalid memory access (bus error)",
                "SIGFPE": "arithmetic error (integer division by zero?)",
                "SIGILL": "illegal instruction", "SIGABRT": "abort"}


class SimFunction:
    """A launchable kernel of a :class:`SimModule`."""

    __slots__ = ("module", "name", "symbol")

    def __init__(self, module: "SimModule", name: str, symbol: str):
        self.module = module
        self.name = name
        self.symbol = symbol

    def __repr__(self) -> str:
        return f"<simulator kernel {self.name}{' (checked)' if self.module.checked else ''}>"


class SimModule(CompiledModule):
    """A compiled cell: a shared library loaded by the worker on first launch."""

    compiler = "g++"

    def __init__(self, path: str, kernels: Sequence[str], checked: bool,
                 resources: dict[str, KernelResources], backend: "SimulatorBackend"):
        self.path = path
        self.checked = checked
        self._resources = resources
        self._backend = backend
        self._functions = {name: SimFunction(self, name, source_mod.launcher_symbol(i))
                           for i, name in enumerate(kernels)}
        self._globals: dict[str, bytes] = {}
        self._loaded_in: tuple[int, int] | None = None  # (id(worker), worker.starts)

    def get_function(self, name: str) -> SimFunction:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"no kernel {name!r} in this module (kernels: {known}); template "
                           "kernels need their instantiation, e.g. instantiate=['scale<float>']"
                           ) from None

    def resources(self, name: str) -> KernelResources:
        return self._resources.get(name, KernelResources())

    @property
    def kernel_names(self) -> list[str]:
        return list(self._functions)

    def set_global(self, name: str, value) -> None:
        """Set a ``__constant__`` or ``__device__`` variable ``name`` to the
        bytes of ``value`` (like ``cudaMemcpyToSymbol``); kept across worker
        restarts."""
        data = np.ascontiguousarray(value).tobytes()
        self._globals[name] = data
        worker = self._backend._worker_for(self.checked)
        try:
            handle = self._backend._ensure_loaded(self, worker)
            self._write_global(worker, handle, name, data)
        except WorkerDied as died:
            raise self._backend._worker_fault(died, f"setting global variable {name!r}") from None

    def get_global(self, name: str, dtype, count: int = 1) -> np.ndarray:
        """The current value of global variable ``name`` as ``count`` items of ``dtype``."""
        dtype = np.dtype(dtype)
        worker = self._backend._worker_for(self.checked)
        try:
            handle = self._backend._ensure_loaded(self, worker)
            data = worker.request(OP_SYMBOL_READ, struct.pack("<I", handle) + _str(name)
                                  + struct.pack("<QQ", 0, dtype.itemsize * count))
        except WorkerDied as died:
            raise self._backend._worker_fault(died, f"reading global variable {name!r}") from None
        except WorkerError as exc:
            raise KeyError(f"no global variable {name!r} in this module: {exc}") from None
        return np.frombuffer(data, dtype=dtype, count=count).copy()

    @staticmethod
    def _write_global(worker, handle, name, data):
        try:
            worker.request(OP_SYMBOL_WRITE, struct.pack("<I", handle) + _str(name)
                           + struct.pack("<QQ", 0, len(data)) + data)
        except WorkerError as exc:
            raise KeyError(f"no global variable {name!r} in this module: {exc}") from None


class SimStream:
    """A simulator stream. Launches are synchronous, so work on every stream
    runs in the order it was queued and every stream is always idle: the
    ordering CUDA promises holds trivially."""

    def __init__(self, priority: int = 0):
        self.priority = priority

    def synchronize(self) -> None:
        pass

    def __repr__(self) -> str:
        return "<simulator stream>"


class SimEvent:
    """A point in time on the CPU plus the kernel time run before it."""

    __slots__ = ("wall", "kernel_ns", "recorded")

    def __init__(self):
        self.wall = 0.0
        self.kernel_ns = 0
        self.recorded = False


class SimulatorBackend(Backend):
    """Run CUDA C++ kernels on the CPU (see the module docstring).

    Parameters
    ----------
    checked:
        Build every module with AddressSanitizer so out-of-bounds accesses
        are reported with block, thread and source line (slower).
    timeout_s:
        Time limit of one launch; a kernel past it is stopped and reported.
    device:
        The virtual device: ``"H100"`` (default), ``"A100"``, ``"L4"``,
        ``"T4"``, ``"RTX 4090"``, a :class:`DeviceProperties` or a dict of
        property overrides.
    memory_bytes:
        Size of the virtual device memory (default: the device's).
    threads:
        OS threads that run blocks (default: every CPU this process may use).
    """

    name = "simulator"
    simulated = True

    def __init__(self, checked: bool = False, timeout_s: float = 60.0, device=None,
                 memory_bytes: int | None = None, threads: int = 0):
        self.checked = bool(checked)
        self.timeout_s = float(timeout_s)
        self.threads = int(threads)
        self._properties = virtual_device(device, memory_bytes)
        self._arena: Arena | None = None
        self._array_class = None
        self._xp = None
        self._workers: dict[bool, Worker] = {}
        self._kernel_ns = 0
        self._stream = SimStream()
        self.last_launch_ns = 0

    # -- arrays --------------------------------------------------------------------
    @property
    def arena(self) -> Arena:
        if self._arena is None:
            self._arena = Arena(self._properties.total_memory)
            self._array_class = type("DeviceArray", (DeviceArray,), {"_arena": self._arena,
                                                                     "__module__": __name__})
        return self._arena

    @property
    def array_class(self):
        self.arena  # noqa: B018 (creates the class)
        return self._array_class

    @property
    def xp(self):
        if self._xp is None:
            self._xp = ArrayNamespace(self.array_class)
        return self._xp

    def allocate(self, shape, dtype):
        return empty_in(self.array_class, shape, dtype)

    def to_device(self, host_array):
        if self.is_device_array(host_array):
            return host_array
        arr = np.asarray(host_array)
        if arr.dtype == object:
            raise TypeError("cannot copy an array of Python objects to the device; "
                            "give a numeric NumPy array")
        dest = empty_in(self.array_class, arr.shape, arr.dtype)
        np.copyto(dest.view(np.ndarray), arr)
        return dest

    def to_host(self, device_array):
        return np.array(np.asarray(device_array).view(np.ndarray), copy=True)

    def is_device_array(self, obj) -> bool:
        return isinstance(obj, np.ndarray) and self._arena is not None and in_arena(self._arena, obj)

    # -- devices ---------------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def set_device(self, index: int) -> None:
        if int(index) != 0:
            raise ValueError(f"the simulator has one device (index 0), not {index}")

    def device_properties(self, index: int | None = None) -> DeviceProperties:
        if index not in (None, 0):
            raise ValueError(f"the simulator has one device (index 0), not {index}")
        return self._properties

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` as cudaMemGetInfo gives them: what the pool has
        reserved (in use and cached) is not free, as on a GPU."""
        total = self._properties.total_memory
        reserved = self._arena.reserved_bytes() if self._arena is not None else 0
        return max(0, total - reserved), total

    def versions(self) -> dict[str, str]:
        out = {"simulator": build.SIMULATOR_VERSION, "g++": build.compiler_version() or "missing"}
        nv = _nvrtc()
        if nv is not None and nv.nvrtc_available():
            version = nv.nvrtc_version()
            if version:
                out["nvrtc"] = str(version)
        return out

    def describe(self) -> str:
        p = self._properties
        cpus = self.threads or len(os.sched_getaffinity(0))
        return (f"CPU simulator: simulated {p.name} ({p.multiprocessors} SMs, "
                f"cc {p.compute_capability[0]}.{p.compute_capability[1]}) on {cpus} CPU thread"
                f"{'s' if cpus != 1 else ''}, g++ {build.compiler_version() or 'missing'}"
                f"{', checked' if self.checked else ''}")

    # -- compile -------------------------------------------------------------------------
    def compile(self, source: str, options: CompileOptions,
                kernel_names: Sequence[str]) -> SimModule:
        start = time.perf_counter()
        resources: dict[str, KernelResources] = {}
        log, compiler = "", "g++"
        nv = _nvrtc()
        if nv is not None and nv.nvrtc_available():
            result = nv.check_with_nvrtc(source, options, kernel_names)  # raises CompileFailed
            resources, log, compiler = dict(result.resources), result.log, "NVRTC"
        problems = source_mod.find_unsupported(source)
        if problems:
            raise CompileFailed("\n".join(p.log_line() for p in problems), compiler="simulator")
        kernels = list(dict.fromkeys([*kernel_names, *options.name_expressions]))
        checked = bool(options.checked or self.checked)
        generated = source_mod.generate(source, kernels)
        built = build.build_library(generated, self._gxx_flags(options), checked,
                                    warnings=compiler != "NVRTC")
        module = SimModule(str(built.path), kernels, checked, resources, self)
        module.cache_hit = built.cache_hit
        module.log = log or built.log
        module.compiler = compiler
        try:  # undefined functions show up when the library is loaded
            self._ensure_loaded(module, self._worker_for(checked))
        except WorkerError as exc:
            raise CompileFailed(_explain_load_error(str(exc)), compiler="g++") from None
        except WorkerDied as died:  # e.g. a global's constructor crashed
            raise self._worker_fault(died, "loading the compiled cell") from None
        module.compile_seconds = time.perf_counter() - start
        return module

    def _gxx_flags(self, options: CompileOptions) -> list[str]:
        flags = [build.std_flag(options.std)]
        arch = normalise_arch(options.arch) or "sm_90"
        digits = re.sub(r"\D", "", arch)
        if digits:
            flags.append(f"-D__CUDA_ARCH__={int(digits) * 10}")
        flags += [f"-D{d}" for d in options.defines]
        if options.fast_math:
            flags.append("-ffast-math")
        extra = list(options.extra)
        for i, opt in enumerate(extra):  # -I / -D among NVRTC's options mean the same to g++
            if opt.startswith(("-I", "-D", "--include-path=", "--define-macro=")):
                flags.append(opt.replace("--include-path=", "-I").replace("--define-macro=", "-D"))
        return flags

    # -- launch ------------------------------------------------------------------------------
    def launch(self, function, grid, block, args, shared_mem: int = 0, stream=None) -> None:
        if not isinstance(function, SimFunction):
            raise TypeError(f"not a simulator kernel: {function!r}")
        grid = _dims(grid, "grid")
        block = _dims(block, "block")
        self._check_config(grid, block, shared_mem)
        module = function.module
        worker = self._worker_for(module.checked)
        sizes, blobs = [], []
        for i, a in enumerate(args):
            data = self._arg_bytes(a, i)
            sizes.append(len(data))
            blobs.append(data)
        timeout_ms = max(1, int(self.timeout_s * 1000))
        payload = [b"", _str(function.symbol),
                   struct.pack("<3I3IQII", *grid, *block, int(shared_mem), timeout_ms, len(args)),
                   struct.pack(f"<{len(sizes)}I", *sizes), *blobs]
        if module.checked:
            arena = self.arena
            live = arena.live_blocks()
            payload.append(struct.pack("<QQI", arena.base + RESERVED, arena.base + arena.high_water,
                                       len(live)))
            payload.append(b"".join(struct.pack("<QQ", a, n) for a, n in live))
        try:
            handle = self._ensure_loaded(module, worker)
            payload[0] = struct.pack("<I", handle)
            reply = worker.request(OP_LAUNCH, b"".join(payload), timeout=self.timeout_s)
        except WorkerDied as died:
            self._print_device_output()
            self.arena.clear_fault()
            raise self._fault(function, died) from None
        except WorkerError as exc:
            raise KernelArgumentError(str(exc)) from None
        elapsed = struct.unpack("<Q", reply)[0]
        self.last_launch_ns = elapsed
        self._kernel_ns += elapsed
        self._print_device_output()

    def _arg_bytes(self, a, index: int) -> bytes:
        if isinstance(a, np.ndarray):
            if a.ndim == 0 and not self.is_device_array(a):
                return a.tobytes()
            if not self.is_device_array(a):
                raise KernelArgumentError(
                    f"argument {index + 1} is a host NumPy array; kernels need device arrays: "
                    "copy it with wb.to_device(x) or create it with wb.xp")
            return struct.pack("<Q", a.__array_interface__["data"][0])
        if isinstance(a, np.generic):
            return a.tobytes()
        if isinstance(a, (bytes, bytearray)):
            return bytes(a)
        if hasattr(a, "tobytes"):
            return a.tobytes()
        raise KernelArgumentError(
            f"argument {index + 1} ({type(a).__name__}) is neither a device array nor a NumPy "
            "scalar of the kernel parameter's type")

    def _check_config(self, grid, block, shared_mem) -> None:
        p = self._properties
        threads = block[0] * block[1] * block[2]
        if min(grid) < 1 or min(block) < 1:
            raise LaunchConfigError(f"grid {grid} and block {block} need every dimension >= 1")
        if threads > p.max_threads_per_block:
            raise LaunchConfigError(f"block {block} has {threads} threads; at most "
                                    f"{p.max_threads_per_block} are allowed")
        for d, (b, m) in enumerate(zip(block, p.max_block_dims)):
            if b > m:
                raise LaunchConfigError(f"block dimension {'xyz'[d]} is {b}; at most {m}")
        for d, (g, m) in enumerate(zip(grid, p.max_grid_dims)):
            if g > m:
                raise LaunchConfigError(f"grid dimension {'xyz'[d]} is {g}; at most {m}")
        if shared_mem < 0 or shared_mem > p.shared_memory_per_block_optin:
            raise LaunchConfigError(f"{shared_mem} bytes of dynamic shared memory requested; at "
                                    f"most {p.shared_memory_per_block_optin} per block")

    def _print_device_output(self) -> None:
        if self._arena is None:
            return
        text, dropped = self._arena.take_printf()
        if text:
            sys.stdout.write(text.decode("utf-8", "replace"))
        if dropped:
            sys.stdout.write(f"\n[simulator: {dropped} bytes of printf output did not fit in the "
                             "1 MiB buffer and were dropped]\n")
        if text or dropped:
            sys.stdout.flush()

    def _fault(self, function: SimFunction, died: WorkerDied) -> KernelFault:
        rec = died.record
        kernel = function.name
        if rec is None:
            if died.timed_out:
                return KernelFault(f"kernel {kernel!r} did not finish within {self.timeout_s:g} s "
                                   "and was stopped; the simulator restarted (device arrays are intact)",
                                   kernel=kernel, signal="timeout")
            rc = died.returncode
            what = f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"exit status {rc}"
            return KernelFault(f"the simulator's worker ended with {what} while kernel {kernel!r} ran; "
                               "it restarted (device arrays are intact)", kernel=kernel,
                               signal=what, details=died.log)
        kind = rec["kind"]
        sig = _FAULT_SIGNALS.get(kind, "error")
        line = rec["line"]
        what = rec["message"]
        if kind == 1:
            try:
                sig = signal.Signals(rec["signo"]).name
            except ValueError:
                sig = f"signal {rec['signo']}"
            base = _SIGNAL_TEXT.get(sig, sig)
            if what.startswith("stack overflow"):
                what = f"{sig}: {what}"
            else:
                addr = f" at address {rec['address']:#x}" if sig in ("SIGSEGV", "SIGBUS") else ""
                what = f"{sig}: {base}{addr}"
        elif kind == 5:
            what = (f"time limit of {self.timeout_s:g} s exceeded (an endless loop, or threads "
                    "spinning on a flag that another block or thread sets?)")
        elif kind == 6:
            what, line = _asan_summary(died.log)
        block = rec["block"]
        thread = rec["thread"]
        where = ""
        if block is not None:
            where += f" in block {block}"
        if thread is not None:
            where += f", thread {thread}"
        if line is not None and kind != 3:
            where += f" at line {line}"
        hint = ""
        if kind == 1 and sig in ("SIGSEGV", "SIGBUS") and not function.module.checked:
            hint = (" Run it checked (wb.backend('simulator', checked=True) or %%cuda --check) to "
                    "find the line.")
        message = (f"kernel {kernel!r} faulted: {what}{where}. The simulator restarted; device "
                   f"arrays are intact.{hint}")
        return KernelFault(message, kernel=kernel, signal=sig, block=block, thread=thread,
                           line=line, details=died.log)

    def _worker_fault(self, died: WorkerDied, doing: str) -> KernelFault:
        """A KernelFault for a worker that ended outside a kernel (while loading
        a library or accessing a global variable)."""
        rec = died.record
        self._print_device_output()
        self.arena.clear_fault()
        if rec is not None:
            what = rec["message"] or _FAULT_SIGNALS.get(rec["kind"], "error")
            if rec["kind"] == 1:
                try:
                    what = f"{signal.Signals(rec['signo']).name}: {what}"
                except ValueError:
                    pass
        elif died.timed_out:
            what = "no reply within the time limit"
        else:
            rc = died.returncode
            what = (f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0
                    else f"exit status {rc}")
        return KernelFault(f"the simulator's worker ended while {doing} ({what}); it restarts on "
                           "the next launch (device arrays are intact)",
                           signal=what, details=died.log)

    # -- workers -----------------------------------------------------------------------------
    def _worker_for(self, checked: bool) -> Worker:
        worker = self._workers.get(checked)
        if worker is None:
            env = {}
            if checked:
                env["ASAN_OPTIONS"] = ("detect_leaks=0:allow_user_segv_handler=1:"
                                       "halt_on_error=1:symbolize=1:print_summary=1")
                env["WBSIM_STACK_KIB"] = "512"
            worker = Worker(self.arena, lambda: build.worker_executable(checked),
                            threads=self.threads, env=env)
            self._workers[checked] = worker
        return worker

    def _ensure_loaded(self, module: SimModule, worker: Worker) -> int:
        fresh = module.path not in worker.libraries
        handle = worker.load(module.path)
        if fresh:
            for name, data in module._globals.items():
                module._write_global(worker, handle, name, data)
        return handle

    def close(self) -> None:
        """Stop the worker processes (device arrays stay readable)."""
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()

    # -- streams and events ------------------------------------------------------------------
    def current_stream(self) -> Any:
        return self._stream

    def create_stream(self, priority: int | None = None, non_blocking: bool = False) -> SimStream:
        return SimStream(priority or 0)

    @contextlib.contextmanager
    def use_stream(self, stream):
        previous, self._stream = self._stream, stream
        try:
            yield stream
        finally:
            self._stream = previous

    def stream_synchronize(self, stream) -> None:
        pass  # launches are synchronous

    def create_event(self) -> SimEvent:
        return SimEvent()

    def stream_wait_event(self, stream, event) -> None:
        pass  # the event's work has finished when it was recorded

    def event_synchronize(self, event) -> None:
        pass

    def record_event(self, event, stream=None) -> None:
        event.wall = time.perf_counter()
        event.kernel_ns = self._kernel_ns
        event.recorded = True

    def event_done(self, event) -> bool:
        return bool(event.recorded)

    def elapsed_ms(self, start, end) -> float:
        """Kernel run time between the events (measured in the worker, without
        the round trip to it); wall-clock time when no kernel ran between them."""
        if not (start.recorded and end.recorded):
            raise ValueError("both events must be recorded before elapsed_ms")
        if end.kernel_ns != start.kernel_ns:
            return (end.kernel_ns - start.kernel_ns) / 1e6
        return (end.wall - start.wall) * 1e3

    def synchronize(self) -> None:
        pass

    # -- memory accounting ------------------------------------------------------------------
    def add_allocation_listener(self, on_alloc, on_free):
        return self.arena.add_listener(on_alloc, on_free)

    def pool_stats(self) -> dict[str, int]:
        return self.arena.stats()

    def pool_reserved_bytes(self) -> int:
        """In use plus cached bytes of the arena (cheap: for the memory timeline)."""
        return self.arena.reserved_bytes()

    def set_pool_limit(self, nbytes: int | None) -> None:
        """Cap the bytes in use below the virtual device's size (None: no cap)."""
        self.arena.limit = None if nbytes is None else int(nbytes)

    def empty_cache(self) -> None:
        """Release the arena's free blocks to the host (as CuPy's free_all_blocks)."""
        self.arena.empty_cache()

    def device_pointer(self, array) -> int:
        return int(array.__array_interface__["data"][0])

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        return 256

    def __repr__(self) -> str:
        reason = getattr(self, "reason", "")
        return f"<SimulatorBackend {self.describe()}{f' ({reason})' if reason else ''}>"


def _dims(value, what: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3:
        raise LaunchConfigError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    return dims + (1,) * (3 - len(dims))


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _nvrtc():
    """The NVRTC checker module, or None when it is not there."""
    try:
        from .. import nvrtc
    except ImportError:
        return None
    return nvrtc


def _explain_load_error(message: str) -> str:
    m = re.search(r"undefined symbol: (\S+)", message)
    if not m:
        return f"{source_mod.SOURCE_NAME}:1:1: error: the compiled cell cannot be loaded: {message}"
    name = m.group(1)
    try:
        import subprocess
        name = subprocess.run(["c++filt", name], capture_output=True, text=True,
                              timeout=10).stdout.strip() or name
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"{source_mod.SOURCE_NAME}:1:1: error: '{name}' is declared but never defined, or is "
            "a CUDA function the simulator does not provide")


_ASAN_KIND = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ASAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)", re.M)
_ASAN_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (.+?) (?:\S*/)?" + re.escape(source_mod.SOURCE_NAME)
                         + r":(\d+)")


def _asan_summary(log: str) -> tuple[str, int | None]:
    """``(what happened, cell line)`` from an AddressSanitizer report."""
    kind = _ASAN_KIND.search(log)
    access = _ASAN_ACCESS.search(log)
    frame = _ASAN_FRAME.search(log)
    what = kind.group(1) if kind else "memory error"
    if what in ("use-after-poison", "unknown-crash"):
        what = "out-of-bounds access to device memory"
    elif what.endswith("overflow"):
        what = what.replace("-", " ").replace("buffer overflow", "out-of-bounds access")
    if access:
        what = f"{what} ({access.group(1).lower()} of {access.group(2)} bytes at {access.group(3)})"
    return what, int(frame.group(2)) if frame else None
