"""Building with g++: the worker executable (once) and one shared library per
compiled cell, both cached on disk.

Cache: ``DiskCache("sim")`` (``$WORKBENCH_CACHE_DIR/sim`` or
``~/.cache/cuda-workbench/sim``). A library's key hashes the generated source,
the g++ flags, the g++ version and the simulator's own sources (the prelude
and every file of the worker's ``native/`` folder), so editing any of them
rebuilds everything.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ... import subprocesses
from ...cache import DiskCache, write_atomic
from ...errors import CompilerNotFound
from ..contract import CompileFailed

PACKAGE_DIR = Path(__file__).resolve().parent
PRELUDE_DIR = PACKAGE_DIR / "prelude"
#: The worker's sources: every ``.cpp`` here is a part of the one executable.
NATIVE_DIR = PACKAGE_DIR / "native"
CACHE = DiskCache("sim")
#: Bumped when the build or the generated code changes meaning.
SIMULATOR_VERSION = "0.3"

#: What the GPU's compiler keeps, g++ keeps too: a store through a null pointer
#: (it faults on the GPU; g++ would assume it cannot happen and drop it), and
#: a loop with no side effects (``while (flag[0] == 0) {}`` spins on the GPU;
#: g++ may assume such loops end and delete them).
BASE_FLAGS = ("-O2", "-fPIC", "-fno-strict-aliasing", "-fno-delete-null-pointer-checks",
              "-fno-finite-loops", "-fno-semantic-interposition", "-fno-plt", "-pthread",
              "-fdiagnostics-column-unit=byte")  # as NVRTC counts: diagnostics.py makes them characters
#: The checked build (``%%cuda --check``, memcheck): AddressSanitizer, and
#: UndefinedBehaviorSanitizer's alignment check (a misaligned access faults on
#: the GPU; the CPU would carry it out).
CHECKED_FLAGS = ("-fsanitize=address", "-fsanitize=alignment", "-fno-sanitize-recover=alignment",
                 "-fno-omit-frame-pointer", "-g")
#: The build that counts memory accesses (instrumented.py): ThreadSanitizer's
#: instrumentation calls a hook of the worker (native/access.cpp) for every
#: load, store and atomic, and SanitizerCoverage's for every basic block; the
#: library is linked without libtsan. One source access stays one access, as
#: the GPU's compiler keeps it: no vectorisation (which would merge
#: neighbouring accesses into one) and no scalar replacement of aggregates
#: (which would split a float4 copy into four loads). -gdwarf-4: sites become
#: lines (binutils 2.40's addr2line misplaces DWARF 5's first file in functions
#: that are not inlined). -fno-gnu-unique: a template's static __shared__
#: variable is the library's own, not the one of the module's plain build
#: loaded before it (a unique symbol is one per process). The source's
#: ``#pragma unroll`` becomes g++'s (instrumented.instrumented_source): a
#: loop whose constant trip count is within the count is unrolled completely,
#: as nvcc does, and any other not at all (-fdisable-rtl-loop2_unroll: no
#: partial unrolling, which nvcc would do by the count; the counters group a
#: loop's accesses by iteration either way). -fno-tree-sink and -fno-thread-jumps
#: keep each access on the path the source gives it and each loop whole: without
#: them g++ 13 moves the load of ``b`` in ``m = (m != m || m >= b) ? m : b`` into
#: the branch where m is a number (lanes holding a NaN skip it) and splits the loop
#: in two by that test, which counted twice the requests a GPU issues.
INSTRUMENT_FLAGS = ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0",
                    "-fsanitize-coverage=trace-pc", "-gdwarf-4", "-fno-tree-vectorize",
                    "-fno-tree-slp-vectorize", "-fno-tree-sra", "-fno-gnu-unique", "-Wno-tsan",
                    "-fdisable-rtl-loop2_unroll", "-fno-tree-sink", "-fno-thread-jumps")
#: What g++ says of -fdisable-rtl-loop2_unroll on every build.
_DISABLED_PASS_NOTE = re.compile(r"^cc1plus: note: disable pass .*\n?", re.M)


def compiler() -> str:
    """The C++ compiler: ``$WBSIM_CXX``, else ``g++``."""
    return os.environ.get("WBSIM_CXX", "g++")


@functools.lru_cache(maxsize=None)
def compiler_version() -> str | None:
    """``g++ -dumpfullversion``, or None when there is no g++ (remembered in
    the cache for :func:`_built_with`)."""
    remembered = CACHE.path("compiler-version")
    exe = shutil.which(compiler())
    version = None
    if exe is not None:
        try:
            out = subprocesses.run([exe, "-dumpfullversion"], text=True,
                                 timeout=30)
            version = out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            version = None
    if version is not None:
        try:
            if not remembered.exists() or remembered.read_text() != version:
                write_atomic(remembered, version)
        except OSError:
            pass
        return version
    return None


def _built_with() -> str:
    """The g++ version the cache's builds are keyed by: this g++, or without
    one the version that built what the cache holds, so that cached kernels
    and the worker still load (only new builds need the compiler)."""
    version = compiler_version()
    if version is None:
        try:
            version = CACHE.path("compiler-version").read_text().strip()
        except OSError:
            version = ""
    return version


@functools.lru_cache(maxsize=None)
def simulator_fingerprint() -> str:
    """Hash of everything that changes what a build produces."""
    h = hashlib.sha256()
    h.update(SIMULATOR_VERSION.encode())
    h.update(_built_with().encode())
    h.update(platform.machine().encode())
    for path in sorted(PRELUDE_DIR.rglob("*")) + sorted(NATIVE_DIR.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(PACKAGE_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


#: The command that installs a C and C++ compiler, by the ``ID``/``ID_LIKE``
#: words of ``/etc/os-release`` (the first that matches).
_INSTALL_BY_SYSTEM = (
    (("debian", "ubuntu"), "sudo apt install g++"),
    (("fedora", "rhel", "centos"), "sudo dnf install gcc-c++"),
    (("suse", "opensuse"), "sudo zypper install gcc-c++"),
    (("arch",), "sudo pacman -S gcc"),
    (("alpine",), "apk add g++"),
)


def install_command() -> str:
    """How to install a C/C++ compiler on this system, as a command: conda's
    compilers in a conda environment, Xcode's command-line tools on macOS,
    else the Linux distribution's package."""
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        release = {}
    return install_command_for(sys.platform, release, os.environ.get("CONDA_PREFIX")
                               if Path(sys.prefix, "conda-meta").is_dir() else None)


def install_command_for(system: str, release: dict, conda_prefix: str | None) -> str:
    """:func:`install_command` for ``sys.platform``, ``/etc/os-release``'s
    fields and the conda environment Python runs in (None: not conda's)."""
    if conda_prefix:
        return "conda install -c conda-forge cxx-compiler"
    if system == "darwin":
        return "xcode-select --install"
    words = f"{release.get('ID', '')} {release.get('ID_LIKE', '')}".lower().split()
    for systems, command in _INSTALL_BY_SYSTEM:
        if any(word in systems for word in words):
            return command
    return "install g++ with your system's package manager"


def missing_compiler_message() -> str | None:
    """None when the simulator's C++ compiler is here; else one line: what is
    missing, the command that installs it, and that cached kernels still run."""
    name = compiler()
    if shutil.which(name) is not None:
        return None
    where = (f"WBSIM_CXX={name} is not an executable" if "WBSIM_CXX" in os.environ
             else f"{name} is not on PATH")
    return (f"The CPU simulator needs a C++ compiler to build new kernels and finds none ({where}): "
            f"install one ({install_command()}) or set WBSIM_CXX to one; kernels built before on "
            f"this machine still run from the cache.")


def _require_compiler() -> str:
    exe = shutil.which(compiler())
    if exe is None:
        raise CompilerNotFound(missing_compiler_message())
    return exe


def worker_built(checked: bool = False) -> bool:
    """True when the worker executable is in the cache (nothing is built)."""
    return CACHE.path(_worker_name(checked)).exists()


def _worker_name(checked: bool) -> str:
    return f"wbsim-worker-{simulator_fingerprint()}{'-asan' if checked else ''}"


def _atomic_build(target: Path, command: list[str], before_replace=None) -> subprocess.CompletedProcess:
    """Run ``command`` with ``{out}`` replaced by a temporary file in the
    cache's folder, then move it to ``target`` (never a half-written file);
    ``before_replace()`` runs after a successful build, before the move."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        proc = subprocesses.run([c.replace("{out}", tmp) for c in command],
                                text=True, timeout=600)
        if proc.returncode == 0:
            if before_replace is not None:
                before_replace()
            os.replace(tmp, target)
        return proc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def worker_executable(checked: bool = False) -> Path:
    """The worker executable, built on first use (a few seconds): every part
    of ``native/`` compiled on its own (in parallel), then linked with
    link-time optimisation, which gives the code of one translation unit
    (the scheduler's hot paths reach across parts)."""
    name = _worker_name(checked)
    target = CACHE.path(name)
    if target.exists():
        return target
    exe = _require_compiler()
    flags = ["-std=c++17", "-O2", "-g", "-pthread", "-flto=auto", "-iquote", str(PRELUDE_DIR)]
    if checked:
        flags += ["-DWBSIM_CHECKED", "-fsanitize=address", "-fno-omit-frame-pointer"]
    parts = sorted(NATIVE_DIR.glob("*.cpp"))
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=name + ".") as tmp:
        objects = [os.path.join(tmp, part.stem + ".o") for part in parts]
        with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
            compiled = list(pool.map(
                lambda part, obj: subprocesses.run([exe, *flags, "-c", str(part), "-o", obj],
                                                 text=True, timeout=600),
                parts, objects))
        failed = [proc.stderr for proc in compiled if proc.returncode != 0]
        if not failed:
            link = _atomic_build(target, [exe, *flags, *objects, "-o", "{out}", "-rdynamic", "-ldl"])
            if link.returncode != 0:
                failed.append(link.stderr)
    if failed:
        raise RuntimeError("building the simulator's worker failed:\n" + "\n".join(failed))
    return target


@dataclass
class BuiltLibrary:
    path: Path
    log: str
    cache_hit: bool


#: What each library of this process was built from (path -> generated source,
#: g++ flags): the instrumented build of a module is made from the same.
_INPUTS: dict[str, tuple[str, tuple[str, ...]]] = {}


def build_inputs(path) -> tuple[str, tuple[str, ...]] | None:
    """``(generated source, flags)`` of the library at ``path`` built (or
    found in the cache) by this process, or None."""
    return _INPUTS.get(str(path))


def std_flag(std: str | None) -> str:
    """The ``-std=`` flag: the user's standard, at least C++17 (the prelude needs it)."""
    if std:
        s = std.lower().replace("gnu++", "c++")
        if s in ("c++20", "c++2a", "c++23", "c++2b"):
            return f"-std={s}"
    return "-std=c++17"


def build_library(generated: str, flags: list[str], checked: bool, warnings: bool,
                  instrumented: bool = False) -> BuiltLibrary:
    """Compile ``generated`` (C++ from :mod:`.source`) into a shared library
    (``instrumented``: the build that counts accesses, :data:`INSTRUMENT_FLAGS`).

    Raises :class:`CompileFailed` with g++'s log on error.
    """
    given = tuple(flags)
    cmd_flags = list(BASE_FLAGS) + list(flags)
    if checked:
        cmd_flags = [f for f in cmd_flags if f != "-O2"] + ["-O1", *CHECKED_FLAGS]
    if instrumented:
        cmd_flags += INSTRUMENT_FLAGS
    if not warnings:
        cmd_flags.append("-w")
    key_src = "\n".join([simulator_fingerprint(), " ".join(cmd_flags), generated])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:24]
    target = CACHE.path(f"k-{key}.so")
    if target.exists():
        _remember(target, generated, given)
        return BuiltLibrary(target, "", True)
    exe = _require_compiler()  # only a new build needs it
    src = CACHE.path(f"k-{key}.cpp")
    if not write_atomic(src, generated):
        raise CompileFailed(f"cannot write the generated source to {src}", compiler="g++",
                            line_shift=0)
    compile_cmd = [exe, *cmd_flags, "-I", str(PRELUDE_DIR), "-x", "c++", str(src)]
    if instrumented:
        # compiled with the instrumentation, linked without it: libtsan would
        # otherwise come along as a dependency; the worker has the hooks
        obj = CACHE.path(f"k-{key}.o")
        proc = _atomic_build(obj, [*compile_cmd, "-c", "-o", "{out}"])
        if proc.returncode == 0:
            link = [c for c in cmd_flags if not c.startswith("-fsanitize")]
            proc = _atomic_build(target, [exe, *link, "-shared", str(obj), "-o", "{out}"])
        if obj.exists():
            obj.unlink()
    else:
        proc = _atomic_build(target, [*compile_cmd, "-shared", "-o", "{out}"])
    log = _clean_log(proc.stderr, src)
    if proc.returncode != 0:
        raise CompileFailed(log or f"g++ failed with exit code {proc.returncode}",
                            compiler="g++", line_shift=0)
    _remember(target, generated, given)
    return BuiltLibrary(target, log, False)


def _remember(target: Path, generated: str, flags: tuple[str, ...]) -> None:
    if len(_INPUTS) > 512:
        _INPUTS.pop(next(iter(_INPUTS)))
    _INPUTS[str(target)] = (generated, flags)


def _clean_log(log: str, src: Path) -> str:
    """g++'s log without the temporary file's path and the prelude's location."""
    log = _DISABLED_PASS_NOTE.sub("", log)
    return (log.replace(str(src) + ":", "wbsim_generated:")
               .replace(str(PRELUDE_DIR) + "/", ""))
