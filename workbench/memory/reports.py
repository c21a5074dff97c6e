"""Reports over what the tracker recorded: live allocations by line, leaks
by cell, the per-cell table, the timeline and its plot.

Each report is built as plain rows (dicts of Python values: :func:`live_rows`,
:func:`leak_rows`, :meth:`CellUsage.records`, :meth:`Tracker.events
<workbench.memory.tracker.Tracker.events>`); the DataFrames are made from
those rows, and the panels read the rows themselves.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import NameNotFound
from ..present.figures import figure_axes, legend_outside
from ..present.na import NA
from ..present.tables import html_table, pandas
from ..present.units import format_bytes
from . import sources
from .holders import holder_names, summarize
from .kinds import registry as kind_registry

LIVE_COLUMNS = ["line", "code", "bytes", "count", "cells", "held_by", "stack", "kind"]
LEAK_COLUMNS = ["cell", "line", "code", "bytes", "count", "held_by"]
TIMELINE_COLUMNS = ["time", "in_use", "reserved", "event", "size", "cell"]
UNTRACKED = "(allocated before tracking started)"


def _site_key(record):
    return record.frames[0] if record.frames else None


def _describe(frames) -> tuple[str, str, str]:
    """``(location, code, stack)`` of an allocation's user frames."""
    sites = sources.resolve(frames)
    if not sites:
        return "(no user code on the stack)", "", ""
    return sites[0].location, sites[0].text, " <- ".join(s.location for s in sites)


@dataclass
class LineGroup:
    """Live allocations made by one source line."""

    frames: tuple
    bytes: int = 0
    count: int = 0
    cells: set = field(default_factory=set)
    held_by: list = field(default_factory=list)
    kind: str = "device"            # device, pinned or managed (memory/kinds.py)

    @property
    def site(self) -> sources.SourceSite:
        return (sources.resolve(self.frames) or (sources.UNKNOWN_SITE,))[0]


def group_by_line(tracker, backend) -> list[LineGroup]:
    """Live allocations grouped by allocating line, largest first, with the
    names of the variables holding them."""
    holders = holder_names(backend, tracker)
    kinds = kind_registry()
    groups: dict = {}

    def add(ptr, size, cell, frames, kind):
        key = (frames[0] if frames else None, kind)
        group = groups.get(key)
        if group is None:
            group = groups[key] = LineGroup(frames, kind=kind)
        group.bytes += size
        group.count += 1
        if cell is not None:
            group.cells.add(cell)
        group.held_by += [n for n in holders.get(ptr, []) if n not in group.held_by]

    for record in tracker.allocations():
        add(record.ptr, record.size, record.cell, record.frames,
            kinds.kind_of(record.ptr) or "device")
    live = tracker.live
    for ptr, kind, nbytes, _device, cell, _t, frames in kinds.entries():
        if ptr not in live:  # pinned host arrays; managed ones outside the pool (GPU)
            add(ptr, nbytes, cell, frames, kind)
    return sorted(groups.values(), key=lambda g: -g.bytes)


def live_rows(tracker, backend) -> list[dict]:
    """Live allocations grouped by allocating line, largest first: one dict
    per line with the keys of :data:`LIVE_COLUMNS`. Memory in use from
    before tracking started is one row of its own (``count`` None)."""
    rows = []
    for group in group_by_line(tracker, backend):
        location, code, stack = _describe(group.frames)
        rows.append({"line": location, "code": code, "bytes": group.bytes,
                     "count": group.count, "cells": ", ".join(map(str, sorted(group.cells))),
                     "held_by": summarize(group.held_by), "stack": stack, "kind": group.kind})
    if tracker.untracked_bytes:
        rows.append({"line": UNTRACKED, "code": "", "bytes": tracker.untracked_bytes,
                     "count": None, "cells": "", "held_by": "", "stack": "", "kind": "device"})
    rows.sort(key=lambda row: -row["bytes"])   # stable: equal sizes keep their order
    return rows


def live_table(tracker, backend):
    """:func:`live_rows` as a DataFrame."""
    return pandas().DataFrame(live_rows(tracker, backend), columns=LIVE_COLUMNS)


def leak_rows(tracker, backend, since) -> list[dict]:
    """Allocations made by cells ``since`` and later (None: every cell) and
    never freed, by cell and line: one dict per group with the keys of
    :data:`LEAK_COLUMNS`, by cell (outside a cell first), then largest first."""
    holders = holder_names(backend, tracker)
    groups: dict = {}
    for record in tracker.allocations():
        if since is not None and (record.cell is None or record.cell < since):
            continue
        group = groups.setdefault((record.cell, _site_key(record)), [record.frames, 0, 0, []])
        group[1] += record.size
        group[2] += 1
        group[3] += holders.get(record.ptr, [])
    rows = []
    for (cell, _), (frames, nbytes, count, names) in groups.items():
        location, code, _ = _describe(frames)
        rows.append({"cell": cell, "line": location, "code": code, "bytes": nbytes,
                     "count": count, "held_by": summarize(list(dict.fromkeys(names)))})
    rows.sort(key=lambda row: (row["cell"] is not None, row["cell"] or 0, -row["bytes"]))
    return rows


def leak_table(tracker, backend, since):
    """:func:`leak_rows` as a DataFrame."""
    return pandas().DataFrame(leak_rows(tracker, backend, since), columns=LEAK_COLUMNS)


@dataclass(frozen=True)
class CellRow:
    """What one cell did: bytes allocated, freed, still alive, net change, peak."""

    cell: int | None
    allocated: int
    freed: int
    alive: int
    net: int | None        # in use after the cell - before it (None while it runs)
    peak: int
    allocations: int
    frees: int


class CellUsage:
    """Per-cell device memory for the session (``wb.memory.per_cell()``)."""

    COLUMNS = ("cell", "allocated", "freed", "alive", "net", "peak", "allocations", "frees")

    def __init__(self, rows: list[CellRow]):
        self.rows = rows

    @classmethod
    def from_tracker(cls, tracker, all_cells: bool = False) -> "CellUsage":
        rows = []
        for counts in tracker.cell_counts():
            if not all_cells and not (counts.n_allocs or counts.n_frees):
                continue
            net = (counts.in_use_after - counts.in_use_before
                   if counts.in_use_after is not None else None)
            rows.append(CellRow(counts.cell, counts.allocated, counts.freed, counts.alive,
                                net, counts.peak, counts.n_allocs, counts.n_frees))
        rows.sort(key=lambda r: (r.cell is not None, r.cell or 0))
        return cls(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, cell) -> CellRow:
        """The row of execution count ``cell``."""
        for row in self.rows:
            if row.cell == cell:
                return row
        raise NameNotFound(f"no memory activity recorded for cell {cell!r}")

    def _cells(self) -> list[list[str]]:
        def signed(n):
            return NA if n is None else ("+" if n > 0 else "") + format_bytes(n)
        return [["-" if r.cell is None else str(r.cell), format_bytes(r.allocated),
                 format_bytes(r.freed), format_bytes(r.alive), signed(r.net),
                 format_bytes(r.peak), str(r.allocations), str(r.frees)] for r in self.rows]

    def __repr__(self) -> str:
        if not self.rows:
            return "Per-cell device memory: no allocations recorded (is tracking on?)"
        table = [list(self.COLUMNS)] + self._cells()
        widths = [max(len(row[i]) for row in table) for i in range(len(self.COLUMNS))]
        lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in table]
        return "Per-cell device memory:\n" + "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(self._cells(), self.COLUMNS, caption="Per-cell device memory",
                          align=("right",) * len(self.COLUMNS))

    def records(self) -> list[dict]:
        """One dict per cell with the keys of :attr:`COLUMNS` (bytes as integers,
        ``cell`` None outside a cell, ``net`` None while the cell runs)."""
        return [asdict(row) for row in self.rows]

    def to_pandas(self):
        """:meth:`records` as a DataFrame."""
        return pandas().DataFrame(self.records(), columns=list(self.COLUMNS))


def timeline_table(tracker):
    """Every recorded event: seconds since tracking started, bytes in use and
    reserved after it, what happened, its size and the cell."""
    return pandas().DataFrame(tracker.events(), columns=TIMELINE_COLUMNS)


def plot_timeline(tracker, ax=None):
    """In use and reserved over time, cell starts marked; returns the Figure."""

    events = tracker.events()
    fig, ax = figure_axes(ax, figsize=(8, 3.2))   # a new figure is closed in pyplot: shown once
    peak = max([e[1] for e in events] + [e[2] or 0 for e in events] + [1])
    scale, unit = next((2**p, u) for p, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
                       if peak >= 2**p)
    times = [e[0] for e in events]
    ax.step(times, [e[1] / scale for e in events], where="post", label="in use")
    if any(e[2] is not None for e in events):
        ax.step(times, [(e[2] if e[2] is not None else float("nan")) / scale for e in events],
                where="post", label="reserved (in use + cached)", alpha=0.7)
    starts = [(t, cell) for t, _, _, event, _, cell in events
              if event.startswith("cell ") and event.endswith(" start")]
    for t, _ in starts:
        ax.axvline(t, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("seconds since tracking started")
    ax.set_ylabel(unit)
    ax.set_title(f"Device memory ({tracker.backend.name if tracker.backend else 'no backend'})")
    legend_outside(ax)
    _label_cells(ax, starts)
    return fig


def _label_cells(ax, starts) -> None:
    """``[N]`` at the top of each cell's start line, left out where it would
    touch the label of a later cell (every line stays, the last cell's label
    always shows, and the labels that show never overlap)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: only a plot needs it
    fig = ax.figure
    renderer = (fig.canvas if hasattr(fig.canvas, "get_renderer")
                else FigureCanvasAgg(fig)).get_renderer()
    ax.set_xlim(ax.get_xlim())  # (the limits the labels are placed against stay)
    left = float("inf")
    for t, cell in reversed(starts):
        label = ax.annotate(f"[{cell}]", (t, 1.0), xycoords=("data", "axes fraction"),
                            fontsize=7, color="grey", ha="left", va="top")
        box = label.get_window_extent(renderer)
        if box.x1 > left - 2:
            label.remove()
        else:
            left = box.x0
