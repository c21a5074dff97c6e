"""Whole CUDA programs (with ``main()``) built for the CPU simulator.

Each source file is rewritten (same lines: the launch syntax, ``extern
__shared__``, the inline PTX that reads a special register; see
:mod:`.program_source`), compiled with g++ against the prelude and
``program_runtime/wbsim_program.h`` (the CUDA runtime API), and linked with
the simulator's runtime: every part of ``native/`` but the worker's request
loop, plus the ``program_runtime/cudart*.cpp`` files (an archive built once and
cached). The executable runs on its own; :mod:`workbench.programs` runs it.

Headers come from the build's own files, then the ``-I`` folders of the
options (the CUDA samples' ``Common/``, say), then the simulator's CUDA headers
(the prelude's and ``program_runtime/``'s: ``cuda_runtime.h``, ``cuda_fp16.h``,
``cuda_bf16.h``, ``cuda_profiler_api.h``, ``nvtx3/nvToolsExt.h`` ...).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ... import subprocesses
from ...cache import (dependencies_unchanged, library_files, read_depfile, record_dependencies,
                      relative_folders)
from ..contract import CompileFailed, DeviceProperties
from . import build
from .program_source import (declared_api, explain_log as _explain_log, gpu_only_features,
                             provided_headers, rewrite, rewrite_launches)
from .source import find_unsupported, rewrite_dynamic_shared

__all__ = ["ProgramBinary", "build_program", "explain_log", "generate", "rewrite_launches", "supported_api"]

RUNTIME_DIR = build.PACKAGE_DIR / "program_runtime"
#: Files compiled into a program; any other file is a header to include.
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
#: Source files nvcc compiles with the host compiler alone.
HOST_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
#: What g++ keeps of the GPU compiler's behaviour (see build.BASE_FLAGS).
PROGRAM_FLAGS = ("-O2", "-fno-strict-aliasing", "-fno-delete-null-pointer-checks", "-fno-finite-loops",
                 "-pthread", "-fdiagnostics-column-unit=byte")
#: CUDA libraries a program may link on a GPU; the simulator has none of them.
GPU_LIBRARIES = ("cublas", "cublasLt", "curand", "cufft", "cusparse", "cusolver", "cudnn", "nccl", "nvjpeg",
                 "npp", "nppc", "nppial", "nppif", "nppig", "nppim", "nppist", "nppisu", "nppitc", "npps",
                 "nvrtc", "cuda", "cufile", "cutensor", "nvidia-ml")
#: Libraries a program may link on a GPU that the simulator's runtime itself stands for.
PROVIDED_LIBRARIES = ("cudart", "cudart_static", "cudadevrt", "nvToolsExt", "nvtx3interop")


def is_source(name: str) -> bool:
    return name.endswith(SOURCE_SUFFIXES)


def supported_api() -> tuple[str, ...]:
    """The ``cuda*`` functions the program runtime provides (read from its headers)."""
    return declared_api(RUNTIME_DIR)


def explain_log(log: str) -> str:
    """g++'s log with each undeclared CUDA name, or missing GPU-only header, said in
    one line (what it is; that it runs on a GPU)."""
    return _explain_log(log, supported_api())


def is_host_only(name: str) -> bool:
    """A source file nvcc gives the host compiler (``.cpp``, ``.c``): no device code."""
    return name.endswith(HOST_SUFFIXES)


def generate(name: str, source: str, defines: Sequence[str] = ()) -> str:
    """The translation unit g++ compiles for source file ``name``: a ``.cu`` file with
    the device prelude and the program runtime; a host-only file as the host compiler
    sees it under nvcc (its ``cuda_runtime.h`` declares the runtime API, no device
    function)."""
    defined = []
    for d in defines:
        macro, eq, value = d.partition("=")
        defined.append(f"#define {macro} {value if eq else '1'}")
    if is_host_only(name):
        return "\n".join(["#define __WBSIM_HOST_UNIT 1", *defined, f'#line 1 "{name}"', source]) + "\n"
    body = rewrite(rewrite_dynamic_shared(source))
    lines = ['#include "wbsim_all.h"', '#include "wbsim_program.h"', *defined, f'#line 1 "{name}"', body]
    return "\n".join(lines) + "\n"


# -- the build --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def program_fingerprint() -> str:
    h = hashlib.sha256(build.simulator_fingerprint().encode())
    for path in sorted(RUNTIME_DIR.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(RUNTIME_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def runtime_archive() -> Path:
    """The simulator's runtime for programs, as a static library (built once)."""
    target = build.CACHE.path(f"wbsim-program-{program_fingerprint()}.a")
    if target.exists():
        return target
    exe = build._require_compiler()
    parts = [p for p in sorted(build.NATIVE_DIR.glob("*.cpp")) if p.name != "worker.cpp"]
    parts += sorted(RUNTIME_DIR.glob("cudart*.cpp"))
    flags = ["-std=c++17", "-O2", "-g", "-pthread", "-iquote", str(build.PRELUDE_DIR),
             "-iquote", str(build.NATIVE_DIR), "-iquote", str(RUNTIME_DIR)]
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=target.name + ".") as tmp:
        objects = [str(Path(tmp) / (p.stem + ".o")) for p in parts]
        with ThreadPoolExecutor(max_workers=4) as pool:
            done = list(pool.map(lambda p, o: subprocesses.run([exe, *flags, "-c", str(p), "-o", o],
                                                             text=True, timeout=600),
                                 parts, objects))
        failed = [d.stderr for d in done if d.returncode != 0]
        if failed:
            raise RuntimeError("building the simulator's program runtime failed:\n" + "\n".join(failed))
        archive = str(Path(tmp) / "runtime.a")
        made = subprocesses.run(["ar", "rcs", archive, *objects], text=True,
                              timeout=120)
        if made.returncode != 0:
            raise RuntimeError(f"ar failed: {made.stderr}")
        os.replace(archive, target)
    return target


@dataclass
class ProgramBinary:
    """An executable built for the simulator: where it is, g++'s warnings,
    whether it came from the cache and the command that built it."""

    path: Path
    log: str
    cache_hit: bool
    command: list[str] = field(default_factory=list)


def build_program(files: Mapping[str, str], sources: Sequence[str] | None = None, *,
                  defines: Sequence[str] = (), std: str | None = None,
                  compile_flags: Sequence[str] = (), link_flags: Sequence[str] = ()) -> ProgramBinary:
    """Build the program made of ``files`` (name -> text): ``sources`` (by
    default every source file among them) are compiled and linked, the other
    files are there to be included.

    Raises :class:`CompileFailed` with g++'s log (file names as given)."""
    sources = [n for n in files if is_source(n)] if sources is None else list(sources)
    problems = []
    for name, text in files.items():
        for line, col, message in gpu_only_features(text, provided_headers(build.PRELUDE_DIR, RUNTIME_DIR)):
            problems.append(f"{name}:{line}:{col}: error: {message}")
    for name in sources:
        if is_host_only(name):
            continue
        for u in find_unsupported(rewrite(files[name]), None, program=True):
            problems.append(f"{name}:{u.line}:{u.column}: error: {u.message}")
    if problems:
        raise CompileFailed("\n".join(problems), compiler="g++")
    texts = {n: (generate(n, t, defines) if n in sources else rewrite(rewrite_dynamic_shared(t)))
             for n, t in files.items()}
    flags = [*PROGRAM_FLAGS, build.std_flag(std), *compile_flags]
    # a relative -I or -L folder is found from the current one
    where = os.getcwd() if relative_folders([*flags, *link_flags]) else ""
    key_text = "\n".join([program_fingerprint(), "deps 1", where, " ".join(flags), " ".join(link_flags),
                          *(f"{n}\n{t}" for n, t in sorted(texts.items()))])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
    target = build.CACHE.path(f"prog-{key}")
    if target.exists() and dependencies_unchanged(target):  # headers from -I folders, libraries
        return ProgramBinary(target, "", True)
    exe = build._require_compiler()
    archive = runtime_archive()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="prog-build.") as tmp:
        folder = Path(tmp)
        units = []
        for name, text in texts.items():
            path = folder / (name + ".wbsim.cpp" if name in sources else name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if name in sources:
                units.append(str(path))
        includes = ["-iquote", tmp, "-I", str(build.PRELUDE_DIR), "-I", str(RUNTIME_DIR)]
        link = ["-x", "none", str(archive), "-o", "{out}", "-pthread", *link_flags]
        if len(units) == 1:  # compiled and linked in one command
            depfiles = [str(folder / "program.d")]
            command = [exe, *flags, *includes, "-MD", "-MF", depfiles[0], "-x", "c++", units[0], *link]
            log, failed = "", None
        else:  # each unit on its own (in parallel), then the link
            depfiles = [str(folder / f"unit{i}.d") for i in range(len(units))]
            objects = [str(folder / f"unit{i}.o") for i in range(len(units))]
            compiles = [[exe, *flags, *includes, "-MD", "-MF", d, "-x", "c++", u, "-c", "-o", o]
                        for u, d, o in zip(units, depfiles, objects)]
            with ThreadPoolExecutor(max_workers=min(len(units), os.cpu_count() or 1)) as pool:
                done = list(pool.map(lambda c: subprocesses.run(c, text=True, timeout=600), compiles))
            log = "".join(d.stderr for d in done)
            failed = next((d for d in done if d.returncode != 0), None)
            command = [exe, *objects, *link]
        if failed is None:
            proc = build._atomic_build(target, command, before_replace=lambda: record_dependencies(
                target, [f for d in depfiles for f in read_depfile(d)] + library_files(link_flags),
                exclude=tmp))
            log += proc.stderr
        else:
            proc = failed
        log = log.replace(tmp + "/", "").replace(str(build.PRELUDE_DIR) + "/", "")
        log = re.sub(r"(\S+)\.wbsim\.cpp", r"\1", log)
    if proc.returncode != 0:
        raise CompileFailed(explain_log(log) or f"g++ failed with exit code {proc.returncode}",
                            compiler="g++")
    if len(units) > 1:  # one line for the lot: the units compiled, then linked
        command = [exe, *flags, *includes, "-c", *units, ";", exe, "*.o", *link]
    shown = [str(target) if c == "{out}" else re.sub(r"\.wbsim\.cpp$", "", c.replace(tmp + "/", ""))
             for c in command if c not in ("-MD", "-MF") and not c.endswith(".d")]
    return ProgramBinary(target, log, False, shown)


def device_description(props: DeviceProperties) -> str:
    """``$WBSIM_DEVICE``: the virtual device's properties for cudaGetDeviceProperties."""
    fields = {"name": props.name.replace(";", ","), "major": props.compute_capability[0],
              "minor": props.compute_capability[1], "sms": props.multiprocessors,
              "memory": props.total_memory, "shared_block": props.shared_memory_per_block,
              "shared_optin": props.shared_memory_per_block_optin,
              "shared_sm": props.shared_memory_per_multiprocessor,
              "regs_block": props.registers_per_block, "regs_sm": props.registers_per_multiprocessor,
              "threads_sm": props.max_threads_per_multiprocessor,
              "blocks_sm": props.max_blocks_per_multiprocessor, "l2": props.l2_cache_bytes,
              "clock_khz": props.clock_khz, "memory_clock_khz": props.memory_clock_khz,
              "bus_width": props.memory_bus_width}
    return ";".join(f"{k}={v}" for k, v in fields.items() if v is not None)


def program_environment(props: DeviceProperties, fault_file: str, launch_timeout_s: float | None,
                        threads: int = 0) -> dict[str, str]:
    """The environment variables a simulator program reads."""
    env = {"WBSIM_DEVICE": device_description(props), "WBSIM_FAULT_FILE": fault_file}
    if launch_timeout_s:
        env["WBSIM_LAUNCH_TIMEOUT_MS"] = str(max(1, int(launch_timeout_s * 1000)))
    if threads:
        env["WBSIM_THREADS"] = str(threads)
    return env
