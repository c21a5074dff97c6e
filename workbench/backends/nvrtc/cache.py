"""NVRTC's results on disk, in the workbench's cache (``DiskCache("nvrtc")``).

A cell that includes ``cooperative_groups.h`` takes seconds to compile, so a
result is kept under a hash of source, options, architecture, NVRTC version
and include directories. ``WORKBENCH_NVRTC_CACHE=0`` turns the cache off;
sources with ``#include "..."`` are never cached (their headers may change
unseen), nor sources compiled with extra include paths.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from typing import Sequence

from ...cache import DiskCache
from .headers import BUILTIN_HEADERS

_CACHE_FORMAT = 1
_CACHE = DiskCache("nvrtc")
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"', re.M)


def cacheable(source: str, options) -> bool:
    """Whether NVRTC's result for ``source`` compiled with ``options``
    (:class:`~workbench.backends.contract.CompileOptions`) may be cached."""
    if os.environ.get("WORKBENCH_NVRTC_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if _QUOTED_INCLUDE.search(source):
        return False
    return not any(o.startswith(("-I", "--include-path")) for o in options.extra)


def cache_key(source: str, flags: Sequence[str], names: Sequence[str], version: str | None,
              arch: str) -> str:
    """The hash a compile's result is stored under."""
    text = json.dumps([_CACHE_FORMAT, version, arch, source, list(flags), list(names),
                       BUILTIN_HEADERS], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def read(key: str):
    """``(ok, log, ptx, cubin, lowered_names)`` stored under ``key``, or None."""
    record = _CACHE.get_json(key)
    try:
        cubin = base64.b64decode(record["cubin"]) if record["cubin"] else None
        return record["ok"], record["log"], record["ptx"], cubin, record["lowered"]
    except (ValueError, KeyError, TypeError):  # absent (None) or not a record of this format
        return None


def write(key: str, ok: bool, log: str, ptx: str, cubin: bytes | None, lowered: dict) -> None:
    """Store one compile's outcome under ``key`` (a failure too: it fails again the same way)."""
    _CACHE.put_json(key, {"ok": ok, "log": log, "ptx": ptx, "lowered": lowered,
                          "cubin": base64.b64encode(cubin).decode() if cubin else None})


def cache_dir() -> str:
    """Where NVRTC results are cached: ``$WORKBENCH_CACHE_DIR/nvrtc`` or the
    user's cache folder (``~/.cache/cuda-workbench/nvrtc`` on Linux)."""
    return str(_CACHE.folder)


def clear_cache() -> int:
    """Delete every cached NVRTC result; returns how many were removed."""
    return _CACHE.clear()
