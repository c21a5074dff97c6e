"""CUPTI's kernel records collected in C (``native/cupti_records.c``): where
it is found and how it is built.

The C collector needs CUPTI's headers to build (``cupti.h`` and ``cuda.h``,
for the record layouts and constants) and a ``libcupti`` to load at run
time. Both come with the CUDA toolkit (``include``/``lib64``, or
``extras/CUPTI``, or ``targets/<arch>``) and with NVIDIA's wheels
(``nvidia/cu13``, ``nvidia/cuda_cupti``). The library is the one
``cuda.pathfinder`` loads where it is installed (as ``cupti-python`` does),
else the first found next to the headers. Every set of headers found is a
candidate, the library's own release first, and the build takes the first
that compiles. :func:`locate` says what it found or why nothing;
:func:`module` builds once per machine (:mod:`..native_build`);
``WORKBENCH_NATIVE_CUPTI=0`` turns the C collector off (then ``cupti-python``
collects, or events time the launches).
"""
from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

from .. import native_build
from . import NATIVE_DIR

SOURCE = NATIVE_DIR / "cupti_records.c"
SWITCH = "WORKBENCH_NATIVE_CUPTI"
_LIBRARY = re.compile(r"libcupti\.so(\.\d+)*$")


def _roots() -> list[Path]:
    """Folders that may hold CUPTI, most specific first."""
    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for entry in sys.path:
        nvidia = Path(entry or ".", "nvidia")
        if nvidia.is_dir():
            roots += [nvidia / name for name in ("cu13", "cuda_cupti", "cu12")]
    roots.append(Path("/usr/local/cuda"))
    return roots


def _layouts(root: Path):
    """(include folder, library folder) pairs of one root, as toolkits and wheels lay them out."""
    yield root / "include", root / "lib64"
    yield root / "include", root / "lib"
    yield root / "extras" / "CUPTI" / "include", root / "extras" / "CUPTI" / "lib64"
    targets = root / "targets"
    if targets.is_dir():
        for target in sorted(targets.iterdir()):
            yield target / "include", target / "lib"


def _library_in(folder: Path) -> Path | None:
    try:
        found = [p for p in folder.iterdir() if _LIBRARY.match(p.name)]
    except OSError:
        return None
    return min(found, key=lambda p: len(p.name)) if found else None  # libcupti.so, else .so.13


def _pathfinder_library() -> Path | None:
    try:
        from cuda import pathfinder  # lazy: optional (comes with cupti-python)
        return Path(pathfinder.load_nvidia_dynamic_lib("cupti").abs_path)
    except Exception:  # not installed, or no libcupti it can find
        return None


def _has_cupti(include: Path) -> bool:
    return (include / "cupti.h").is_file() and (include / "cupti_activity.h").is_file()


def locate(roots: list[Path] | None = None, library: Path | None = None):
    """``(header sets, libcupti path, None)``, or ``(None, None, why)``: each
    set is the ``-I`` folders of one CUPTI release's headers (with a
    ``cuda.h``), the library's own release first; the build takes the first
    that compiles. ``roots`` and ``library`` replace the search (tests)."""
    found, seen, cuda_h, lib_beside = [], set(), None, None
    for root in _roots() if roots is None else roots:
        for include, libs in _layouts(root):
            if _has_cupti(include) and include.resolve() not in seen:
                found.append(include)
                seen.add(include.resolve())
                lib_beside = lib_beside or (_library_in(libs) or _library_in(include.parent / "lib64")
                                            or _library_in(include.parent / "lib"))
            if cuda_h is None and (include / "cuda.h").is_file():
                cuda_h = include
    if library is None and roots is None:
        library = _pathfinder_library()
    if library is not None:  # (a wheel's library: its own headers, of its own release, first)
        own = library.parent.parent / "include"
        if _has_cupti(own):
            found = [own] + [f for f in found if f.resolve() != own.resolve()]
    if not found:
        return None, None, "no CUPTI headers (cupti.h) in the CUDA toolkit or NVIDIA's wheels"
    sets = [[f] if (f / "cuda.h").is_file() else [f, cuda_h] for f in found
            if (f / "cuda.h").is_file() or cuda_h is not None]
    if not sets:
        return None, None, f"no cuda.h next to CUPTI's headers ({found[0]})"
    library = library or lib_beside
    if library is None:
        return None, None, f"no libcupti next to CUPTI's headers ({found[0]})"
    return sets, library, None


_reason: str | None = None


@functools.lru_cache(maxsize=None)
def module():
    """``(the built _wb_cupti module, libcupti path)``, or ``(None, None)``
    (see :func:`unavailable_reason`)."""
    global _reason
    if os.environ.get(SWITCH, "").strip() == "0":
        _reason = f"{SWITCH}=0"
        return None, None
    try:
        sets, library, _reason = locate()
    except OSError as exc:  # (an unreadable folder on the way)
        sets, _reason = None, f"searching for CUPTI failed ({exc})"
    complaints = []
    for folders in sets or ():
        built, why = native_build.build(
            SOURCE, "_wb_cupti", SWITCH, ("-ldl", "-lpthread"),
            flags=tuple(f"-I{f}" for f in folders), depends=_headers(folders))
        if built is not None:
            _reason = None
            return built, library
        complaints.append(f"with {folders[0]}: {why}")
    if complaints:
        _reason = "; ".join(complaints)
    return None, None


def _headers(folders: list[Path]) -> tuple[Path, ...]:
    """The headers a build of the collector reads (part of its key): CUPTI's and cuda.h."""
    found = sorted(folders[0].glob("cupti*.h"))
    for folder in folders:
        if (folder / "cuda.h").is_file():
            return (*found, folder / "cuda.h")
    return tuple(found)


def failed(reason: str) -> None:
    """The built collector could not start (CUPTI refused): say so from now on."""
    global _reason
    _reason = reason


def unavailable_reason() -> str | None:
    """Why the C collector is not used (None: it is, or was not asked for yet)."""
    return _reason
