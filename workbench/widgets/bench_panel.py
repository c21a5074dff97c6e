"""``wb.BenchmarkPanel()``: the latest sweep's plot and table, live.

The panel listens to the session's benchmark history: when a sweep starts it
follows it, and redraws as each point arrives (at most every
``min_interval`` seconds while the sweep runs, and always when it ends), so
the plot grows while :func:`workbench.sweep` is still running.
"""
from __future__ import annotations

import html
import time
import weakref

import ipywidgets as widgets
from traitlets import Bool, Float, Int, List, Unicode, validate

from ..errors import ArgumentValueError
from ..benchmarking import history
from ..benchmarking.plots import plot_sweep, sweep_x
from ..present.figures import figure_svg, new_figure
from ..present.tables import html_table, plain_value
from ..present.units import times_unit
from .static import StaticFallback, html_part

_Y_CHOICES = ("time", "bandwidth", "gflops")
_TABLE_COLUMNS = ("name", "median_s", "iqr_s", "gbps", "gflops", "pct_bandwidth", "pct_compute")
CHART_SIZE = (7, 4.2)   # inches: the size of plot_sweep() inline, so both read alike
#: Headers of the shown table (times get their unit when the table is drawn).
_HEADERS = {"median_s": "median", "iqr_s": "IQR", "gbps": "GB/s", "gflops": "GFLOP/s",
            "pct_bandwidth": "% of copy bandwidth", "pct_compute": "% of FMA peak"}


def _cell(column: str, value, time_scale: float):
    """One shown cell: a number formatted for its column (times divided by
    ``time_scale``, the seconds of their unit), or a dash when missing."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if column.endswith("_s"):
        return f"{value / time_scale:.3g}"
    if column.startswith("pct_"):
        return f"{value:.1f}%"
    if column in ("gbps", "gflops"):
        return f"{value:.3g}"
    return value


def table_html(columns: list[str], rows: list[list]) -> str:
    """The sweep's table with units in the headers and no ``None``."""
    median = columns.index("median_s") if "median_s" in columns else None
    unit, scale = times_unit([r[median] for r in rows] if median is not None else [])
    headers = [f"{_HEADERS[c]} ({unit})" if c.endswith("_s") else _HEADERS.get(c, c)
               for c in columns]
    shown = [[_cell(c, v, scale) for c, v in zip(columns, row)] for row in rows]
    align = ["left" if c == "name" else "right" for c in columns]
    return html_table(shown, headers, align=align)


class BenchmarkPanel(StaticFallback, widgets.VBox):
    """Plot and table of the latest :func:`workbench.sweep`, updated while it runs.

    Every displayed fact is a synced trait (``sweep_id``, ``points``,
    ``total``, ``running``, ``rows``...), so ``panel.get_state()`` tells what
    the panel shows without a browser.
    """

    y = Unicode("time", help="what the plot shows: 'time', 'bandwidth' or 'gflops'").tag(sync=True)
    sweep_id = Unicode("", help="id of the sweep shown ('' before any sweep)").tag(sync=True)
    points = Int(0, help="points of the shown sweep measured so far").tag(sync=True)
    total = Int(0, help="points the shown sweep will measure").tag(sync=True)
    running = Bool(False, help="True while the shown sweep is still measuring").tag(sync=True)
    error = Unicode("", help="why the shown sweep stopped early ('' if it did not)").tag(sync=True)
    simulated = Bool(False, help="True when the times are the simulator's CPU "
                                 "wall-clock times").tag(sync=True)
    columns = List(help="column names of rows").tag(sync=True)
    rows = List(help="the table shown: one list per point, in the order of columns").tag(sync=True)
    redraws = Int(0, help="how many times the plot has been drawn").tag(sync=True)
    min_interval = Float(0.5, help="seconds between redraws while a sweep runs").tag(sync=True)

    def __init__(self, y: str = "time", min_interval: float = 0.5, **kwargs):
        self._title = widgets.HTML()
        self._choice = widgets.ToggleButtons(options=_Y_CHOICES, value=y,
                                             tooltips=["median time", "GB/s", "GFLOP/s"])
        # the plot joins the panel with its first drawing: an empty image
        # widget would show a broken-image icon
        self._image = widgets.Image(format="svg+xml", layout=widgets.Layout(max_width="100%"))
        self._table = html_part()
        super().__init__(children=[self._title, self._choice, self._table],
                         y=y, min_interval=min_interval, **kwargs)
        self._choice.observe(lambda change: setattr(self, "y", change["new"]), names="value")
        self.observe(self._on_y, names="y")
        self._run = None
        self._last_draw = 0.0
        self._remove_listener = history.add_listener(_weak_listener(self))
        latest = history.latest_sweep()
        if latest is not None:
            self.show(latest)
        else:
            self._title.value = ("<b>Benchmark panel</b>: no sweep yet; the plot and table "
                                 "appear when <code>wb.sweep(...)</code> runs")

    @validate("y")
    def _check_y(self, proposal):
        if proposal["value"] not in _Y_CHOICES:
            raise ArgumentValueError(
                f"y={proposal['value']!r}: choose one of {', '.join(_Y_CHOICES)}")
        return proposal["value"]

    def _on_y(self, change) -> None:
        self._choice.value = change["new"]
        self._redraw()

    def show(self, run) -> None:
        """Show ``run`` (a sweep from :func:`workbench.benchmarking.history.sweeps`)."""
        self._run = run
        self._update(force=True)

    def close(self):
        remove = getattr(self, "_remove_listener", None)
        if remove is not None:
            remove()
        super().close()

    # -- updates ---------------------------------------------------------------------
    def _on_event(self, event: str, payload) -> None:
        if event == "sweep_started":
            self._run = payload
            self._update(force=True)
        elif event in ("sweep_point", "sweep_finished") and payload is self._run:
            self._update(force=event == "sweep_finished")

    def _update(self, force: bool) -> None:
        run = self._run
        if run is None:
            return
        table = run.table() if run.results else None
        with self.hold_sync():
            self.sweep_id = run.id
            self.points = len(run.results)
            self.total = run.total
            self.running = not run.finished
            self.error = getattr(run, "error", "")
            if table is not None:
                self.simulated = bool(table["simulated"].any())
                cols = [c for c in self._columns(table) if c in table.columns]
                self.columns = cols
                self.rows = [[plain_value(v) for v in row] for row in table[cols].itertuples(index=False)]
            else:
                self.columns, self.rows = [], []
        self._title.value = self._title_html()
        self._table.value = table_html(self.columns, self.rows) if table is not None else ""
        if table is None:
            self._show_plot(False)   # no plot rather than the last sweep's
        now = time.monotonic()
        if table is not None and (force or now - self._last_draw >= self.min_interval):
            self._draw(table)
            self._last_draw = now

    def _columns(self, table) -> list[str]:
        params = table.attrs.get("params") or []
        return [_TABLE_COLUMNS[0], *params, *_TABLE_COLUMNS[1:]]

    def _title_html(self) -> str:
        sim = (" <span style='color:#a15c00'><b>simulated: CPU wall-clock times</b></span>"
               if self.simulated else "")
        return f"<b>{html.escape(self._snapshot_title())}</b>{sim}"

    def _snapshot_title(self) -> str:
        if not self.sweep_id:
            return "Benchmark panel: no sweep yet"
        if self.running:
            state = f"running: {self.points} of {self.total} points"
        elif self.error:
            state = f"stopped after {self.points} of {self.total} points: {self.error}"
        else:
            state = f"{self.points} points"
        return f"Benchmark panel: sweep {self.sweep_id}, {state}"

    def _snapshot_html(self) -> str:
        sim = "<p><i>simulated: CPU wall-clock times</i></p>" if self.simulated else ""
        return sim + self._table.value

    def _redraw(self) -> None:
        if self._run is not None and self._run.results:
            self._draw(self._run.table())

    def _draw(self, table) -> None:
        column = {"time": "median_s", "bandwidth": "gbps", "gflops": "gflops"}[self.y]
        fig = new_figure(CHART_SIZE)
        ax = fig.subplots()
        if column in table.columns and table[column].notna().any():
            plot_sweep(table, y=self.y, x=sweep_x(table), ax=ax)
        else:
            ax.text(0.5, 0.5, f"no {self.y} figures: pass bytes=/flops= to wb.sweep",
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
        self._image.value = figure_svg(fig)
        self._show_plot(True)
        self.redraws += 1

    def _show_plot(self, shown: bool) -> None:
        if shown != (self._image in self.children):
            self.children = ([self._title, self._choice, self._image, self._table] if shown
                             else [self._title, self._choice, self._table])


def _weak_listener(panel: BenchmarkPanel):
    """A history listener that does not keep the panel alive."""
    ref = weakref.ref(panel)

    def listener(event, payload):
        target = ref()
        if target is not None:
            target._on_event(event, payload)
    return listener

