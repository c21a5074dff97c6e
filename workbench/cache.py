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

import json
import os
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
