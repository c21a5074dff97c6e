"""nvcc: where it is, its version, whether the driver can run what it
builds, and the build itself (cached).

A toolkit newer than the driver is the classic "the provided PTX was
compiled with an unsupported toolchain": the driver cannot JIT-compile PTX
from a newer compiler. Within one major version CUDA's minor version
compatibility runs a newer toolkit's programs on an older driver as long as
no PTX has to be compiled, so the build then embeds only the device's own
machine code (SASS). Across major versions the CUDA runtime itself refuses
("CUDA driver version is insufficient"): only a newer driver or an older
toolkit helps. :func:`check_toolkit` makes that decision.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .. import subprocesses
from ..cache import (DiskCache, dependencies_unchanged, library_files, read_depfile, record_dependencies,
                     relative_folders)
from ..errors import BackendUnavailable

CACHE = DiskCache("programs")
#: Bumped when the way programs are built changes.
BUILD_VERSION = "2"


def find_nvcc() -> str | None:
    """``$WORKBENCH_NVCC``, else ``nvcc`` on the PATH, else the toolkit's
    usual places (``$CUDA_HOME/bin``, ``/usr/local/cuda/bin``)."""
    forced = os.environ.get("WORKBENCH_NVCC")
    if forced:
        return forced if os.access(forced, os.X_OK) else None
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return None


def require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise BackendUnavailable(
            "nvcc is not installed here (not on the PATH, nor in $CUDA_HOME/bin or "
            "/usr/local/cuda/bin): install the CUDA toolkit or set WORKBENCH_NVCC to its nvcc; "
            "or run the program on the CPU simulator with backend='simulator'")
    return nvcc


@functools.lru_cache(maxsize=8)
def nvcc_version(nvcc: str) -> tuple[str, tuple[int, int] | None]:
    """``(the text of nvcc --version, (major, minor))``."""
    try:
        out = subprocesses.run([nvcc, "--version"], text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise BackendUnavailable(f"{nvcc} --version failed: {exc}") from None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return out.strip(), ((int(m.group(1)), int(m.group(2))) if m else None)


def parse_version(text: str | None) -> tuple[int, int] | None:
    """``"13.0"`` -> ``(13, 0)``; None when unknown."""
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class ToolkitCheck:
    """Whether programs built by this toolkit run with this driver.

    ``verdict``: ``"ok"`` (toolkit not newer than the driver), ``"sass-only"``
    (a newer minor version: runs when the program carries the device's own
    machine code and no PTX), ``"incompatible"`` (a newer major version) or
    ``"unknown"`` (a version could not be read). ``message`` says so in words,
    and what to do."""

    toolkit: tuple[int, int] | None
    driver: tuple[int, int] | None
    verdict: str
    message: str

    @property
    def runs(self) -> bool:
        return self.verdict != "incompatible"


def _v(version) -> str:
    return f"{version[0]}.{version[1]}"


def check_toolkit(toolkit: tuple[int, int] | None, driver: tuple[int, int] | None) -> ToolkitCheck:
    """The decision for a toolkit (nvcc) version and the driver's CUDA version."""
    if toolkit is None or driver is None:
        return ToolkitCheck(toolkit, driver, "unknown",
                            "the toolkit's or the driver's CUDA version is unknown; "
                            "not checked whether they fit")
    if toolkit <= driver:
        return ToolkitCheck(toolkit, driver, "ok",
                            f"toolkit {_v(toolkit)} with a driver for CUDA {_v(driver)}")
    if toolkit[0] == driver[0]:
        return ToolkitCheck(toolkit, driver, "sass-only", (
            f"the toolkit (nvcc {_v(toolkit)}) is newer than the driver (CUDA {_v(driver)}): the "
            "driver cannot compile this toolkit's PTX (\"the provided PTX was compiled with an "
            "unsupported toolchain\"), so the program is built with the device's machine code "
            "only (-gencode arch=compute_XY,code=sm_XY), which CUDA's minor version "
            "compatibility runs. To use every feature of the toolkit, update the driver."))
    return ToolkitCheck(toolkit, driver, "incompatible", (
        f"the toolkit (nvcc {_v(toolkit)}) is newer than the driver, which supports CUDA "
        f"{_v(driver)} only: programs it builds cannot run here (\"CUDA driver version is "
        "insufficient for CUDA runtime version\"; building for an older architecture or PTX does "
        f"not help). Update the NVIDIA driver to one for CUDA {toolkit[0]}.x, or use a toolkit of "
        f"CUDA {_v(driver)} or older (set WORKBENCH_NVCC to its nvcc)."))


def arch_args(cc: tuple[int, int], sass_only: bool) -> list[str]:
    """nvcc's architecture options for a device of compute capability ``cc``."""
    arch = f"{cc[0]}{cc[1]}"
    if sass_only:
        return ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    return [f"-arch=sm_{arch}"]


@dataclass
class NvccBinary:
    path: Path
    log: str
    cache_hit: bool
    command: list[str]


class NvccFailed(Exception):
    """nvcc's log (file names relative to the build) and the command."""

    def __init__(self, log: str, command: list[str]):
        self.log = log
        self.command = command
        super().__init__(log)


def host_compiler(args: Sequence[str]) -> str:
    """The host compiler nvcc uses: ``-ccbin``/``--compiler-bindir`` in
    ``args``, else ``$NVCC_CCBIN``, else ``g++``."""
    args = list(args)
    for i, a in enumerate(args):
        if a in ("-ccbin", "--compiler-bindir") and i + 1 < len(args):
            return args[i + 1]
        for flag in ("-ccbin=", "--compiler-bindir="):
            if a.startswith(flag):
                return a[len(flag):]
    return os.environ.get("NVCC_CCBIN") or "g++"


@functools.lru_cache(maxsize=8)
def _compiler_version(compiler: str) -> str:
    """The first line of ``compiler --version`` (empty when it cannot say)."""
    exe = compiler if os.path.isabs(compiler) else (shutil.which(compiler) or compiler)
    if os.path.isdir(exe):  # -ccbin names a folder: its g++
        exe = os.path.join(exe, "g++")
    try:
        out = subprocesses.run([exe, "--version"], text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{exe}: {out.strip().splitlines()[0] if out.strip() else ''}"


def build_with_nvcc(nvcc: str, files: Mapping[str, str], sources: Sequence[str], args: Sequence[str],
                    timeout_s: float = 600) -> NvccBinary:
    """Compile and link ``sources`` (names among ``files``, which are all
    written to one folder so that they include each other) with ``args``;
    cached by the files, the arguments, nvcc's and the host compiler's
    versions (and the current folder where an option names a relative one),
    and used from the cache while the headers it included from elsewhere and
    the libraries it linked from ``-L`` folders are unchanged."""
    version_text, _ = nvcc_version(nvcc)
    h = hashlib.sha256()
    where = os.getcwd() if relative_folders(args) else ""
    for part in (BUILD_VERSION, version_text, _compiler_version(host_compiler(args)), where,
                 "\0".join(args), "\0".join(sources)):
        h.update(part.encode() + b"\n")
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    key = h.hexdigest()[:24]
    target = CACHE.path(f"nvcc-{key}")
    if target.exists() and dependencies_unchanged(target):
        return NvccBinary(target, "", True, [])
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="build.") as tmp:
        for name, text in files.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        out = Path(tmp) / "program"
        depfile = Path(tmp) / "program.d"
        sources_at = [str(Path(tmp) / s) for s in sources]
        # nvcc -MD writes one rule for the last source only: with several, -M passes follow
        deps_args = ["-MD", "-MF", str(depfile)] if len(sources) == 1 else []
        command = [nvcc, *args, *deps_args, "-o", str(out), *sources_at]
        try:
            proc = subprocesses.run(command, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise NvccFailed(f"nvcc did not finish within {timeout_s:g} s", command) from None
        log = (proc.stdout + proc.stderr).replace(tmp + "/", "")
        shown = [c.replace(tmp + "/", "") for c in command[:-len(sources)] if c not in deps_args]
        shown += list(sources)
        shown[shown.index(str(out).replace(tmp + "/", ""))] = str(target)
        if proc.returncode != 0:
            raise NvccFailed(log or f"nvcc failed with exit code {proc.returncode}", shown)
        deps = read_depfile(depfile)
        if len(sources) > 1:
            compile_args = [a for a in args if not a.startswith(("-l", "-L"))]
            for i, source in enumerate(sources_at):
                one = Path(tmp) / f"source{i}.d"
                try:
                    subprocesses.run([nvcc, *compile_args, "-M", "-MF", str(one), source], text=True,
                                     timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    pass
                deps += read_depfile(one)
        record_dependencies(target, [*deps, *library_files(args)], exclude=tmp)
        os.replace(out, target)
    return NvccBinary(target, log.strip(), False, shown)
