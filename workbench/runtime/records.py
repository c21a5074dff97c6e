"""The timing log's records: the fields of one launch, copy, memset or graph
launch, and the table :func:`workbench.timings` makes of them.

A record is a plain list (the cheapest thing to build on the launch path),
indexed by the field numbers below; :class:`~workbench.runtime.timing.TimingLog`
writes and reads them. A read record holds its stream's label
(:class:`StreamLabels`), not the stream.
"""
from __future__ import annotations

import datetime as _dt
import weakref

from ..present.tables import pandas

# fields of a launch record (a list, built on the hot path); START and END
# hold the two events, or, timed by CUPTI, the symbol the records name and
# whether it is exact (else a part of the symbol: Numba and Triton kernels);
# DEVICE is the device current when the work was queued (its events' pool);
# T0 holds, until the record is read, what an asynchronous copy must keep
# alive (its arrays), then the start time on the timeline
(KERNEL, GRID, BLOCK, SHARED, CELL, WALL, START, END, MS, BACKEND, LANGUAGE, KIND, STREAM,
 NBYTES, DEVICE, T0) = range(16)
COLUMNS = ["kernel", "grid", "block", "shared_mem", "ms", "cell", "time", "backend", "language",
           "kind", "stream", "device", "bytes", "gbps", "start_ms"]


def cupti_record(name, grid, block, shared_mem, cell, wall, symbol, b, language, stream, device):
    """A launch's record while CUPTI times it (START and END: the symbol its
    activity record names, and whether that is exact). The C call
    (backends/gpu/native/launch.c) makes its records from this one and untracks
    them from the cyclic garbage collector: nothing stored into a kernel
    record may ever refer back to it (numbers, strings, None, tuples of them
    and the launch's stream do not)."""
    return [name, grid, block, shared_mem, cell, wall, symbol or name, symbol is not None, None,
            b.name, language, "kernel", stream, None, device, None]


class StreamLabels:
    """The ``stream`` column's text for backend streams: a stream's name
    (``wb.Stream``), "default", or "other N" (a stream made outside the
    workbench) in the order first seen. Streams are held weakly: the log must
    not keep them alive."""

    def __init__(self):
        self._names: dict = {}  # id(backend stream) -> [weak reference to it, label]

    def name(self, stream, label: str) -> None:
        """Call ``stream`` ``label``."""
        self._names[id(stream)] = [_weak(stream), label]

    def label(self, b, stream) -> str:
        """The label of ``stream`` (a label already: itself), a stream of backend ``b``."""
        if type(stream) is str:
            return stream
        entry = self._names.get(id(stream))
        if entry is not None and entry[0]() is stream:
            return entry[1]
        if b is not None and b.is_default_stream(stream):
            label = "default"
        else:
            label = f"other {sum(1 for e in self._names.values() if e[1].startswith('other ')) + 1}"
        if len(self._names) > 256:  # drop the names of streams that are gone
            self._names = {k: e for k, e in self._names.items() if e[0]() is not None}
        self._names[id(stream)] = [_weak(stream), label]
        return label


def _weak(stream):
    try:
        return weakref.ref(stream)
    except TypeError:  # (a stream type without weak references: held, as before)
        return lambda: stream


def table(rows, stream_label):
    """The records ``rows`` as the DataFrame of :func:`workbench.timings`
    (``stream_label(stream)``: the ``stream`` column's text of a record's stream)."""
    pd = pandas()
    return pd.DataFrame({
        "kernel": [r[KERNEL] for r in rows],
        "grid": [r[GRID] for r in rows],
        "block": [r[BLOCK] for r in rows],
        "shared_mem": [r[SHARED] for r in rows],
        "ms": [r[MS] for r in rows],
        "cell": pd.array([r[CELL] for r in rows], dtype="Int64"),
        "time": pd.to_datetime([_dt.datetime.fromtimestamp(r[WALL]) for r in rows]),
        "backend": [r[BACKEND] for r in rows],
        "language": [r[LANGUAGE] for r in rows],
        "kind": [r[KIND] for r in rows],
        "stream": [stream_label(r[STREAM]) for r in rows],
        "device": pd.array([r[DEVICE] for r in rows], dtype="Int64"),
        "bytes": pd.array([r[NBYTES] for r in rows], dtype="Int64"),
        "gbps": [gbps(r[NBYTES], r[MS]) for r in rows],
        "start_ms": [r[T0] for r in rows],
    }, columns=COLUMNS)


def gbps(nbytes, ms) -> float:
    """Achieved GB/s (10^9 bytes a second) of ``nbytes`` in ``ms``; NaN without both."""
    if not nbytes or not ms or ms != ms or ms <= 0:
        return float("nan")
    return nbytes / ms / 1e6

