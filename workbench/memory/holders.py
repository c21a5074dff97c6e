"""Which user variables hold which allocations (``del big`` advice).

Looks through the notebook's namespace (installed by the IPython layer) and
the innermost user frame's locals and globals, two levels into lists, tuples
and dicts, and IPython's output cache (``Out[5]``).
"""
from __future__ import annotations

import sys
from typing import Callable

from . import sources

_namespace_provider: Callable[[], dict] | None = None
_MAX_ITEMS = 1000   # container entries looked at per level
_DEPTH = 2          # levels into containers: x, x[0], x["k"][0]


def set_namespace_provider(provider: Callable[[], dict] | None) -> None:
    """Install the function returning the notebook's user namespace."""
    global _namespace_provider
    _namespace_provider = provider


def device_address(backend, obj) -> int | None:
    """The device address an array's data starts at, or None for non-arrays."""
    try:
        if not backend.is_device_array(obj):
            return None
        return backend.device_pointer(obj)
    except Exception:  # exotic objects must not break an error message
        return None


def _namespaces() -> list[dict]:
    found = []
    if _namespace_provider is not None:
        try:
            found.append(_namespace_provider())
        except Exception:
            pass
    frame = sys._getframe(1)
    while frame is not None:
        if not sources.is_library_file(frame.f_code.co_filename):
            found += [frame.f_locals, frame.f_globals]
            break
        frame = frame.f_back
    unique = {id(ns): ns for ns in found if isinstance(ns, dict)}
    return list(unique.values())


def _items(name: str, value, depth: int):
    """``(name, value)`` of ``value`` and what it contains, ``depth`` levels
    into lists, tuples and dicts."""
    yield name, value
    if depth == 0:
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value[:_MAX_ITEMS]):
            yield from _items(f"{name}[{i}]", item, depth - 1)
    elif isinstance(value, dict):
        for i, (key, item) in enumerate(value.items()):
            if i >= _MAX_ITEMS:
                break
            yield from _items(f"{name}[{key!r}]", item, depth - 1)


def _named_values(namespace: dict):
    """``(name, value)`` for variables and the items of their containers."""
    for name, value in list(namespace.items()):
        if name == "Out" and isinstance(value, dict):
            for count, out in list(value.items()):
                yield from _items(f"Out[{count}]", out, _DEPTH - 1)
        elif not name.startswith("_"):   # IPython's _, __, _5 ... are Out entries again
            yield from _items(name, value, _DEPTH)


def holder_names(backend, tracker) -> dict[int, list[str]]:
    """Allocation pointer -> names of the variables whose arrays lie in it."""
    holders: dict[int, list[str]] = {}
    if not tracker.live:
        return holders
    find = tracker.address_index()
    for namespace in _namespaces():
        for name, value in _named_values(namespace):
            address = device_address(backend, value)
            if not address:
                continue
            record = find(address)
            # arrays of another backend instance may reuse an address: the data must fit
            if record is not None and address + getattr(value, "nbytes", 0) <= record.ptr + record.size:
                names = holders.setdefault(record.ptr, [])
                if name not in names:
                    names.append(name)
    return holders


def _base(name: str) -> str:
    return name if name.startswith("Out[") else name.split("[", 1)[0]


def summarize(names: list[str], limit: int = 4) -> str:
    """``["ys[0]", "ys[1]", "ys[2]", "x"]`` -> ``"ys[...] (3 items), x"``."""
    by_base: dict[str, list[str]] = {}
    for name in names:
        by_base.setdefault(_base(name), []).append(name)
    parts = []
    for base, members in by_base.items():
        if len(members) > 2:
            parts.append(f"{base}[...] ({len(members)} items)")
        else:
            parts += members
    if len(parts) > limit:
        parts = parts[:limit] + [f"... ({len(parts) - limit} more)"]
    return ", ".join(parts)


def release_statement(names: list[str]) -> str:
    """The statement that drops these references: ``del x, ys`` (whole
    containers: deleting items one by one would shift a list), and
    ``%reset -f out`` for IPython's output cache."""
    variables = list(dict.fromkeys(_base(n) for n in names if not n.startswith("Out[")))
    parts = [f"del {', '.join(variables)}"] if variables else []
    if any(n.startswith("Out[") for n in names):
        parts.append("%reset -f out")
    return "; ".join(parts)
