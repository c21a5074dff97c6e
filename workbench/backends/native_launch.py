"""The GPU backend's launcher in C (``native/launch.c``), built once per
machine with the system's C compiler and kept in the disk cache.

A ``wb.Kernel`` call spends a few microseconds of Python between its checks
and ``cuLaunchKernel``: packing the argument block, reading each array's
address, calling the driver binding. The C launcher does those steps in one
call. Building it needs a C compiler (``$CC``, else ``cc``) and Python's
headers; where either is missing, where libcuda has no ``cuLaunchKernel``, or
with ``WORKBENCH_NATIVE_LAUNCH=0``, the backend launches from Python as before
(:func:`unavailable_reason` says why). The build is keyed by the source, the
Python version and the compiler, so a change to any of them builds again.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .. import subprocesses
from ..cache import DiskCache

SOURCE = Path(__file__).resolve().parent / "native" / "launch.c"
CACHE = DiskCache("native")
#: The parameter codes launch.c packs: 'P' (a pointer) and these struct formats.
CODES = frozenset("PfdbBhHiIqQ?")
#: The most parameters launch.c packs (its MAX_PARAMS): kernels with more launch from Python.
MAX_PARAMS = 64

_reason: str | None = None


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def _build(cc: str, target: Path) -> str | None:
    """Compile launch.c to ``target``; the compiler's complaint, or None."""
    include = sysconfig.get_paths().get("include") or ""
    if not Path(include, "Python.h").exists():
        return f"Python's headers are not installed (no Python.h in {include})"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / target.name
        try:
            done = subprocesses.run([cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE),
                                     "-o", str(out), "-ldl"], timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{cc} failed to run ({exc})"
        if done.returncode != 0:
            return f"{cc} could not build it: {done.stderr.strip().splitlines()[-1:] or '?'}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(out, target)
    return None


@functools.lru_cache(maxsize=None)
def module():
    """The built ``_wb_launch`` module, or None (see :func:`unavailable_reason`)."""
    global _reason
    if os.environ.get("WORKBENCH_NATIVE_LAUNCH", "").strip() == "0":
        _reason = "WORKBENCH_NATIVE_LAUNCH=0"
        return None
    cc = _compiler()
    if cc is None:
        _reason = "no C compiler (set $CC)"
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + sys.version.encode() + cc.encode()).hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = CACHE.path(f"_wb_launch-{key}{suffix}")
    if not path.exists():
        complaint = _build(cc, path)
        if complaint is not None:
            _reason = complaint
            return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("_wb_launch", str(path))
        spec = importlib.util.spec_from_file_location("_wb_launch", str(path), loader=loader)
        built = importlib.util.module_from_spec(spec)
        loader.exec_module(built)
    except Exception as exc:  # noqa: BLE001 -- a broken cache entry: Python launches instead
        _reason = f"the built launcher did not load ({exc})"
        return None
    return built


def launch_function():
    """``launch(function, codes, args, gx, gy, gz, bx, by, bz, shared, stream)``
    returning a ``CUresult``, or None where the C launcher cannot run here."""
    global _reason
    built = module()
    if built is None:
        return None
    if not built.has_driver():
        _reason = "libcuda has no cuLaunchKernel here"
        return None
    return built.launch


def unavailable_reason() -> str | None:
    """Why launches go through Python (None: the C launcher is used, or was not asked for yet)."""
    return _reason
