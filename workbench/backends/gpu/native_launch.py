"""The GPU backend's launcher in C (``native/launch.c``), built once per
machine with the system's C compiler and kept in the disk cache.

A ``wb.Kernel`` call spends a few microseconds of Python between its checks
and ``cuLaunchKernel``: packing the argument block, reading each array's
address, calling the driver binding. The C launcher does those steps in one
call, and for the common call (arguments of exactly the kinds the
parameters take, a configuration seen before, the current stream) its
``FastCall`` runs the whole of ``wb.Kernel.__call__``, checks to the timing
log's record, with no Python frame between. It is built by
:mod:`..native_build`, which needs a C compiler (``$CC``, else ``cc``) and
Python's headers; where either is missing, where
libcuda has no ``cuLaunchKernel``, or with ``WORKBENCH_NATIVE_LAUNCH=0``, the
backend launches from Python as before (:func:`unavailable_reason` says
why). The build is keyed by the source, the Python version and the compiler,
so a change to any of them builds again.
"""
from __future__ import annotations

import functools

from .. import native_build
from . import NATIVE_DIR

SOURCE = NATIVE_DIR / "launch.c"
#: The parameter codes launch.c packs: 'P' (a pointer) and these struct formats.
CODES = frozenset("PfdbBhHiIqQ?")
#: The most parameters launch.c packs (its MAX_PARAMS): kernels with more launch from Python.
MAX_PARAMS = 64

_reason: str | None = None


@functools.lru_cache(maxsize=None)
def module():
    """The built ``_wb_launch`` module, or None (see :func:`unavailable_reason`)."""
    global _reason
    built, _reason = native_build.build(SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH", ("-ldl",))
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


def fast_call_type():
    """The C ``FastCall`` type (a whole ``wb.Kernel`` call in one C call; see
    ``native/launch.c`` for what it takes), or None where the C launcher
    cannot run here."""
    return module().FastCall if launch_function() is not None else None


def unavailable_reason() -> str | None:
    """Why launches go through Python (None: the C launcher is used, or was not asked for yet)."""
    return _reason
