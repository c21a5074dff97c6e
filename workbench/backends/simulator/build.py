"""Building with g++: the worker executable (once) and one shared library per
compiled cell, both cached on disk.

Cache: ``$WORKBENCH_CACHE_DIR/sim`` or ``~/.cache/cuda-workbench/sim``. A
library's key hashes the generated source, the g++ flags, the g++ version and
the simulator's own sources (prelude and runtime), so editing either
rebuilds everything.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..base import CompileFailed

PACKAGE_DIR = Path(__file__).resolve().parent
PRELUDE_DIR = PACKAGE_DIR / "prelude"
RUNTIME_SOURCE = PACKAGE_DIR / "native" / "runtime.cpp"
#: Bumped when the build or the generated code changes meaning.
SIMULATOR_VERSION = "0.3"

BASE_FLAGS = ("-O2", "-fPIC", "-fno-strict-aliasing", "-fno-semantic-interposition",
              "-fno-plt", "-pthread")
CHECKED_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")


def cache_dir() -> Path:
    root = os.environ.get("WORKBENCH_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "cuda-workbench")
    path = Path(root) / "sim"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiler() -> str:
    """The C++ compiler: ``$WBSIM_CXX``, else ``g++``."""
    return os.environ.get("WBSIM_CXX", "g++")


@functools.lru_cache(maxsize=None)
def compiler_version() -> str | None:
    """``g++ -dumpfullversion``, or None when there is no g++."""
    exe = shutil.which(compiler())
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-dumpfullversion"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@functools.lru_cache(maxsize=None)
def simulator_fingerprint() -> str:
    """Hash of everything that changes what a build produces."""
    h = hashlib.sha256()
    h.update(SIMULATOR_VERSION.encode())
    h.update((compiler_version() or "").encode())
    h.update(platform.machine().encode())
    for path in sorted(PRELUDE_DIR.rglob("*")) + [RUNTIME_SOURCE]:
        if path.is_file():
            h.update(str(path.relative_to(PACKAGE_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _require_compiler() -> str:
    exe = shutil.which(compiler())
    if exe is None:
        from ...errors import BackendUnavailable
        raise BackendUnavailable(
            "The CPU simulator needs a C++ compiler: install g++ (apt-get install g++) "
            "or set WBSIM_CXX to one.")
    return exe


def _atomic_build(target: Path, command: list[str], what: str) -> subprocess.CompletedProcess:
    """Run ``command`` with ``{out}`` replaced by a temporary file, then move it to ``target``."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        proc = subprocess.run([c.replace("{out}", tmp) for c in command],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode == 0:
            os.replace(tmp, target)
        return proc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def worker_executable(checked: bool = False) -> Path:
    """The worker executable, built on first use (a few seconds)."""
    exe = _require_compiler()
    name = f"wbsim-worker-{simulator_fingerprint()}{'-asan' if checked else ''}"
    target = cache_dir() / name
    if target.exists():
        return target
    cmd = [exe, "-std=c++17", "-O2", "-g", "-pthread", "-iquote", str(PRELUDE_DIR),
           str(RUNTIME_SOURCE), "-o", "{out}", "-rdynamic", "-ldl"]
    if checked:
        cmd[1:1] = ["-DWBSIM_CHECKED", "-fsanitize=address", "-fno-omit-frame-pointer"]
    proc = _atomic_build(target, cmd, "worker")
    if proc.returncode != 0:
        raise RuntimeError(f"building the simulator's worker failed:\n{proc.stderr}")
    return target


@dataclass
class BuiltLibrary:
    path: Path
    log: str
    cache_hit: bool


def std_flag(std: str | None) -> str:
    """The ``-std=`` flag: the user's standard, at least C++17 (the prelude needs it)."""
    if std:
        s = std.lower().replace("gnu++", "c++")
        if s in ("c++20", "c++2a", "c++23", "c++2b"):
            return f"-std={s}"
    return "-std=c++17"


def build_library(generated: str, flags: list[str], checked: bool, warnings: bool) -> BuiltLibrary:
    """Compile ``generated`` (C++ from :mod:`.source`) into a shared library.

    Raises :class:`CompileFailed` with g++'s log on error.
    """
    exe = _require_compiler()
    cmd_flags = list(BASE_FLAGS) + list(flags)
    if checked:
        cmd_flags = [f for f in cmd_flags if f != "-O2"] + ["-O1", *CHECKED_FLAGS]
    if not warnings:
        cmd_flags.append("-w")
    key_src = "\n".join([simulator_fingerprint(), " ".join(cmd_flags), generated])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:24]
    target = cache_dir() / f"k-{key}.so"
    if target.exists():
        return BuiltLibrary(target, "", True)
    src = cache_dir() / f"k-{key}.cpp"
    src.write_text(generated)
    cmd = [exe, *cmd_flags, "-shared", "-I", str(PRELUDE_DIR), "-x", "c++", str(src),
           "-o", "{out}"]
    proc = _atomic_build(target, cmd, "kernel")
    log = _clean_log(proc.stderr, src)
    if proc.returncode != 0:
        raise CompileFailed(log or f"g++ failed with exit code {proc.returncode}",
                            compiler="g++", line_shift=0)
    return BuiltLibrary(target, log, False)


def _clean_log(log: str, src: Path) -> str:
    """g++'s log without the temporary file's path and the prelude's location."""
    return (log.replace(str(src) + ":", "wbsim_generated:")
               .replace(str(PRELUDE_DIR) + "/", ""))
