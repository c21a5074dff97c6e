"""Kernels written in other languages, taken by the harness as they come.

A capability package (``workbench.languages``) registers a recogniser and a
wrapper for the kernel objects of its language (a Numba dispatcher, a Triton
``JITFunction``); :func:`as_launchable` gives ``wb.bench``, ``wb.compare``
and ``wb.sweep`` the wrapped kernel, which checks, launches and logs like a
:class:`workbench.Kernel`. The core imports no capability: the registration
runs when the capability is imported (``wb.python_kernel``, ``wb.languages``).
"""
from __future__ import annotations

from typing import Any, Callable

_ADAPTERS: list[tuple[Callable[[Any], bool], Callable[[Any], Any]]] = []


def register_adapter(recognise: Callable[[Any], bool], wrap: Callable[[Any], Any]) -> None:
    """From now on, ``as_launchable(obj)`` is ``wrap(obj)`` where ``recognise(obj)``."""
    if (recognise, wrap) not in _ADAPTERS:
        _ADAPTERS.append((recognise, wrap))


def as_launchable(fn):
    """``fn`` wrapped by the first adapter that recognises it, else ``fn`` itself."""
    for recognise, wrap in _ADAPTERS:
        if recognise(fn):
            return wrap(fn)
    return fn
