"""Reports over what the tracker recorded: live allocations by line, leaks
by cell, the per-cell table, the timeline and its plot."""
from __future__ import annotations

import html
from dataclasses import dataclass, field

from ..present.figures import figure_axes
from . import sources
from .holders import holder_names, summarize
from ..present.units import NA, format_bytes

LIVE_COLUMNS = ["line", "code", "bytes", "count", "cells", "held_by", "stack"]
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

    @property
    def site(self) -> sources.SourceSite:
        return (sources.resolve(self.frames) or (sources.UNKNOWN_SITE,))[0]


def group_by_line(tracker, backend) -> list[LineGroup]:
    """Live allocations grouped by allocating line, largest first, with the
    names of the variables holding them."""
    holders = holder_names(backend, tracker)
    groups: dict = {}
    for record in tracker.allocations():
        group = groups.get(_site_key(record))
        if group is None:
            group = groups[_site_key(record)] = LineGroup(record.frames)
        group.bytes += record.size
        group.count += 1
        if record.cell is not None:
            group.cells.add(record.cell)
        group.held_by += [n for n in holders.get(record.ptr, []) if n not in group.held_by]
    return sorted(groups.values(), key=lambda g: -g.bytes)


def live_table(tracker, backend):
    """Live allocations grouped by allocating line, largest first."""
    import pandas as pd
    rows = []
    for group in group_by_line(tracker, backend):
        location, code, stack = _describe(group.frames)
        rows.append({"line": location, "code": code, "bytes": group.bytes,
                     "count": group.count, "cells": ", ".join(map(str, sorted(group.cells))),
                     "held_by": summarize(group.held_by), "stack": stack})
    if tracker.untracked_bytes:
        rows.append({"line": UNTRACKED, "code": "", "bytes": tracker.untracked_bytes,
                     "count": None, "cells": "", "held_by": "", "stack": ""})
    frame = pd.DataFrame(rows, columns=LIVE_COLUMNS)
    return frame.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)


def leak_table(tracker, backend, since):
    """Allocations made by cells ``since`` and later and never freed, by cell and line."""
    import pandas as pd
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
    frame = pd.DataFrame(rows, columns=LEAK_COLUMNS)
    if rows:
        frame = frame.sort_values(["cell", "bytes"], ascending=[True, False],
                                  na_position="first", kind="stable")
    return frame.reset_index(drop=True)


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
        raise KeyError(f"no memory activity recorded for cell {cell!r}")

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
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join("<tr>" + "".join(f"<td style='text-align:right'>{html.escape(v)}</td>"
                                        for v in row) + "</tr>" for row in self._cells())
        caption = "<caption>Per-cell device memory</caption>"
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_pandas(self):
        """One row per cell, bytes as integers."""
        import pandas as pd
        return pd.DataFrame([r.__dict__ for r in self.rows], columns=list(self.COLUMNS))


def timeline_table(tracker):
    """Every recorded event: seconds since tracking started, bytes in use and
    reserved after it, what happened, its size and the cell."""
    import pandas as pd
    return pd.DataFrame(tracker.events(), columns=TIMELINE_COLUMNS)


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
    for t, _, _, event, _, cell in events:
        if event.startswith("cell ") and event.endswith(" start"):
            ax.axvline(t, color="grey", lw=0.6, ls=":")
            ax.annotate(f"[{cell}]", (t, 1.0), xycoords=("data", "axes fraction"),
                        fontsize=7, color="grey", ha="left", va="top")
    ax.set_xlabel("seconds since tracking started")
    ax.set_ylabel(unit)
    ax.set_title(f"Device memory ({tracker.backend.name if tracker.backend else 'no backend'})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig
