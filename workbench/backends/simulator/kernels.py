"""Compile and launch on the simulator (:class:`SimulatorKernels`): a cell
checked by NVRTC where it is installed, rewritten for g++ and built
(:mod:`.source`, :mod:`.build`), loaded by the worker; launches packed into
one request to the worker (:mod:`.launch`), which runs them to the end."""
from __future__ import annotations

import re
import struct
import subprocess
import time
from typing import Sequence

from ... import cxx, subprocesses
from ...errors import Interrupted, KernelArgumentError, LaunchConfigError
from ..contract import CompileFailed, CompileOptions, KernelResources, Kernels, normalise_arch
from ..nvrtc import check_with_nvrtc, nvrtc_available
from . import build
from .faults import kernel_fault
from .launch import (ArgumentLayout, address, argument_bytes, arguments_part, check_config, dims,
                     exact_numbers, number_params, request_prefix, request_tail)
from .module import SimFunction, SimModule
from .protocol import ARENA_RESERVED, Op
from .source import SOURCE_NAME, find_unsupported, generate, simulator_lacks
from .worker import WorkerDied, WorkerError, WorkerGone


_U64 = struct.Struct("<Q")


def _use_nvrtc() -> bool:
    """True when real NVRTC is installed: it checks every cell first (tests turn it off)."""
    return nvrtc_available()


#: Threads a cooperative launch may have on the simulator: all its blocks run at
#: once, each thread on a fiber stack of its own (two memory mappings each).
COOPERATIVE_THREADS = 16384


class SimulatorKernels(Kernels):
    """The compile-and-launch part of :class:`~.backend.SimulatorBackend`
    (its workers, lock and counters are the backend's)."""

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
                dims = configs[grid, block, shared_mem]
            except (KeyError, TypeError):
                dims = None
            if dims is None:  # (checked outside the except: a bad one's error chains to nothing)
                dims = config(grid, block, shared_mem)
            grid3, block3 = dims
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
             cooperative: bool, seed: int | None = None) -> None:
        """Send the launch to the worker, wait for its end and print its output
        (``seed``: run it in the order of that schedule, see ``native/grid.cpp``)."""
        observer = self.launch_observer
        if observer is not None and seed is None and observer(function, grid, block, shared_mem,
                                                              arguments, cooperative):
            return  # counted or sanitized (instrumented.py, sanitizing.py)
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
                        self._arena, checked, cooperative, seed=seed), timeout=self.timeout_s,
                        what=function.waited_on)
                    break
                except KeyboardInterrupt:
                    ran_s, worker.interrupted_after_s = worker.interrupted_after_s, None
                    if ran_s is None:
                        raise  # (outside a request: the worker runs on, nothing to say of it)
                    raise Interrupted(
                        f"{function.name}<<<{_dims(grid)}, {_dims(block)}>>> stopped after "
                        f"{ran_s:.1f} s: the simulator's worker running it "
                        f"was ended (a new one starts with the next launch); device arrays are "
                        f"intact, with what the kernel wrote before it stopped") from None
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

    def run_explored(self, function, grid, block, shared_mem: int, arguments: bytes,
                     seed: int) -> None:
        """One launch whose blocks and threads run in the order drawn from ``seed``."""
        self._run(function, grid, block, shared_mem, arguments, False, seed=seed)

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        return 256


def _dims(dims: tuple) -> str:
    """A launch's dimensions as CUDA code writes them: 256, (16, 16)."""
    while len(dims) > 1 and dims[-1] == 1:
        dims = dims[:-1]
    return str(dims[0]) if len(dims) == 1 else str(tuple(dims))


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
