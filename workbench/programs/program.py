"""``wb.program``: build and run a complete CUDA C++ program (with ``main()``).

On a GPU it is built with nvcc for the active device's own architecture
(unless the options choose one), after checking that the driver can run
what this toolkit builds; on the simulator (no GPU, or ``backend=
"simulator"``) it is built with g++ against the simulator's CUDA runtime.
Either way it runs as a subprocess with its output streamed, and the build
is cached.

Files: :func:`add_file` (``%%cuda_program --name kernels.cuh``) stores a
header or source file for later builds; every stored file is in the build's
folder (so ``#include "kernels.cuh"`` finds it), and stored sources named in
``files=`` are compiled and linked in.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

from ..backends import gpu_unavailable_reason
from ..backends.contract import CompileFailed
from ..backends.simulator import build as sim_build
from ..backends.simulator import programs as sim_programs
from ..backends.simulator.devices import virtual_device
from ..diagnostics import Diagnostic, parse_log
from ..errors import BackendUnavailable, CompileError, ProgramError
from ..runtime.session import backend as active_backend
from . import runner, toolkit
from .options import ProgramOptionError, ProgramOptions, parse_options, with_defines
from .result import ProgramBuild, ProgramRun

#: Seconds a program may run unless told otherwise (``timeout=None``: no limit).
DEFAULT_TIMEOUT_S = 600.0
_FILES: dict[str, str] = {}


# -- stored files -------------------------------------------------------------------------
def add_file(name: str, text: str) -> None:
    """Store ``text`` as file ``name`` (``kernels.cuh``, ``util.cu``,
    ``include/vec.h``) for the programs built after this."""
    clean = os.path.normpath(name)
    if os.path.isabs(name) or clean.startswith("..") or not clean or clean == ".":
        raise ProgramOptionError(f"{name!r} is not a file name inside the build folder; give a relative "
                         "name such as 'kernels.cuh' or 'include/vec.h'")
    _FILES[clean] = text


def files() -> dict[str, str]:
    """The stored files (name -> text), a copy."""
    return dict(_FILES)


def remove_file(name: str | None = None) -> None:
    """Forget stored file ``name``, or every one."""
    if name is None:
        _FILES.clear()
    else:
        _FILES.pop(os.path.normpath(name), None)


# -- building -----------------------------------------------------------------------------
def _target(backend: str) -> str:
    b = backend.lower()
    if b in ("gpu", "cupy", "nvcc"):
        return "gpu"
    if b in ("simulator", "sim", "cpu"):
        return "simulator"
    if b == "auto":
        return "simulator" if active_backend().simulated else "gpu"
    raise ProgramOptionError(f"backend={backend!r}: choose 'auto', 'gpu' or 'simulator'")


def _sources(source: str | None, name: str, extra: Sequence[str] | Mapping[str, str] | None):
    """``(every file of the build, the sources to compile)``."""
    all_files = dict(_FILES)
    compiled: list[str] = []
    if isinstance(extra, Mapping):
        for n, text in extra.items():
            all_files[os.path.normpath(n)] = text
        extra = list(extra)
    for n in extra or ():
        n = os.path.normpath(n)
        if n not in all_files:
            stored = ", ".join(sorted(_FILES)) or "none"
            raise ProgramOptionError(f"no stored file {n!r} (stored: {stored}); store one with "
                             "%%cuda_program --name FILE or wb.programs.add_file(name, text)")
        if sim_programs.is_source(n):
            compiled.append(n)
    if source is not None:
        all_files[name] = source
        compiled.insert(0, name)
    if not compiled:
        raise ProgramOptionError("nothing to compile: give the program's source, or name stored source "
                         "files with files=[...]")
    return all_files, compiled


def _compile_error(log: str, source: str | None, name: str, line_offset: int, compiler: str) -> CompileError:
    diagnostics = parse_log(log, source or "", line_offset=line_offset, main_file=name)
    return CompileError(diagnostics, source=source or "", log=log, line_offset=line_offset,
                        compiler=compiler)


def _gpu_device():
    """``(compute capability, driver CUDA version)`` of the active GPU, or None
    when the active backend is not a GPU."""
    b = active_backend()
    if b.simulated:
        return None
    return b.device_properties().compute_capability, toolkit.parse_version(b.versions().get("driver"))


def _build_gpu(all_files, compiled, opts: ProgramOptions, source, name, line_offset) -> ProgramBuild:
    nvcc = toolkit.require_nvcc()
    _, version = toolkit.nvcc_version(nvcc)
    device = _gpu_device()
    args = opts.nvcc_args()
    check = None
    arch = None
    if device is not None:
        cc, driver = device
        check = toolkit.check_toolkit(version, driver)
        if not check.runs:
            raise BackendUnavailable(check.message)
        if not opts.arch_given:
            extra = toolkit.arch_args(cc, sass_only=check.verdict == "sass-only")
            args = extra + args
            arch = f"sm_{cc[0]}{cc[1]}"
    elif not opts.arch_given:
        reason = gpu_unavailable_reason() or "the active backend is the simulator"
        raise BackendUnavailable(
            f"no GPU to take the architecture from ({reason}): give one in the options "
            "(-arch=sm_90) to build for a GPU, or run the program with backend='simulator'")
    if arch is None:
        arch = " ".join(f"{o}={v}" for o, v in opts.items if o in ("-arch", "-code", "-gencode"))
    start = time.perf_counter()
    try:
        built = toolkit.build_with_nvcc(nvcc, all_files, compiled, args)
    except toolkit.NvccFailed as exc:
        raise _compile_error(exc.log, source, name, line_offset, "nvcc") from None
    v = f"{version[0]}.{version[1]}" if version else "?"
    return ProgramBuild("gpu", built.path, built.command, time.perf_counter() - start, built.cache_hit,
                        f"nvcc {v}", tuple(compiled), arch, built.log, check)


def _build_simulator(all_files, compiled, opts: ProgramOptions, source, name, line_offset) -> ProgramBuild:
    gpu_libs = [lib for lib in opts.libraries if lib in sim_programs.GPU_LIBRARIES]
    if gpu_libs:
        message = (f"-l{gpu_libs[0]}: CUDA libraries ({', '.join(gpu_libs)}) are not available to "
                   "programs on the simulator; run the program on a GPU")
        raise CompileError([Diagnostic("error", message)], source=source or "",
                           line_offset=line_offset, compiler="g++ (simulator)")
    compile_flags, link_flags = opts.gxx_args()
    # the simulator's runtime is the CUDA runtime (and NVTX): nothing to link for those
    link_flags = [f for f in link_flags
                  if not (f.startswith("-l") and f[2:] in sim_programs.PROVIDED_LIBRARIES)]
    start = time.perf_counter()
    try:
        built = sim_programs.build_program(all_files, compiled, defines=opts.defines, std=opts.std,
                                           compile_flags=compile_flags, link_flags=link_flags)
    except CompileFailed as exc:
        raise _compile_error(exc.log, source, name, line_offset, "g++ (simulator)") from None
    return ProgramBuild("simulator", built.path, built.command, time.perf_counter() - start,
                        built.cache_hit, f"g++ {sim_build.compiler_version() or '?'}", tuple(compiled),
                        None, built.log)


def build_program(source: str | None = None, *, files: Sequence[str] | Mapping[str, str] | None = None,
                  options: str | Sequence[str] | None = None, backend: str = "auto",
                  name: str = "main.cu", line_offset: int = 0, defines=None) -> ProgramBuild:
    """Build a program without running it; see :func:`program`."""
    opts = with_defines(parse_options(options), defines)
    all_files, compiled = _sources(source, name, files)
    build = _build_gpu if _target(backend) == "gpu" else _build_simulator
    return build(all_files, compiled, opts, source, name, line_offset)


# -- running ------------------------------------------------------------------------------
def _simulator_properties():
    """The device a simulator program sees: the simulator's, or a simulated
    copy of the active GPU."""
    b = active_backend()
    return b.device_properties() if b.simulated else virtual_device(b.device_properties())


def _find_the_line(sanitizer: str, who: str, gpu_note: str = "") -> str:
    return (f"; to see the line, build it with options='-g -Xcompiler -fsanitize={sanitizer}' "
            f"({who} names the file and line{gpu_note})")


_ASAN = _find_the_line("address", "AddressSanitizer",
                       "; on a GPU set ASAN_OPTIONS=protect_shadow_gap=0 too")
#: What a signal that ends a program's host code usually means (a kernel's
#: fault is reported with its thread instead).
_SIGNAL_HINTS = {
    "SIGSEGV": ": an invalid memory access in its host code (a null, freed or device pointer "
               "read or written on the CPU, or an index past the end of an array)" + _ASAN,
    "SIGBUS": ": a misaligned or unmapped memory access in its host code" + _ASAN,
    "SIGFPE": ": an integer division by zero (or overflow) in its host code"
              + _find_the_line("undefined", "UBSan"),
    "SIGABRT": ": abort() was called, by a failed assert() or an uncaught C++ exception (its "
               "message is in the stderr below)",
    "SIGILL": ": an illegal instruction (code built for another CPU, or a function that "
              "returns no value where one is expected)",
    "SIGKILL": ": killed from outside (out of host memory, or a kill -9)",
}


def _failure(done: runner.Completed, fault: str | None, timeout_s) -> ProgramError:
    tail = "\n".join(done.stderr.rstrip().splitlines()[-8:])
    if done.timed_out:
        message = (f"the program did not finish within {timeout_s:g} s and was stopped "
                   "(an endless loop, or waiting for input? raise the limit with timeout=...)")
    elif fault:
        message = "the program faulted on the simulator: " + fault.strip().replace("\nwbsim: ", "\n")
    elif done.returncode < 0:
        try:
            sig = signal.Signals(-done.returncode).name
        except ValueError:
            sig = f"signal {-done.returncode}"
        message = f"the program was ended by {sig}{_SIGNAL_HINTS.get(sig, '')}"
    else:
        message = f"the program exited with code {done.returncode}"
    if tail and not fault:
        message += f"; the last lines of its stderr:\n{tail}"
    return ProgramError(message, returncode=done.returncode, stdout=done.stdout, stderr=done.stderr,
                        fault=fault, timed_out=done.timed_out)


def program(source: str | None = None, *, files: Sequence[str] | Mapping[str, str] | None = None,
            options: str | Sequence[str] | None = None, args: str | Sequence[str] = (),
            backend: str = "auto", timeout: float | None = DEFAULT_TIMEOUT_S, echo: bool = True,
            name: str = "main.cu", line_offset: int = 0, check: bool = True,
            defines=None) -> ProgramRun:
    """Build and run a complete CUDA C++ program.

    ``source``: the main file's text (``name``, default ``main.cu``);
    ``files``: stored files to compile in (names), or a dict of extra files;
    ``options``: nvcc options as one string (``"-O3 -lcurand -Xcompiler
    -fopenmp"``, split as a shell would) or a list; ``defines``: ``-D``
    defines as :func:`workbench.compile` takes them (a dict ``{"N": 4096}``
    or a list of ``"NAME=VALUE"``), after ``options``; ``args``: the program's
    arguments (a string is split as a shell would); ``backend``: ``"auto"``
    (the active backend: a GPU, or the simulator), ``"gpu"`` or
    ``"simulator"``; ``timeout``: seconds before the program is stopped
    (None: no limit); ``echo``: stream its stdout and stderr here as it
    runs; ``check``: raise :class:`~workbench.errors.ProgramError` when it
    exits with a non-zero code (else only on a fault or timeout).

    Returns a :class:`ProgramRun`. A failed build raises
    :class:`~workbench.errors.CompileError` with the lines of ``source``
    (shifted by ``line_offset``)."""
    built = build_program(source, files=files, options=options, backend=backend, name=name,
                          line_offset=line_offset, defines=defines)
    argv = shlex.split(args) if isinstance(args, str) else [str(a) for a in args]
    notes = []
    if echo and built.log and not built.cache_hit:  # the compiler's warnings, once
        sys.stderr.write(built.log.rstrip() + "\n")
    command = [str(built.executable), *argv]
    env: dict[str, str] = {}
    fault_dir = None
    if built.backend == "simulator":
        fault_dir = tempfile.mkdtemp(prefix="wb-program-")
        fault_file = os.path.join(fault_dir, "fault")
        launch_limit = None if timeout is None else max(0.5, timeout - min(5.0, 0.1 * timeout))
        env = sim_programs.program_environment(_simulator_properties(), fault_file, launch_limit)
        run_command = command
    else:
        if built.toolkit is not None and built.toolkit.verdict == "sass-only":
            notes.append(built.toolkit.message)
            if echo:
                print(f"note: {built.toolkit.message}")
        env = active_backend().child_environment()  # the active device, not CUDA's device 0
        stdbuf = shutil.which("stdbuf")  # line-buffered output, streamed as it comes
        run_command = [stdbuf, "-oL", "-eL", *command] if stdbuf else command
    try:
        done = runner.run(run_command, env=env, timeout_s=timeout, echo=echo)
        fault = None
        if fault_dir is not None:
            try:
                fault = Path(fault_dir, "fault").read_text() or None
            except OSError:
                fault = None
    finally:
        if fault_dir is not None:
            shutil.rmtree(fault_dir, ignore_errors=True)
    if done.timed_out or fault or (check and done.returncode != 0):
        raise _failure(done, fault, timeout)
    return ProgramRun(built, tuple(argv), command, done.returncode, done.stdout, done.stderr,
                      done.seconds, notes)
