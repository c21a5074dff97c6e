"""What a panel's chart costs per refresh, and its size: the PNG the panels
drew before, PNG at twice the pixels (sharp on a HiDPI screen), matplotlib's
SVG, and the SVG line chart the device panel draws without matplotlib
(``present.figures.line_chart_svg``). With bqplot importable, also the
cost and bytes of updating a bqplot line (its widget state, JSON plus
binary buffers, as sent to the front end).

    .venv/bin/python benchmarks/panel_charts.py

The panels use matplotlib SVG for charts redrawn on a change (sweep,
occupancy: the same plot functions as inline, so the same look) and the
hand-drawn SVG for the device panel's once-a-second history.
"""
from __future__ import annotations

import json
import math
import statistics
import time

from _table import print_table

from workbench.present.figures import figure_png, figure_svg, line_chart_svg, new_figure

POINTS = 120   # samples a device panel keeps


def _history_figure():
    fig = new_figure((6.4, 2.2))
    left, right = fig.subplots(1, 2)
    ts = [i - POINTS for i in range(POINTS)]
    left.plot(ts, [50 + 30 * math.sin(t / 7) for t in ts])
    right.plot(ts, [20 + t / 10 for t in ts])
    for ax in (left, right):
        ax.set_ylim(0, 100)
        ax.set_title("utilisation (%)", fontsize=9)
    return fig


def _time(fn, repeat: int = 15) -> tuple[float, int]:
    fn()
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, size


def _bqplot_update():
    try:
        import bqplot
        from ipywidgets.widgets.widget import _remove_buffers
    except ImportError:
        return None
    xs, ys = bqplot.LinearScale(), bqplot.LinearScale(min=0, max=100)
    line = bqplot.Lines(x=[0.0], y=[0.0], scales={"x": xs, "y": ys})

    def update():
        ts = [float(i - POINTS) for i in range(POINTS)]
        with line.hold_sync():
            line.x = ts
            line.y = [50 + 30 * math.sin(t / 7) for t in ts]
        state, _, buffers = _remove_buffers(line.get_state(["x", "y"]))
        return json.dumps(state).encode() + b"".join(bytes(b) for b in buffers)
    return update


def main() -> None:
    series = {"busy": [(float(i - POINTS), 50 + 30 * math.sin(i / 7)) for i in range(POINTS)]}
    cases = [
        ("matplotlib PNG, 80 dpi (before)", lambda: figure_png(_history_figure(), dpi=80)),
        ("matplotlib PNG, 200 dpi (HiDPI)", lambda: figure_png(_history_figure(), dpi=200)),
        ("matplotlib SVG", lambda: figure_svg(_history_figure())),
        ("line_chart_svg, two charts", lambda: (line_chart_svg("busy (%)", series, span=120, y_max=100)
                                               + line_chart_svg("arena (MiB)", series, span=120))),
    ]
    update = _bqplot_update()
    if update is not None:
        cases.append(("bqplot: update one line's x, y", update))
    rows = []
    for label, fn in cases:
        ms, size = _time(fn)
        rows.append([label, ms, f"{size / 1024:.1f}"])
    print_table(f"Device-panel history chart ({POINTS} samples): cost per refresh",
                ["chart", "ms per refresh", "KiB sent"], rows)


if __name__ == "__main__":
    main()
