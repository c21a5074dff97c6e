"""The workbench's disk caches, in one place.

Every cache lives under one root: ``$WORKBENCH_CACHE_DIR`` when set, else the
platform's user cache folder for ``cuda-workbench`` (``platformdirs``; on
Linux ``~/.cache/cuda-workbench``). Each user of the cache names its own
folder (``DiskCache("nvrtc")``). Writes are atomic (a temporary file in the
same folder, then ``os.replace``), so a crash or two processes writing at
once never leave a half-written entry; a cache that cannot be written (a
read-only home) only costs speed, it never fails the caller.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import platformdirs


def cache_root() -> Path:
    """The folder every workbench cache lives under."""
    env = os.environ.get("WORKBENCH_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("cuda-workbench", appauthor=False))


def write_atomic(path: Path, data: bytes | str) -> bool:
    """Write ``data`` to ``path`` so that readers see the old file or the new
    one, never a part; creates the folder. Returns False when it could not."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return True
    except OSError:
        return False


class DiskCache:
    """One named folder of the cache: entries are files named by a key.

    ``get_json``/``put_json`` store one JSON document per key (keys are
    hashes: the first two characters make a sub-folder, as git does, so no
    folder grows too large); :meth:`path` gives a file for callers that need
    one on disk (a shared library to load, for instance) and write it with
    :func:`write_atomic` or their own atomic build.
    """

    def __init__(self, name: str):
        self.name = name

    @property
    def folder(self) -> Path:
        return cache_root() / self.name  # resolved on each use: tests change the root

    def path(self, filename: str) -> Path:
        """The path of ``filename`` in this cache's folder (folder created)."""
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        return folder / filename

    def _json_path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get_json(self, key: str) -> Any | None:
        """The document stored under ``key``, or None (absent or unreadable)."""
        try:
            return json.loads(self._json_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put_json(self, key: str, value: Any) -> bool:
        """Store ``value`` (JSON-serialisable) under ``key``."""
        return write_atomic(self._json_path(key), json.dumps(value))

    def clear(self) -> int:
        """Delete every entry of this cache; returns how many files were removed."""
        removed = 0
        for path in self.folder.rglob("*"):
            if path.is_file():
                try:
                    path.unlink()
                    removed += 1
                except OSError:
                    pass
        return removed


# -- what a cached build depends on beyond its key ------------------------------------------------
# A build's key holds its own files and options; the headers it includes from elsewhere (-I
# folders, the toolkit) and the libraries it links are recorded beside the binary with their
# hashes, and a cached binary is used only while they are unchanged.

def read_depfile(path) -> list[str]:
    """The prerequisites of the make rules in ``path`` (written by ``g++
    -MD -MF path`` or ``nvcc -MD -MF path``), as written."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    found: list[str] = []
    for rule in text.replace("\\\n", " ").splitlines():
        _, colon, prerequisites = rule.partition(":")
        if not colon:
            continue
        for token in re.split(r"(?<!\\)\s+", prerequisites.strip()):
            if token:
                found.append(token.replace("\\ ", " ").replace("$$", "$"))
    return found


def library_files(args) -> list[str]:
    """The library files that ``-lNAME`` options find in the ``-L`` folders
    of ``args`` (a compiler's or linker's arguments); the system's own
    libraries are left to the compiler's version."""
    args = list(args)
    folders, names = [], []
    for i, a in enumerate(args):
        for flag, into in (("-L", folders), ("-l", names)):
            if a == flag and i + 1 < len(args):
                into.append(args[i + 1])
            elif a.startswith(flag) and len(a) > 2:
                into.append(a[2:])
    found = []
    for name in names:
        for folder in folders:
            for candidate in (f"lib{name}.so", f"lib{name}.a", name[1:] if name.startswith(":") else ""):
                path = os.path.join(folder, candidate) if candidate else ""
                if path and os.path.isfile(path):
                    found.append(path)
                    break
    return found


def relative_folders(args) -> bool:
    """Whether a compiler's ``args`` name a folder relative to the current
    one (``-I``, ``-L``, ``-isystem``): the build then depends on where it runs."""
    args = list(args)
    for i, a in enumerate(args):
        for flag in ("-I", "-L", "-isystem"):
            value = args[i + 1] if a == flag and i + 1 < len(args) else (
                a[len(flag):] if a.startswith(flag) and len(a) > len(flag) else None)
            if value is not None and not os.path.isabs(value) and not value.startswith("-"):
                return True
    return False


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _dependencies_path(target: Path) -> Path:
    return Path(target).with_name(Path(target).name + ".deps.json")


def record_dependencies(target: Path, paths, exclude: str | None = None) -> bool:
    """Store the hashes of ``paths`` (but those under the folder ``exclude``:
    a build's own files, in its key) beside the cached ``target``; call it
    before ``target`` itself is written."""
    prefix = None if exclude is None else os.path.join(os.path.abspath(exclude), "")
    hashes = {}
    for p in paths:
        full = os.path.abspath(p)
        if prefix is None or not full.startswith(prefix):
            hashes[full] = _digest(full)
    return write_atomic(_dependencies_path(target), json.dumps(hashes, sort_keys=True))


def dependencies_unchanged(target: Path) -> bool:
    """Whether every file recorded for ``target`` still has its hash (False
    when nothing was recorded)."""
    try:
        recorded = json.loads(_dependencies_path(target).read_text())
    except (OSError, ValueError):
        return False
    return all(_digest(p) == h for p, h in recorded.items())
