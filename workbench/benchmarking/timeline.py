"""``wb.timeline()``: the kernels, copies and graphs of a cell (or a window) on
one lane per stream per device, and how much of the time streams overlapped.

The intervals come from the timing log: each record's start is read from its
events against an anchor event of the same device (the log does this when it
reads the times, never on the launch path), its length is its ``ms``. The
overlap is the fraction of the busy time (some lane busy) during which two or
more lanes were busy at once: 0 for work serialised on one stream, up to 1
when every piece of work ran beside another.
"""
from __future__ import annotations

import datetime as _dt
import numbers
from dataclasses import dataclass

from ..errors import ArgumentTypeError
from ..present.figures import figure_axes
from ..present.tables import html_table, pandas
from ..runtime.records import CELL, DEVICE, KERNEL, KIND, MS, NBYTES, STREAM, T0, WALL
from ..runtime.session import session

#: Colours by kind (matplotlib's tab10).
COLORS = {"kernel": "#1f77b4", "copy": "#ff7f0e", "memset": "#2ca02c", "graph": "#9467bd"}


@dataclass(frozen=True)
class Interval:
    """One piece of work on a lane; times in ms from the timeline's start."""

    lane: str
    name: str
    kind: str
    start: float
    end: float
    device: int = 0
    stream: str = "default"
    nbytes: int | None = None

    @property
    def ms(self) -> float:
        return self.end - self.start


def overlap_stats(intervals) -> tuple[float, float, float]:
    """``(busy_ms, overlapped_ms, span_ms)`` of intervals on several lanes:
    time with at least one lane busy, time with two or more lanes busy (an
    interval overlapping others of its own lane counts once per lane), and
    from the first start to the last end."""
    if not intervals:
        return 0.0, 0.0, 0.0
    edges = []
    for iv in intervals:
        if iv.end > iv.start:
            edges.append((iv.start, 1, iv.lane))
            edges.append((iv.end, -1, iv.lane))
    edges.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same instant
    per_lane: dict = {}
    busy = overlapped = 0.0
    last = None
    for t, step, lane in edges:
        active = sum(1 for n in per_lane.values() if n > 0)
        if last is not None and t > last:
            if active >= 1:
                busy += t - last
            if active >= 2:
                overlapped += t - last
        per_lane[lane] = per_lane.get(lane, 0) + step
        last = t
    span = max(iv.end for iv in intervals) - min(iv.start for iv in intervals)
    return busy, overlapped, span


class Timeline:
    """Work on lanes (one per stream per device) with the overlap achieved.

    ``intervals`` (:class:`Interval`), ``lanes`` (in order of first use),
    ``overlap`` (0 to 1), ``busy_ms``, ``span_ms``; ``plot(ax=None)`` draws the
    Gantt chart, ``to_pandas()`` gives one row per interval.
    """

    COLUMNS = ("lane", "name", "kind", "start_ms", "end_ms", "ms", "device", "stream", "bytes")

    def __init__(self, intervals, simulated: bool = False, title: str = "Timeline"):
        self.intervals = sorted(intervals, key=lambda iv: iv.start)
        self.lanes = list(dict.fromkeys(iv.lane for iv in self.intervals))
        self.busy_ms, self.overlapped_ms, self.span_ms = overlap_stats(self.intervals)
        self.simulated = simulated
        self.title = title

    @property
    def overlap(self) -> float:
        """Fraction of the busy time with two or more lanes busy."""
        return self.overlapped_ms / self.busy_ms if self.busy_ms > 0 else 0.0

    def lane(self, name: str) -> list[Interval]:
        """The intervals of one lane, in time order."""
        return [iv for iv in self.intervals if iv.lane == name]

    def records(self) -> list[dict]:
        return [{"lane": iv.lane, "name": iv.name, "kind": iv.kind, "start_ms": iv.start,
                 "end_ms": iv.end, "ms": iv.ms, "device": iv.device, "stream": iv.stream,
                 "bytes": iv.nbytes} for iv in self.intervals]

    def to_pandas(self):
        return pandas().DataFrame(self.records(), columns=list(self.COLUMNS))

    def summary(self) -> str:
        if not self.intervals:
            return "no kernels or copies in this window"
        kinds: dict = {}
        for iv in self.intervals:
            kinds[iv.kind] = kinds.get(iv.kind, 0) + 1
        what = ", ".join(f"{n} {_plural(k, n)}" for k, n in kinds.items())
        return (f"{what} on {len(self.lanes)} lane{'s' if len(self.lanes) != 1 else ''} over "
                f"{self.span_ms:.3f} ms; busy {self.busy_ms:.3f} ms, two or more lanes busy "
                f"{self.overlap:.0%} of it")

    def __repr__(self) -> str:
        note = " (simulator: launches run one at a time, no overlap)" if self.simulated else ""
        return f"<wb.Timeline: {self.summary()}{note}>"

    def _repr_html_(self) -> str:
        rows = [[lane, str(len(self.lane(lane))), f"{sum(iv.ms for iv in self.lane(lane)):.3f}"]
                for lane in self.lanes]
        note = (" Simulator: launches run one at a time, so lanes never overlap."
                if self.simulated else "")
        return (f"<div><b>{self.title}</b>: {self.summary()}.{note}</div>"
                + html_table(rows, ["lane", "items", "busy ms"], align=["left", "right", "right"]))

    def plot(self, ax=None, labels: bool = True):
        """A Gantt chart (matplotlib Figure): one row per lane, bars coloured by
        kind, labelled with their names where they are wide enough."""
        fig, ax = figure_axes(ax, figsize=(9, 0.6 + 0.55 * max(1, len(self.lanes))))
        rows = {lane: i for i, lane in enumerate(self.lanes)}
        width = self.span_ms or 1.0
        for iv in self.intervals:
            y = rows[iv.lane]
            ax.broken_barh([(iv.start, max(iv.ms, width * 1e-4))], (y - 0.4, 0.8),
                           facecolors=COLORS.get(iv.kind, "#7f7f7f"), edgecolor="white",
                           linewidth=0.5)
            if labels and iv.ms > width * 0.06:
                ax.text(iv.start + iv.ms / 2, y, iv.name, ha="center", va="center",
                        fontsize=7, color="white", clip_on=True)
        ax.set_yticks(range(len(self.lanes)))
        ax.set_yticklabels(self.lanes)
        ax.invert_yaxis()
        ax.set_xlabel("ms" + (" (CPU time: simulator)" if self.simulated else ""))
        ax.set_title(f"{self.title}: overlap {self.overlap:.0%}")
        from matplotlib.patches import Patch  # lazy: matplotlib only when plotting
        kinds = list(dict.fromkeys(iv.kind for iv in self.intervals))
        if kinds:
            ax.legend(handles=[Patch(color=COLORS.get(k, "#7f7f7f"), label=k) for k in kinds],
                      loc="upper right", fontsize=7, ncols=len(kinds))
        ax.grid(axis="x", alpha=0.3)
        return fig


def _plural(word: str, n: int) -> str:
    if n == 1:
        return word
    return "copies" if word == "copy" else word + "s"


def _as_seconds(when) -> float | None:
    if when is None:
        return None
    if isinstance(when, _dt.datetime):
        return when.timestamp()
    if isinstance(when, numbers.Real) and not isinstance(when, bool):
        return float(when)
    raise ArgumentTypeError(
        f"since= and until= take a time.time() value or a datetime, got {when!r}")


def timeline(cell=None, *, since=None, until=None, last: int | None = None) -> Timeline:
    """The kernels, copies, memsets and graph launches of cell ``cell`` (an
    execution count; default: the cell being run, else the last cell that
    queued work, or everything outside a notebook), or of a window (``since``/``until``: ``time.time()`` values or
    datetimes; ``last``: the last N records), as a :class:`Timeline`. Reading it
    waits for the work still running."""
    s = session()
    records = s.timing_log.resolved()
    if cell is None and since is None and until is None and last is None and records:
        # the cell being run if it queued work, else the last cell that did
        cells = [r[CELL] for r in records if r[CELL] is not None]
        if s.cell is not None and s.cell in cells:
            cell = s.cell
        elif cells:
            cell = cells[-1]
    lo, hi = _as_seconds(since), _as_seconds(until)
    chosen = [r for r in records
              if (cell is None or r[CELL] == cell)
              and (lo is None or r[WALL] >= lo) and (hi is None or r[WALL] <= hi)]
    if last is not None:
        chosen = chosen[-int(last):] if last > 0 else []
    chosen = [r for r in chosen if r[T0] is not None and r[MS] == r[MS]]
    b = s.backend
    log = s.timing_log
    if not chosen:
        return Timeline([], simulated=bool(b and b.simulated))
    several = len({r[DEVICE] for r in chosen}) > 1  # lanes say their device when two are in it
    origin = min(r[T0] for r in chosen)
    intervals = []
    for r in chosen:
        label = log.stream_label(b, r[STREAM])
        lane = f"GPU {r[DEVICE]} · {label}" if several else label
        start = r[T0] - origin
        intervals.append(Interval(lane, r[KERNEL], r[KIND], start, start + r[MS],
                                  r[DEVICE] or 0, label, r[NBYTES]))
    title = f"Timeline of cell {cell}" if cell is not None else "Timeline"
    return Timeline(intervals, simulated=bool(b and b.simulated), title=title)
