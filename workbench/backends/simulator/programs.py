"""Whole CUDA programs (with ``main()``) built for the CPU simulator.

Each source file is rewritten (same lines: the launch syntax and ``extern
__shared__``), compiled with g++ against the prelude and
``program_runtime/wbsim_program.h`` (the CUDA runtime API), and linked with
the simulator's runtime: every part of ``native/`` but the worker's request
loop, plus ``program_runtime/cudart.cpp`` (an archive built once and
cached). The executable runs on its own; :mod:`workbench.programs` runs it.

A launch ``k<<<grid, block, shmem, stream>>>(args)`` becomes
``__wbsim_launch_program("k", __wbsim_cfg(grid, block, shmem, stream),
[&](auto... a) { k(a...); }, args)`` on the same lines, so template kernels
are deduced and arguments converted as in CUDA.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ... import subprocesses
from ... import cxx
from ...cache import (dependencies_unchanged, library_files, read_depfile, record_dependencies,
                      relative_folders)
from ..contract import CompileFailed, DeviceProperties
from . import build
from .source import find_unsupported, rewrite_dynamic_shared

RUNTIME_DIR = build.PACKAGE_DIR / "program_runtime"
HEADER = RUNTIME_DIR / "wbsim_program.h"
#: Files compiled into a program; any other file is a header to include.
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
#: What g++ keeps of the GPU compiler's behaviour (see build.BASE_FLAGS).
PROGRAM_FLAGS = ("-O2", "-fno-strict-aliasing", "-fno-delete-null-pointer-checks", "-fno-finite-loops",
                 "-pthread", "-fdiagnostics-column-unit=byte")
#: CUDA libraries a program may link on a GPU; the simulator has none of them.
GPU_LIBRARIES = ("cublas", "cublasLt", "curand", "cufft", "cusparse", "cusolver", "cudnn", "nvToolsExt",
                 "nvtx3", "nccl", "nvjpeg", "npp", "cuda")


def is_source(name: str) -> bool:
    return name.endswith(SOURCE_SUFFIXES)


@functools.lru_cache(maxsize=1)
def supported_api() -> tuple[str, ...]:
    """The ``cuda*`` functions the program runtime provides (read from its header)."""
    text = cxx.blank_comments_and_literals(HEADER.read_text())
    macros = set(re.findall(r"#\s*define\s+(\w+)\b(?!\()", text))  # object-like ones
    return tuple(sorted(set(re.findall(r"\b(cuda[A-Z]\w*)\s*\(", text)) - macros))


# -- the launch syntax -------------------------------------------------------------------
def _skip_back(code: str, j: int) -> int:
    while j >= 0 and code[j].isspace():
        j -= 1
    return j


def _match_back(code: str, j: int, opening: str, closing: str) -> int:
    """The offset of the bracket opening the one closed at ``j``, or -1."""
    depth = 0
    while j >= 0:
        if opening == "<" and code[j] == ")":  # (4 > 2) inside template arguments
            j = _match_back(code, j, "(", ")") - 1
            continue
        if code[j] == closing:
            depth += 1
        elif code[j] == opening:
            depth -= 1
            if depth == 0:
                return j
        elif code[j] in ";{}":
            return -1
        j -= 1
    return -1


def _callee_start(code: str, end: int) -> int:
    """Where the kernel expression before ``<<<`` at ``end`` starts (a name,
    ``ns::name``, ``name<T, 4>``, ``(*pointer)``), or -1."""
    j = _skip_back(code, end - 1)
    if j >= 0 and code[j] == ")":
        return _match_back(code, j, "(", ")")
    start = -1
    while j >= 0:
        if code[j] == ">":
            j = _skip_back(code, _match_back(code, j, "<", ">") - 1)
            if j < 0:
                return -1
        m = re.search(r"[A-Za-z_]\w*$", code[max(0, j - 200):j + 1])
        if not m:
            return start
        start = j + 1 - len(m.group())
        j = _skip_back(code, start - 1)
        if j >= 1 and code[j - 1:j + 1] == "::":
            start = j - 1
            j = _skip_back(code, j - 2)
            continue
        return start
    return start


def _chevron_close(code: str, start: int) -> int:
    """The offset of the ``>>>`` closing a launch configuration, or -1."""
    depth = 0
    for k in range(start, len(code)):
        c = code[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth <= 0:
            return -1
        elif c == ">" and depth == 0 and code.startswith(">>>", k):
            return k
    return -1


def _macro_parameters(code: str, at: int) -> list[str]:
    """The parameters of the function-like ``#define`` whose body holds
    offset ``at`` of ``code`` (continued lines included), or []."""
    start = code.rfind("\n", 0, at) + 1
    while start > 1 and code[:start - 1].rstrip(" \t").endswith("\\"):
        start = code.rfind("\n", 0, start - 1) + 1
    m = re.match(r"[ \t]*#[ \t]*define[ \t]+\w+\(([^)]*)\)", code[start:at])
    return [p.strip() for p in m.group(1).split(",")] if m else []


def rewrite_launches(source: str) -> str:
    """``source`` with every ``kernel<<<...>>>(args)`` turned into a call of
    the program runtime, each line where it was."""
    code = cxx.blank_comments_and_literals(source)
    if "<<<" not in code:
        return source
    pieces, last = [], 0
    for m in re.finditer("<<<", code):
        at = m.start()
        if at < last:
            continue
        callee = _callee_start(code, at)
        close = _chevron_close(code, at + 3)
        if callee < last or close < 0:
            continue
        paren = close + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        if paren >= len(code) or code[paren] != "(":
            continue
        end = cxx.matching(code, paren)
        if end >= len(code):
            continue
        kernel = source[callee:at]
        name = " ".join(kernel.split()).replace("\\", "\\\\").replace('"', '\\"')
        quoted = f'"{name}"'
        if name in _macro_parameters(code, callee):  # #define LAUNCH(k) k<<<...>>>: the argument's name
            quoted = f"#{name}"
        args = source[paren + 1:end]
        text = (f'__wbsim_launch_program({quoted}, __wbsim_cfg({source[at + 3:close]}), '
                f"[&](auto... __wbsim_a) {{ {kernel}(__wbsim_a...); }}"
                + (f", {args})" if args.strip() else ")"))
        text += "\n" * source.count("\n", close, paren)
        pieces += [source[last:callee], text]
        last = end + 1
    pieces.append(source[last:])
    return "".join(pieces)


def generate(name: str, source: str, defines: Sequence[str] = ()) -> str:
    """The translation unit g++ compiles for source file ``name``."""
    lines = ['#include "wbsim_all.h"', '#include "wbsim_program.h"']
    for d in defines:
        macro, eq, value = d.partition("=")
        lines.append(f"#define {macro} {value if eq else '1'}")
    body = rewrite_launches(rewrite_dynamic_shared(source))
    lines += [f'#line 1 "{name}"', body]
    return "\n".join(lines) + "\n"


# -- the build --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def program_fingerprint() -> str:
    h = hashlib.sha256(build.simulator_fingerprint().encode())
    for path in sorted(RUNTIME_DIR.glob("*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def runtime_archive() -> Path:
    """The simulator's runtime for programs, as a static library (built once)."""
    target = build.CACHE.path(f"wbsim-program-{program_fingerprint()}.a")
    if target.exists():
        return target
    exe = build._require_compiler()
    parts = [p for p in sorted(build.NATIVE_DIR.glob("*.cpp")) if p.name != "worker.cpp"]
    parts.append(RUNTIME_DIR / "cudart.cpp")
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
    for name in sources:
        for u in find_unsupported(files[name], None, program=True):
            problems.append(f"{name}:{u.line}:{u.column}: error: {u.message}")
    if problems:
        raise CompileFailed("\n".join(problems), compiler="g++")
    texts = {n: (generate(n, t, defines) if n in sources else rewrite_launches(rewrite_dynamic_shared(t)))
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
        depfile = str(folder / "program.d")
        # g++ -MD writes one rule for the last unit only: with several, -M passes follow
        deps_args = ["-MD", "-MF", depfile] if len(units) == 1 else []
        command = [exe, *flags, *includes, *deps_args, "-x", "c++", *units, "-x", "none", str(archive),
                   "-o", "{out}", "-pthread", *link_flags]

        def dependencies() -> None:  # before the binary is in place (build._atomic_build)
            found = read_depfile(depfile)
            for i, unit in enumerate(units if len(units) > 1 else ()):
                one = str(folder / f"unit{i}.d")
                subprocesses.run([exe, *flags, *includes, "-x", "c++", unit, "-M", "-MF", one],
                                 text=True, timeout=600)
                found += read_depfile(one)
            record_dependencies(target, [*found, *library_files(link_flags)], exclude=tmp)

        proc = build._atomic_build(target, command, before_replace=dependencies)
        log = proc.stderr.replace(tmp + "/", "").replace(str(build.PRELUDE_DIR) + "/", "")
        log = re.sub(r"(\S+)\.wbsim\.cpp", r"\1", log)
    if proc.returncode != 0:
        raise CompileFailed(explain_log(log) or f"g++ failed with exit code {proc.returncode}",
                            compiler="g++")
    shown = [str(target) if c == "{out}" else re.sub(r"\.wbsim\.cpp$", "", c.replace(tmp + "/", ""))
             for c in command if c not in deps_args]
    return ProgramBinary(target, log, False, shown)


_UNDECLARED = re.compile(r"^(?P<where>[^:\n]+:\d+:\d+): error: [‘'`](?P<name>(?:cuda|cu)[A-Za-z]\w*)[’'`] "
                         r"(?:was not declared in this scope|does not name a type|has not been declared)"
                         r"(?:; did you mean .*)?$", re.M)
_NO_HEADER = re.compile(r"^(?P<where>[^:\n]+:\d+:\d+): fatal error: (?P<header>(?:cublas|cublasLt|curand|cufft"
                        r"|cusparse|cusolver|cudnn|nccl|npp|nvjpeg|nvrtc|cudaProfiler|cuda_gl|cuda_egl|cutensor)"
                        r"[\w.]*\.h|(?:thrust|cub|cuda)/[\w/.]+): No such file or directory$", re.M)


def explain_log(log: str) -> str:
    """g++'s log with an undeclared ``cuda*`` name, or a missing CUDA
    library header, said in the program runtime's words."""
    def undeclared(m: re.Match) -> str:
        name = m["name"]
        if not name.startswith("cuda"):
            return (f"{m['where']}: error: {name} belongs to a CUDA library, which the simulator's "
                    "program runtime does not provide; run the program on a GPU")
        return (f"{m['where']}: error: {name} is not supported by the simulator's program runtime "
                f"(it works on a GPU); supported: {', '.join(supported_api())}")

    def no_header(m: re.Match) -> str:
        return (f"{m['where']}: error: {m['header']} is not available to programs on the simulator "
                "(CUDA libraries such as cuBLAS, cuRAND, CUB and Thrust run only on a GPU)")
    return _NO_HEADER.sub(no_header, _UNDECLARED.sub(undeclared, log))


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
