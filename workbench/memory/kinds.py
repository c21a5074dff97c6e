"""Memory kinds: page-locked (pinned) host arrays and managed (unified) arrays.

``wb.pinned`` and ``wb.managed`` register each array they make here, with its
size, device, cell and allocating line; the entry goes when the array (and
every view of it) is garbage. The device pool's own allocations stay with the
:mod:`.tracker`; :func:`workbench.memory.kinds` sums both by kind, and the
live table (``wb.memory.live()``) and the memory panel carry a ``kind``
column. (On the simulator a managed array also lies in the device arena, so
the tracker sees it too: it is counted once, as managed.)
"""
from __future__ import annotations

import threading
import time
import weakref

from ..errors import NameNotFound
from ..present.tables import html_table, pandas
from ..present.units import format_bytes
from ..runtime.session import session as _session
from . import sources

KINDS = ("device", "pinned", "managed")


class KindRegistry:
    """Live pinned and managed arrays: address -> entry."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live: dict[int, tuple] = {}  # ptr -> (kind, nbytes, device, cell, time, frames)

    def register(self, array, ptr: int, kind: str, nbytes: int, device: int) -> None:
        """Record ``array`` (of ``kind``) until it is garbage."""
        cell = _session().cell
        entry = (kind, int(nbytes), int(device), cell, time.time(), sources.capture())
        with self._lock:
            self._live[ptr] = entry
        weakref.finalize(array, self._drop, ptr, entry)

    def _drop(self, ptr: int, entry: tuple) -> None:
        with self._lock:
            if self._live.get(ptr) is entry:
                del self._live[ptr]

    def entries(self) -> list[tuple]:
        """``(ptr, kind, nbytes, device, cell, time, frames)`` of every live array."""
        with self._lock:
            return [(ptr, *entry) for ptr, entry in self._live.items()]

    def kind_of(self, ptr: int) -> str | None:
        entry = self._live.get(ptr)
        return entry[0] if entry is not None else None

    def is_pinned(self, host_array) -> bool:
        """True when ``host_array``'s memory lies in a live pinned array."""
        try:
            start = host_array.__array_interface__["data"][0]
        except (AttributeError, KeyError, TypeError):
            return False
        end = start + host_array.nbytes
        with self._lock:
            return any(kind == "pinned" and ptr <= start and end <= ptr + nbytes
                       for ptr, (kind, nbytes, *_rest) in self._live.items())

    def totals(self) -> dict[str, list[int]]:
        """kind -> [arrays, bytes] of the live registered arrays."""
        out = {k: [0, 0] for k in KINDS[1:]}
        for _ptr, kind, nbytes, *_rest in self.entries():
            out[kind][0] += 1
            out[kind][1] += nbytes
        return out


_REGISTRY = KindRegistry()


def registry() -> KindRegistry:
    """The process's registry of pinned and managed arrays."""
    return _REGISTRY


class MemoryKinds:
    """Bytes and arrays of each memory kind now (``wb.memory.kinds()``):
    ``device`` (the pool's arrays in use), ``pinned`` (page-locked host arrays),
    ``managed`` (unified arrays)."""

    COLUMNS = ("kind", "arrays", "bytes", "where")
    _WHERE = {"device": "device memory (the pool)", "pinned": "page-locked host memory",
              "managed": "unified memory (host and devices)"}

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __getitem__(self, kind: str) -> dict:
        for row in self.rows:
            if row["kind"] == kind:
                return row
        raise NameNotFound(f"no memory kind {kind!r}; one of {', '.join(KINDS)}")

    def records(self) -> list[dict]:
        return [dict(r) for r in self.rows]

    def to_pandas(self):
        return pandas().DataFrame(self.records(), columns=list(self.COLUMNS))

    def _cells(self) -> list[list[str]]:
        return [[r["kind"], "—" if r["arrays"] is None else str(r["arrays"]),
                 format_bytes(r["bytes"]), r["where"]] for r in self.rows]

    def __repr__(self) -> str:
        lines = ["Memory by kind:"]
        lines += [f"  {c[0]:<8} {c[1]:>6} arrays {c[2]:>12}  ({c[3]})" for c in self._cells()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(self._cells(), ["kind", "arrays", "bytes", "where"],
                          title="Memory by kind", align=["left", "right", "right", "left"])


def memory_kinds(tracker, backend) -> MemoryKinds:
    """Device, pinned and managed bytes now."""
    totals = registry().totals()
    tracked = tracker.enabled and tracker.backend is backend
    if tracked:
        live = tracker.live   # counted once: each read of the property counts pending events
        managed = [e for e in registry().entries() if e[1] == "managed" and e[0] in live]
        in_use, arrays = tracker.in_use, max(0, len(live) - len(managed))
        managed_in_pool = sum(e[2] for e in managed)
    else:
        try:
            in_use = int(backend.pool_stats().get("used_bytes") or 0)
        except Exception:
            in_use = 0
        arrays = None
        managed_in_pool = totals["managed"][1] if backend.managed_in_pool else 0
    rows = [{"kind": "device", "arrays": arrays, "bytes": max(0, in_use - managed_in_pool),
             "where": MemoryKinds._WHERE["device"]}]
    for kind in KINDS[1:]:
        count, nbytes = totals[kind]
        rows.append({"kind": kind, "arrays": count, "bytes": nbytes,
                     "where": MemoryKinds._WHERE[kind]})
    return MemoryKinds(rows)
