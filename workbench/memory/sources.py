"""Where an allocation came from: a short Python stack cut to the user's code.

:func:`capture` runs on every tracked allocation, so it only walks frames
(``sys._getframe``) and keeps ``(code, instruction offset)`` pairs (on the GPU
the C allocator of ``backends/gpu/native/allocations.c`` makes the same walk, with
the same classification cache, in C); everything readable
(file names, notebook cells, source text) is worked out later by
:func:`resolve`, only for the allocations someone looks at.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from typing import Callable

_getframe = sys._getframe

#: How many user frames an allocation keeps (the allocating line first).
DEPTH = 3

# Installed packages (site-packages, dist-packages) are never "the user's
# line": their frames are skipped. Those below are the machinery that runs user
# code (notebook kernel, test runner): the walk stops there, since nothing
# below it is the user's.
_DRIVER_PACKAGES = frozenset({
    "IPython", "ipykernel", "tornado", "nbclient", "nbval", "_pytest", "pytest", "pluggy",
})
_DRIVER_STDLIB = frozenset({"asyncio", "runpy.py", "threading.py", "concurrent"})
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_INSTALLED_DIRS = tuple(os.sep + name + os.sep for name in ("site-packages", "dist-packages"))

USER, LIBRARY, DRIVER = 0, 1, 2   # USER must stay 0 (capture tests `not kind`)
_kind_by_file: dict = {}   # file name -> USER / LIBRARY / DRIVER (str hashes are cached;
                           # code objects hash their whole contents on every look-up)
_library_dirs: tuple[str, ...] | None = None
_cell_resolver: Callable[[str], int | None] | None = None


def _library_roots() -> tuple[str, ...]:
    global _library_dirs
    if _library_dirs is None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # workbench/
        paths = sysconfig.get_paths()
        roots = [here + os.sep]
        for key in ("stdlib", "platstdlib"):
            if paths.get(key):
                roots += [os.path.realpath(paths[key]) + os.sep, paths[key] + os.sep]
        _library_dirs = tuple(dict.fromkeys(roots))
    return _library_dirs


def kinds_by_file() -> dict:
    """The cache :func:`capture` classifies frames with (file name -> USER,
    LIBRARY or DRIVER), shared with a backend that captures frames in C."""
    return _kind_by_file


def frame_kind(filename: str) -> int:
    """USER for code the user wrote, LIBRARY for the workbench, the standard
    library and every installed package (skipped), DRIVER for the notebook
    kernel, event loop and test runner (the walk stops)."""
    if filename.startswith("<frozen"):
        return LIBRARY
    for installed in _INSTALLED_DIRS:
        cut = filename.find(installed)
        if cut >= 0:
            package = filename[cut + len(installed):].split(os.sep, 1)[0]
            if package in _DRIVER_PACKAGES:
                return DRIVER
            # a notebook cell's code is the user's wherever its file lies
            return USER if cell_of_file(filename) is not None else LIBRARY
    for root in _library_roots():
        if filename.startswith(root):
            first = filename[len(root):].split(os.sep, 1)[0]
            return DRIVER if first in _DRIVER_STDLIB else LIBRARY
    return USER


def is_library_file(filename: str) -> bool:
    """True for frames the user did not write (see :func:`frame_kind`)."""
    return frame_kind(filename) != USER


def capture(skip: int = 2, depth: int = DEPTH) -> tuple:
    """The innermost ``depth`` user frames as ``((code, instruction offset), ...)``.

    ``skip`` frames above the caller are ignored outright (the allocation
    callbacks themselves). Runs on every tracked allocation, so it only walks
    frames: no strings are built, no frame objects are kept (they would keep
    the arrays in their locals alive), each file is classified once, and the
    walk stops at the ``depth``-th user frame or at the notebook kernel.
    """
    try:
        frame = _getframe(skip)
    except ValueError:
        return ()
    kinds = _kind_by_file
    found = ()
    while frame is not None:
        code = frame.f_code
        kind = kinds.get(code.co_filename)
        if kind is None:
            kind = kinds[code.co_filename] = frame_kind(code.co_filename)
        if not kind:   # USER; the line is found later: f_lineno is slow
            found += ((code, frame.f_lasti),)
            if len(found) == depth:
                return found
        elif kind == DRIVER:
            return found
        frame = frame.f_back
    return found


def set_cell_resolver(resolver: Callable[[str], int | None] | None) -> None:
    """Install how to map a code file name to a notebook execution count
    (the IPython layer installs one; the core imports no IPython)."""
    global _cell_resolver
    _cell_resolver = resolver


def cell_of_file(filename: str) -> int | None:
    """The execution count whose cell ``filename`` is, when known."""
    match = _IPYTHON_INPUT.match(filename)
    if match:
        return int(match.group(1))
    if _cell_resolver is not None:
        try:
            return _cell_resolver(filename)
        except Exception:  # a resolver must never break a report
            return None
    return None


@dataclass(frozen=True)
class SourceSite:
    """One line of user code: file, line, function, notebook cell and text."""

    filename: str
    line: int | None
    function: str
    cell: int | None = None
    text: str = ""

    @property
    def location(self) -> str:
        """``"In [3] line 2"`` for a notebook cell, ``"file.py:12 in f()"`` otherwise."""
        if self.cell is not None:
            where = f"In [{self.cell}] line {self.line}"
        else:
            where = f"{os.path.basename(self.filename)}:{self.line}"
        if not self.function.startswith("<"):  # not <module>, <cell line: N>, <lambda>
            where += f" in {self.function}()"
        return where

    def __str__(self) -> str:
        return f"{self.location}: {self.text}" if self.text else self.location


UNKNOWN_SITE = SourceSite("?", None, "?", None, "")


def line_of(code, offset: int) -> int | None:
    """The source line of the instruction at byte ``offset`` of ``code``."""
    for start, end, line in code.co_lines():
        if start <= offset < end:
            return line
    return None


def resolve(frames: tuple) -> tuple[SourceSite, ...]:
    """Readable sites for the ``(code, offset)`` pairs :func:`capture` kept."""
    sites = []
    for code, offset in frames:
        filename = code.co_filename
        line = line_of(code, offset)
        text = linecache.getline(filename, line).strip() if line else ""
        sites.append(SourceSite(filename, line, code.co_name, cell_of_file(filename), text))
    return tuple(sites)
