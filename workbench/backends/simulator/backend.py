"""``SimulatorBackend``: CUDA C++ kernels compiled with g++ and run on the CPU.

What happens where:

* :mod:`.source` rewrites a cell into C++ (same line numbers) and refuses
  what the CPU cannot run; :mod:`.build` compiles it with g++ (cached) into a
  :class:`.module.SimModule`;
* :mod:`.worker` runs launches (packed by :mod:`.launch`) in a separate
  process over the shared :mod:`.arena` (device memory), speaking
  :mod:`.protocol`, so a crashing kernel never takes the notebook down;
  :mod:`.faults` turns its end into a :class:`workbench.errors.KernelFault`;
* :mod:`.xp` gives the NumPy-compatible array namespace ``wb.xp``;
  :mod:`.streams` the streams and events.

Launches are synchronous: when :meth:`SimulatorBackend.launch` returns, the
kernel has finished and its ``printf`` output has been printed.

Thread safety: every exchange with a worker (load, launch, global variables)
holds the backend's lock, so launches from several Python threads are
serialised, one kernel at a time, as launches on one CUDA stream are; the
printf buffer and the fault record they share stay one launch's.
"""
from __future__ import annotations

import dataclasses
import os
import re
import struct
import subprocess
import sys
import threading
import time
from typing import Sequence

import numpy as np

from ... import subprocesses
from ...errors import DeviceError, KernelArgumentError, KernelFault, LaunchConfigError, WorkbenchError
from ... import cxx
from ..base import (Backend, CompileFailed, CompileOptions, DeviceProperties, KernelResources,
                    normalise_arch)
from ..nvrtc import check_with_nvrtc, nvrtc_available, nvrtc_version
from . import build, instrumented, persistent
from .arena import Arena
from .devices import virtual_device
from .faults import kernel_fault, worker_fault
from .launch import (ArgumentLayout, address, argument_bytes, arguments_part, check_config, dims,
                     exact_numbers, number_params, request_prefix, request_tail)
from .module import SimFunction, SimModule
from .protocol import ARENA_RESERVED, Op
from .source import SOURCE_NAME, find_unsupported, generate, simulator_lacks
from .streams import DEFAULT_STREAM, CurrentStream, SimEvent, SimStream, elapsed_ms
from .worker import Worker, WorkerDied, WorkerError, WorkerGone
from .xp import ArrayNamespace, DeviceArray, empty_in, in_arena


_U64 = struct.Struct("<Q")


def _use_nvrtc() -> bool:
    """True when real NVRTC is installed: it checks every cell first (tests turn it off)."""
    return nvrtc_available()


#: Threads a cooperative launch may have on the simulator: all its blocks run at
#: once, each thread on a fiber stack of its own (two memory mappings each).
COOPERATIVE_THREADS = 16384


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
    devices:
        How many virtual devices to present (default: ``$WORKBENCH_SIM_DEVICES``,
        else 1), so that multi-GPU code runs here: they share one arena and one
        worker, every pair are peers, and a copy between them is a memcpy.
    """

    name = "simulator"
    simulated = True

    def __init__(self, checked: bool = False, timeout_s: float = 60.0, device=None,
                 memory_bytes: int | None = None, threads: int = 0, devices: int | None = None):
        if devices is None:
            devices = os.environ.get("WORKBENCH_SIM_DEVICES", "") or 1
        try:
            self.devices = int(devices)
        except ValueError:
            raise ValueError(f"devices (or WORKBENCH_SIM_DEVICES) must be a whole number from 1 "
                             f"to 16, got {devices!r}") from None
        if not 1 <= self.devices <= 16:
            raise ValueError(f"devices (or WORKBENCH_SIM_DEVICES) must be from 1 to 16, got {devices!r}")
        self._device_local = threading.local()  # the current device, per thread as in CUDA
        self._array_devices: dict[int, int] = {}  # allocation address -> device (devices > 1)
        self.checked = bool(checked)
        self.timeout_s = float(timeout_s)
        self.threads = int(threads)
        self._properties = virtual_device(device, memory_bytes)
        self._arena: Arena | None = None
        self._array_class = None
        self._printf_words = None  # the control page's first words (printf_len is [1])
        self._configs: dict = {}  # (grid, block, shared_mem) as given -> checked 3-tuples
        self._xp = None
        self._workers: dict[bool, Worker] = {}
        self._kernel_ns = 0
        self._launches = 0
        self._current = CurrentStream()
        self._capturing: set = set()  # streams capturing a graph (CUDA refuses to wait then)
        self.last_launch_ns = 0
        #: Held for every exchange with a worker (see the module docstring).
        self.lock = threading.RLock()

    def configure(self, checked=None, timeout_s=None, device=None, memory_bytes=None,
                  threads=None, devices=None) -> bool:
        """Change ``checked``, ``timeout_s`` and ``threads`` in place (device
        arrays, modules and kernels stay; modules built before keep their own
        build: re-run a cell to build it checked). ``device`` and
        ``memory_bytes`` change the device memory itself: only their current
        values are accepted here (False otherwise)."""
        if devices is not None and int(devices) != self.devices:
            return False
        if device is not None or memory_bytes is not None:
            wanted = virtual_device(device, memory_bytes)
            if (wanted.name, wanted.total_memory) != (self._properties.name,
                                                      self._properties.total_memory):
                return False
        with self.lock:
            if checked is not None:
                self.checked = bool(checked)
            if timeout_s is not None:
                self.timeout_s = float(timeout_s)
            if threads is not None and int(threads) != self.threads:
                self.threads = int(threads)
                self.close()  # the next launch starts workers with the new count
        return True

    def foreign_array(self, obj) -> str | None:
        if isinstance(obj, DeviceArray) and not self.is_device_array(obj):
            return ("a device array of another simulator backend (one made before the device "
                    "or its memory size was changed); copy it over: wb.to_device(np.array(x))")
        return None

    # -- arrays --------------------------------------------------------------------
    @property
    def arena(self) -> Arena:
        if self._arena is None:
            self._arena = Arena(self._properties.total_memory)
            self._printf_words = memoryview(self._arena.control[:64]).cast("Q")
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
        array = empty_in(self.array_class, shape, dtype)
        if self.devices > 1:
            self._tag_device(array)
        return array

    def _tag_device(self, array) -> None:
        device = self.current_device()
        if device:
            self._array_devices[self.device_pointer(array)] = device
        else:
            self._array_devices.pop(self.device_pointer(array), None)

    def array_device(self, array) -> int:
        return self._array_devices.get(self.device_pointer(array), 0) if self.devices > 1 else 0

    def to_device(self, host_array):
        if self.is_device_array(host_array):
            return host_array
        arr = np.asarray(host_array)
        if arr.dtype == object:
            raise TypeError("cannot copy an array of Python objects to the device; "
                            "give a numeric NumPy array")
        dest = self.allocate(arr.shape, arr.dtype)
        np.copyto(dest.view(np.ndarray), arr)
        return dest

    def to_host(self, device_array):
        return np.array(np.asarray(device_array).view(np.ndarray), copy=True)

    def is_device_array(self, obj) -> bool:
        arena = self._arena
        if arena is None or not isinstance(obj, np.ndarray):
            return False
        if obj.flags.c_contiguous and obj.size:  # (the common case, without byte_bounds)
            start = address(obj)
            return arena.base + ARENA_RESERVED <= start and start + obj.nbytes <= arena.base + arena.size
        return in_arena(arena, obj)

    # -- devices ---------------------------------------------------------------------
    def device_count(self) -> int:
        return self.devices

    def current_device(self) -> int:
        return getattr(self._device_local, "index", 0)

    def set_device(self, index: int) -> None:
        if not 0 <= int(index) < self.devices:
            raise ValueError(f"the simulator has {self.devices} device{'s' if self.devices != 1 else ''}"
                             f" (index 0 to {self.devices - 1}), not {index}; more: "
                             f"wb.backend('simulator', devices=N) or WORKBENCH_SIM_DEVICES=N")
        self._device_local.index = int(index)

    def device_properties(self, index: int | None = None) -> DeviceProperties:
        i = self.current_device() if index is None else index
        if not 0 <= int(i) < self.devices:
            raise ValueError(f"the simulator has {self.devices} device{'s' if self.devices != 1 else ''}"
                             f" (index 0 to {self.devices - 1}), not {index}")
        if i == 0:
            return self._properties
        return dataclasses.replace(self._properties, index=int(i))

    def can_access_peer(self, index: int, peer: int) -> bool | None:
        return index != peer and 0 <= index < self.devices and 0 <= peer < self.devices

    def enable_peer_access(self, index: int, peer: int) -> bool:
        return bool(self.can_access_peer(index, peer))

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` as cudaMemGetInfo gives them: what the pool has
        reserved (in use and cached) is not free, as on a GPU."""
        total = self._properties.total_memory
        reserved = self._arena.reserved_bytes() if self._arena is not None else 0
        return max(0, total - reserved), total

    def versions(self) -> dict[str, str]:
        out = {"simulator": build.SIMULATOR_VERSION, "g++": build.compiler_version() or "missing"}
        if _use_nvrtc():
            version = nvrtc_version()
            if version:
                out["nvrtc"] = str(version)
        return out

    def activity(self) -> dict:
        """Launches so far, the seconds they ran (the worker's own clock) and
        the worker's thread count."""
        return {"launches": self._launches, "kernel_seconds": self._kernel_ns / 1e9,
                "threads": self.threads or len(os.sched_getaffinity(0))}

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
        log, compiler, checked_by_nvrtc = "", "g++", None
        if _use_nvrtc():
            checked_by_nvrtc = check_with_nvrtc(source, options, kernel_names)  # raises CompileFailed
            resources, log, compiler = (dict(checked_by_nvrtc.resources), checked_by_nvrtc.log,
                                        "NVRTC")
        flags = self._gxx_flags(options)
        arch_flags = [f for f in flags if f.startswith("-D__CUDA_ARCH__=")]
        # only the branches g++ will compile (the prelude defines __CUDACC__ and __WBSIM__)
        seen = [f[2:] for f in flags if f.startswith("-D")] + ["__CUDACC__", "__WBSIM__"]
        problems = find_unsupported(source, seen)
        if problems:
            raise CompileFailed("\n".join(p.log_line() for p in problems), compiler="simulator")
        kernels = list(dict.fromkeys([*kernel_names, *options.name_expressions]))
        checked = bool(options.checked or self.checked)
        variables = cxx.find_globals(source, seen)
        defines = [f[2:] for f in flags if f.startswith("-D") and f not in arch_flags]
        flags = [f for f in flags if not f.startswith("-D") or f in arch_flags]
        try:
            built = build.build_library(
                generate(source, kernels, [v.qualified_name for v in variables], defines),
                flags, checked, warnings=compiler != "NVRTC")
        except CompileFailed as exc:
            built = None
            if variables:  # a declaration the variable finder misread: build without accessors
                variables = ()
                try:
                    built = build.build_library(generate(source, kernels, (), defines), flags,
                                                checked, warnings=compiler != "NVRTC")
                except CompileFailed:
                    pass
            if built is None:
                raise CompileFailed(simulator_lacks(exc.log, nvrtc_accepted=compiler == "NVRTC"),
                                    compiler="simulator" if compiler == "NVRTC" else exc.compiler,
                                    line_shift=exc.line_shift) from None
        module = SimModule(str(built.path), kernels, checked, resources, self, checked_by_nvrtc,
                           variables)
        module.cache_hit = built.cache_hit
        module.log = log or built.log
        module.compiler = compiler
        try:  # undefined functions show up when the library is loaded
            with self.lock:
                module.load_into(self.worker_for(checked))
        except WorkerError as exc:
            raise CompileFailed(_explain_load_error(str(exc)), compiler="g++") from None
        except WorkerDied as died:  # e.g. a global's constructor crashed
            raise self.worker_ended(died, "loading the compiled cell") from None
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
        for opt in options.extra:  # -I / -D among NVRTC's options mean the same to g++
            if opt.startswith(("-I", "-D", "--include-path=", "--define-macro=")):
                flags.append(opt.replace("--include-path=", "-I").replace("--define-macro=", "-D"))
        return flags

    # -- launch ------------------------------------------------------------------------------
    def _config(self, grid, block, shared_mem) -> tuple[tuple, tuple]:
        """``(grid, block)`` as checked 3-tuples, remembered per configuration."""
        try:
            return self._configs[grid, block, shared_mem]
        except (KeyError, TypeError):  # new, or unhashable (lists)
            pass
        grid3, block3 = dims(grid, "grid"), dims(block, "block")
        check_config(self._properties, grid3, block3, shared_mem)
        try:
            if len(self._configs) > 256:
                self._configs.clear()
            self._configs[grid, block, shared_mem] = (grid3, block3)
        except TypeError:
            pass
        return grid3, block3

    def launch(self, function, grid, block, args, shared_mem: int = 0, stream=None,
               cooperative: bool = False) -> None:
        if not isinstance(function, SimFunction):
            raise TypeError(f"not a simulator kernel: {function!r}")
        grid, block = self._config(grid, block, shared_mem)
        if stream is not None:
            if stream.device not in (None, self.current_device()):  # as cuLaunchKernel refuses it
                raise LaunchConfigError(
                    f"a kernel launched on a stream of device {stream.device} while device "
                    f"{self.current_device()} is current; make the stream's device current "
                    "(with wb.stream(s): ...)")
            if stream.capture is not None:  # recorded for a graph, not run
                stream.capture.append((self.launch, (function, grid, block, tuple(args),
                                                     shared_mem, None, cooperative)))
                return
        if cooperative:
            threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
            if threads > COOPERATIVE_THREADS:
                per_block = block[0] * block[1] * block[2]
                raise LaunchConfigError(
                    f"a cooperative launch of {threads} threads is more than the simulator runs "
                    f"at once ({COOPERATIVE_THREADS}: every thread of every block needs its own "
                    f"stack); use at most grid={max(1, COOPERATIVE_THREADS // per_block)} blocks "
                    f"of {per_block} threads here (a GPU takes the grid its occupancy allows)")
        is_device_array = self.is_device_array
        arguments = arguments_part([argument_bytes(a, i, is_device_array)
                                    for i, a in enumerate(args)])
        self._run(function, grid, block, shared_mem, arguments, cooperative)

    def make_launcher(self, function, params, cooperative: bool = False):
        """A launcher for ``function`` that packs its arguments with one
        precomputed struct (:class:`.launch.ArgumentLayout`); kernels with
        structs by value, checked modules, cooperative launches and streams
        that are capturing or of another device take :meth:`launch`."""
        launch = self.launch
        layout = ArgumentLayout.for_params(params) if isinstance(function, SimFunction) else None
        if layout is None or cooperative or function.module.checked:
            scalars = number_params(params)

            def launcher(grid, block, args, shared_mem, stream):
                # (a Kernel checks once for all its launchers: Python numbers may come)
                launch(function, grid, block, exact_numbers(args, scalars), shared_mem, stream,
                       cooperative=cooperative)
            return launcher
        configs, config, run = self._configs, self._config, self._run
        pack, pointers, count, exact = layout.pack, layout.pointers, layout.count, layout.exact

        def launcher(grid, block, args, shared_mem, stream):
            if stream is not None and (stream.capture is not None or stream.device is not None
                                       and stream.device != self.current_device()):
                return launch(function, grid, block, exact(args), shared_mem, stream)
            try:
                grid3, block3 = configs[grid, block, shared_mem]
            except (KeyError, TypeError):
                grid3, block3 = config(grid, block, shared_mem)
            if pointers:
                arena = self._arena
                lo, hi = arena.base + ARENA_RESERVED, arena.base + arena.size
                values = list(args)
                for i in pointers:
                    v = values[i]
                    if v is not None:
                        v = address(v) if type(v) is self._array_class else -1
                        if not lo <= v < hi:  # not a device array: launch() says why
                            return launch(function, grid, block, exact(args), shared_mem, stream)
                    values[i] = v or 0
            else:
                values = args
            if len(values) != count:
                return launch(function, grid, block, exact(args), shared_mem, stream)
            try:
                arguments = pack(values)
            except (struct.error, TypeError, ValueError, OverflowError):
                return launch(function, grid, block, exact(args), shared_mem, stream)
            run(function, grid3, block3, shared_mem, arguments, False)
        # The struct packs a range-checked Python int or float exactly as its C
        # type (what launch() needs gets them as NumPy scalars: exact()).
        launcher.packs_python_numbers = True
        return launcher

    def launch_path(self) -> str:
        return "one request to the worker process, packed by a struct made per kernel (Python)"

    def _run(self, function, grid, block, shared_mem: int, arguments: bytes,
             cooperative: bool) -> None:
        """Send the launch to the worker, wait for its end and print its output."""
        observer = self.launch_observer
        if observer is not None and observer(function, grid, block, shared_mem, arguments,
                                             cooperative):
            return  # counted (instrumented.py)
        module = function.module
        checked = module.checked
        with self.lock:
            worker = self._workers.get(checked) or self._worker_for(checked)
            for attempt in (1, 2):
                try:
                    handle = worker.libraries.get(module.path)
                    if handle is None:
                        handle = module.load_into(worker)
                    key = (handle, grid, block, shared_mem, self.timeout_s)
                    prefix = function.requests.get(key)
                    if prefix is None:
                        if len(function.requests) > 64:
                            function.requests.clear()
                        prefix = function.requests[key] = request_prefix(
                            handle, function.symbol, grid, block, shared_mem, self.timeout_s)
                    reply = worker.request(Op.LAUNCH, prefix + arguments + request_tail(
                        self._arena, checked, cooperative), timeout=self.timeout_s)
                    break
                except WorkerDied as died:
                    if isinstance(died, WorkerGone) and attempt == 1:
                        continue  # it had ended before this launch: a new one takes it
                    self._print_device_output()
                    self.arena.clear_fault()
                    raise kernel_fault(function.name, checked, died, self.timeout_s,
                                       self.arena) from None
                except WorkerError as exc:
                    raise KernelArgumentError(str(exc)) from None
            elapsed = _U64.unpack(reply)[0]
            self.last_launch_ns = elapsed
            self._kernel_ns += elapsed
            self._launches += 1
            if self._printf_words[1]:  # printf_len: something was printed
                self._print_device_output()

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

    def worker_ended(self, died: WorkerDied, doing: str) -> KernelFault:
        """The KernelFault of a worker that ended outside a kernel (while
        ``doing``: loading a library, accessing a global variable)."""
        self._print_device_output()
        self.arena.clear_fault()
        return worker_fault(died, doing)

    # -- workers -----------------------------------------------------------------------------
    def worker_for(self, checked: bool) -> Worker:
        """The worker process for plain (or checked) modules, started on first use."""
        with self.lock:
            return self._worker_for(checked)

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

    def close(self) -> None:
        """Stop the worker processes (device arrays stay readable)."""
        with self.lock:
            for worker in self._workers.values():
                worker.stop()
            self._workers.clear()

    # -- streams and events ------------------------------------------------------------------
    def current_stream(self) -> SimStream:
        stream = self._current.stream
        return DEFAULT_STREAM if stream is None else stream

    def stream_device(self, stream) -> int:
        device = (stream if stream is not None else self.current_stream()).device
        return self.current_device() if device is None else device  # the null stream: current

    def is_default_stream(self, stream) -> bool:
        return stream is DEFAULT_STREAM

    def create_stream(self, priority: int | None = None, non_blocking: bool = False) -> SimStream:
        return SimStream(priority or 0, non_blocking, self.current_device())

    def use_stream(self, stream):
        return self._current.use(stream if stream is not None else self.current_stream())

    def stream_synchronize(self, stream) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            _refuse_in_capture("waiting for a capturing stream (cudaStreamSynchronize)", stream)
        # launches are synchronous: nothing to wait for

    def stream_done(self, stream) -> bool:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            _refuse_in_capture("asking whether a capturing stream is done (cudaStreamQuery)", stream)
        return True

    def create_event(self) -> SimEvent:
        return SimEvent(self.current_device())

    def destroy_event(self, event) -> None:
        event.recorded = False

    def record_event(self, event, stream=None) -> None:
        if stream is None:
            stream = self.current_stream()
        device = stream.device  # (stream_device, inline: the timing log records two per launch)
        if device is None:
            device = self.current_device()
        if device != event.device:  # cudaErrorInvalidResourceHandle on a GPU
            raise DeviceError(f"an event of device {event.device} recorded on a stream of "
                              f"device {device}: CUDA records an event on a stream of "
                              "its own device only")
        event.record(self._kernel_ns)
        event.captured = stream.capture is not None

    def stream_wait_event(self, stream, event) -> None:
        pass  # the event's work had finished when it was recorded

    def event_synchronize(self, event) -> None:
        if event.captured:
            _refuse_in_capture("waiting for an event recorded in a capture")

    def event_done(self, event) -> bool:
        if event.captured:
            _refuse_in_capture("asking whether an event recorded in a capture is done")
        return bool(event.recorded)

    def elapsed_ms(self, start, end) -> float:
        """Kernel run time between the events (measured in the worker, without
        the round trip to it); wall-clock time when no kernel ran between them."""
        return elapsed_ms(start, end)

    def timeline_offset_ms(self, anchor, event) -> float:
        """Wall-clock time between the events: launches run one after another
        on the CPU, so work placed by it never overlaps."""
        return (event.wall - anchor.wall) * 1e3

    def synchronize(self) -> None:
        if self._capturing:
            _refuse_in_capture("waiting for the device (cudaDeviceSynchronize)", *self._capturing)

    # -- copies, memory kinds, graphs ----------------------------------------------------------
    def copy(self, dst, src, stream=None) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.copy, (dst, src, None)))
            return
        with self.lock:  # not while a kernel of another thread runs over the same memory
            np.copyto(np.asarray(dst).view(np.ndarray).reshape(-1).view(np.uint8),
                      np.asarray(src).view(np.ndarray).reshape(-1).view(np.uint8))

    def memset(self, array, value: int, stream=None) -> None:
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.memset, (array, value, None)))
            return
        with self.lock:
            np.asarray(array).view(np.ndarray).reshape(-1).view(np.uint8)[...] = int(value) & 0xFF

    def alloc_pinned(self, shape, dtype):
        """Host memory is all alike on the simulator: a NumPy array."""
        return np.empty(shape, dtype=dtype)

    def alloc_managed(self, shape, dtype):
        """Device memory that the host reads and writes: the arena is both."""
        return self.allocate(shape, dtype)

    managed_in_pool = True

    def managed_prefetch_supported(self, index: int | None = None) -> bool:
        return True

    def prefetch(self, array, device: int, stream=None) -> None:
        if not -1 <= int(device) < self.devices:
            raise DeviceError(f"prefetch to device {device}: the simulator has {self.devices} "
                              f"device{'s' if self.devices != 1 else ''} (and -1, the host)")

    def advise(self, array, advice: str, device: int) -> None:
        if advice.replace("unset_", "") not in ("read_mostly", "preferred_location", "accessed_by"):
            raise DeviceError(f"unknown advice {advice!r}; one of read_mostly, preferred_location, "
                              "accessed_by (and unset_...)")

    def begin_capture(self, stream) -> None:
        if stream.capture is not None:
            raise WorkbenchError("this stream is capturing already: end that capture (leave "
                                 "its wb.graph() block) before starting another on it")
        stream.capture = []
        self._capturing.add(stream)

    def end_capture(self, stream):
        ops, stream.capture = stream.capture, None
        invalidated, stream.invalidated = stream.invalidated, None
        self._capturing.discard(stream)
        if ops is None:
            raise WorkbenchError("end_capture on a stream that is not capturing")
        if invalidated:  # cudaErrorStreamCaptureInvalidated
            raise WorkbenchError(f"the capture was invalidated by {invalidated}")
        return tuple(ops)

    def graph_launch(self, graph, stream=None) -> None:
        """Run the captured operations in order (on the simulator, as the
        GPU does, a graph launched while a stream captures is captured)."""
        stream = stream if stream is not None else self.current_stream()
        if stream.capture is not None:
            stream.capture.append((self.graph_launch, (graph, None)))
            return
        for op, args in graph:
            op(*args)

    # -- memory accounting ------------------------------------------------------------------
    def add_allocation_listener(self, on_alloc, on_free):
        return self.arena.add_listener(on_alloc, on_free)

    def pool_stats(self) -> dict[str, int]:
        return self.arena.stats()

    def pool_reserved_bytes(self) -> int:
        """In use plus cached bytes of the arena (cheap: for the memory timeline)."""
        return self.arena.reserved_bytes()

    def set_pool_limit(self, nbytes: int | None) -> None:
        """Cap the bytes in use below the virtual device's size (None or 0: no cap)."""
        self.arena.limit = int(nbytes) if nbytes else None

    def empty_cache(self) -> None:
        """Release the arena's free blocks to the host (as CuPy's free_all_blocks)."""
        self.arena.empty_cache()

    def device_pointer(self, array) -> int:
        return int(array.__array_interface__["data"][0])

    # -- persistent kernels (persistent.py) ---------------------------------------------
    def alloc_mapped(self, nbytes: int):
        return persistent.alloc_mapped(self, nbytes)

    def launch_persistent(self, function, grid, block, args, shared_mem: int = 0):
        if not isinstance(function, SimFunction):
            raise TypeError(f"not a simulator kernel: {function!r}")
        grid, block = dims(grid, "grid"), dims(block, "block")
        check_config(self._properties, grid, block, shared_mem)
        return persistent.SimPersistentLaunch(self, function, grid, block, args, shared_mem)

    def concurrent_blocks(self) -> int:
        # The worker hands a launch's blocks to its OS threads only when the
        # launch is large (native/grid.cpp: 8192 threads or more); a smaller one
        # runs its blocks one after another, so one block runs at a time.
        return 1

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        return 256

    # -- counted launches (instrumented.py) ---------------------------------------------
    #: While count_launches() is active: takes each launch first (True: it ran it).
    launch_observer = None

    def count_launches(self, kernel=None, skip: int = 0, count=None, max_blocks=None):
        return instrumented.count_launches(self, kernel, skip, count, max_blocks)

    def __repr__(self) -> str:
        return f"<SimulatorBackend {self.describe()}{f' ({self.reason})' if self.reason else ''}>"


def _explain_load_error(message: str) -> str:
    """A compile error for a library the worker cannot load (an undefined symbol)."""
    m = re.search(r"undefined symbol: (\S+)", message)
    if not m:
        return f"{SOURCE_NAME}:1:1: error: the compiled cell cannot be loaded: {message}"
    name = m.group(1)
    try:
        name = subprocesses.run(["c++filt", name], text=True,
                              timeout=10).stdout.strip() or name
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"{SOURCE_NAME}:1:1: error: '{name}' is declared but never defined, or is "
            "a CUDA function the simulator does not provide")


def _refuse_in_capture(what: str, *streams):
    """CUDA's answer to a call that would wait for work being captured: the
    call fails and the capture of ``streams`` is invalidated (its end fails)."""
    for stream in streams:
        if stream.capture is not None and stream.invalidated is None:
            stream.invalidated = what
    raise WorkbenchError(f"{what} inside a graph capture: CUDA refuses it and the capture is "
                         "lost. Inside wb.graph() leave out wb.synchronize(), "
                         "Stream.synchronize(), .done, wb.timings() and launch(sync=True)")
