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

The class is made of one part per concern of the Backend contract:
:mod:`.devices`, :mod:`.kernels` (compile and launch), :mod:`.memory`
(arrays, copies, the pool, memory kinds), :mod:`.streams` (streams, events,
graphs); its workers, activity counters and persistent launches are here.

Launches are synchronous: when :meth:`SimulatorBackend.launch` returns, the
kernel has finished and its ``printf`` output has been printed.

Thread safety: every exchange with a worker (load, launch, global variables)
holds the backend's lock, so launches from several Python threads are
serialised, one kernel at a time, as launches on one CUDA stream are; the
printf buffer and the fault record they share stay one launch's.
"""
from __future__ import annotations

import os
import sys
import threading

from ...errors import ArgumentValueError, KernelFault, LaunchConfigError
from ...present.units import format_bytes
from ..contract import Backend
from . import build, instrumented, persistent, sanitizing
from .arena import Arena
from .devices import SimulatorDevices, simulated_device
from .faults import worker_fault
from .kernels import COOPERATIVE_THREADS, SimulatorKernels
from .launch import check_config, dims
from .memory import SimulatorMemory
from .module import SimFunction
from .streams import CurrentStream, SimulatorStreams
from .worker import Worker, WorkerDied


class SimulatorBackend(SimulatorDevices, SimulatorKernels, SimulatorMemory, SimulatorStreams,
                       Backend):
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
        Size of the virtual device memory (default: the device's, at most
        the host's available memory, so that arrays the device takes are
        arrays the host can back).
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
            raise ArgumentValueError(
                f"devices (or WORKBENCH_SIM_DEVICES) must be a whole number from 1 "
                f"to 16, got {devices!r}") from None
        if not 1 <= self.devices <= 16:
            raise ArgumentValueError(
                f"devices (or WORKBENCH_SIM_DEVICES) must be from 1 to 16, got {devices!r}")
        self._device_local = threading.local()  # the current device, per thread as in CUDA
        self._array_devices: dict[int, int] = {}  # allocation address -> device (devices > 1)
        self.checked = bool(checked)
        self.timeout_s = float(timeout_s)
        self.threads = int(threads)
        self._properties = simulated_device(device, memory_bytes)
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
            wanted = simulated_device(device, memory_bytes)
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

    def activity(self) -> dict:
        """Launches so far, the seconds they ran (the worker's own clock) and
        the worker's thread count."""
        return {"launches": self._launches, "kernel_seconds": self._kernel_ns / 1e9,
                "threads": self.threads or len(os.sched_getaffinity(0))}

    def describe(self) -> str:
        p = self._properties
        cpus = self.threads or len(os.sched_getaffinity(0))
        capped = ": at most the host's available memory" if "memory_note" in p.extra else ""
        return (f"CPU simulator: simulated {p.name} ({p.multiprocessors} SMs, "
                f"cc {p.compute_capability[0]}.{p.compute_capability[1]}, "
                f"{format_bytes(p.total_memory)}{capped}) on {cpus} CPU thread"
                f"{'s' if cpus != 1 else ''}, g++ {build.compiler_version() or 'missing'}"
                f"{', checked' if self.checked else ''}")

    def missing_compiler(self) -> str | None:
        return build.missing_compiler_message()

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
                # a misaligned access (-fsanitize=alignment) aborts: a fault with its thread
                env["UBSAN_OPTIONS"] = "abort_on_error=1:halt_on_error=1:print_stacktrace=0"
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

    def worker_ended(self, died: WorkerDied, doing: str) -> KernelFault:
        """The KernelFault of a worker that ended outside a kernel (while
        ``doing``: loading a library, accessing a global variable)."""
        self._print_device_output()
        self.arena.clear_fault()
        return worker_fault(died, doing)

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

    # -- persistent kernels (persistent.py) ---------------------------------------------
    def alloc_mapped(self, nbytes: int):
        return persistent.alloc_mapped(self, nbytes)

    def launch_persistent(self, function, grid, block, args, shared_mem: int = 0,
                          cooperative: bool = False):
        if not isinstance(function, SimFunction):
            raise TypeError(f"not a simulator kernel: {function!r}")
        grid, block = dims(grid, "grid"), dims(block, "block")
        check_config(self._properties, grid, block, shared_mem)
        if cooperative:
            threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
            most = self.concurrent_blocks(True, block[0] * block[1] * block[2])
            if grid[0] * grid[1] * grid[2] > most:
                raise LaunchConfigError(
                    f"a cooperative launch of {threads} threads is more than the simulator runs "
                    f"at once ({COOPERATIVE_THREADS}: every thread needs a stack of its own); "
                    f"use at most {most} blocks of this size")
        return persistent.SimPersistentLaunch(self, function, grid, block, args, shared_mem,
                                              cooperative)

    def concurrent_blocks(self, cooperative: bool = False, threads: int = 1) -> int:
        # The worker hands a launch's blocks to its OS threads only when the
        # launch is large (native/grid.cpp: 8192 threads or more); a smaller one
        # runs its blocks one after another, so one block runs at a time. A
        # cooperative launch runs every block at once, each on an OS thread of its
        # own, up to COOPERATIVE_THREADS threads in all.
        if cooperative:
            return max(1, COOPERATIVE_THREADS // max(1, int(threads)))
        return 1

    # -- counted launches (instrumented.py) ---------------------------------------------
    #: While count_launches() is active: takes each launch first (True: it ran it).
    launch_observer = None

    def count_launches(self, kernel=None, skip: int = 0, count=None, max_blocks=None):
        return instrumented.count_launches(self, kernel, skip, count, max_blocks)

    # -- sanitized launches and schedules (sanitizing.py) -------------------------------
    def sanitize_launches(self, tool: str, kernel=None, skip: int = 0, count=None):
        return sanitizing.sanitize_launches(self, tool, kernel, skip, count)

    def explore_schedules(self, seed: int):
        return sanitizing.explore_schedules(self, seed)

    def __repr__(self) -> str:
        return f"<SimulatorBackend {self.describe()}{f' ({self.reason})' if self.reason else ''}>"
