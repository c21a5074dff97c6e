"""Figures a person can read: legends beside the data, not over it (the
roofline), every legend entry with something visible (a ring's latency
histogram), cell labels that never overlap (``wb.memory.plot()``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench.benchmarking.ceiling_figures import Ceilings
from workbench.benchmarking.plots import plot_roofline


def renderer(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_the_roofline_legend_is_beside_the_plot_and_inside_the_figure():
    ceilings = Ceilings("H100", "simulator", True, 30.0, 300.0, {"float32": 500.0})
    rng = np.random.default_rng(0)
    rows = [{"name": f"k{i % 3}", "size": 2 ** i, "bytes": 4.0 * 2 ** i,
             "flops": 2.0 ** i * rng.uniform(0.2, 20), "median_s": 1e-6 * 2 ** i / rng.uniform(1, 30),
             "simulated": True} for i in range(10, 20)]
    fig = plot_roofline(pd.DataFrame(rows), ceilings)
    r = renderer(fig)
    ax = fig.axes[0]
    legend, plot = ax.get_legend().get_window_extent(r), ax.get_window_extent(r)
    assert legend.x0 >= plot.x1  # right of the data, never over it
    assert legend.x1 <= fig.bbox.x1 + 1 and legend.y0 >= fig.bbox.y0 - 1  # not cut off
    assert len(ax.get_legend().get_texts()) == 3 + 3  # three roofs and three kernels


def test_every_entry_of_a_ring_histogram_has_visible_bars(simulator):
    source = ("struct Request { int a; }; struct Response { int b; };\n"
              "__device__ void handle(const Request& i, Response& o) { o.b = 2 * i.a; }")
    with wb.ring(source, request=np.dtype([("a", "i4")]), response=np.dtype([("b", "i4")]),
                 capacity=32, threads=64) as ring:
        for i in range(100):
            assert ring.call((i,))["b"] == 2 * i
        stats = ring.stats()
    fig = stats.histogram()
    r = renderer(fig)
    ax = fig.axes[0]
    bars = {c.patches[0].get_label(): c for c in ax.containers}  # (a hist names its first bar)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "round trip (host)" in labels and "handler (device)" in labels
    for label in ("round trip (host)", "handler (device)"):
        drawn = [p for p in bars[label].patches if p.get_height() > 0]
        assert sum(p.get_height() for p in drawn) == 100  # every message counted
        assert max(p.get_window_extent(r).width for p in drawn) >= 1.0, label  # and seen
    assert ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1


def test_memory_plot_cell_labels_never_overlap(shell, backend, tracking):
    shell.run_cell("import numpy as np, workbench as wb\nkept = []")
    for i in range(30):
        assert shell.run_cell(f"kept.append(wb.allocate({(i % 4 + 1) << 18}, np.uint8))").success
    result = shell.run_cell("memory_figure = wb.memory.plot()")
    assert result.success
    fig = shell.user_ns["memory_figure"]
    r = renderer(fig)
    ax = fig.axes[0]
    boxes = [t.get_window_extent(r) for t in ax.texts]
    assert len(boxes) >= 2  # several cells are labelled ...
    from workbench.memory.tracker import tracker
    cells = [cell for _, _, _, event, _, cell in tracker().events()
             if event.startswith("cell ") and event.endswith(" start")]
    assert f"[{cells[-1]}]" in [t.get_text() for t in ax.texts]  # ... the last one always
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    starts = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(starts) >= len(boxes)  # every cell keeps its line
    shell.run_cell("del kept, memory_figure")


def test_a_figure_the_user_passed_keeps_its_layout():
    """A plot drawn on the user's axes (``ax=``) puts its legend outside
    without changing how their figure is laid out (nor warning about it)."""
    import warnings

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from workbench.present.figures import figure_axes, legend_outside
    fig, (left, right) = plt.subplots(1, 2, layout="constrained")
    engine = fig.get_layout_engine()
    left.plot(np.random.default_rng(4).random(8), label="in use")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        legend_outside(left)
    assert fig.get_layout_engine() is engine
    assert left.get_legend() is not None
    plt.close(fig)
    made, ax = figure_axes(None)          # a figure the workbench made is laid out tightly
    ax.plot([1, 2], label="reserved (in use + cached)")
    legend_outside(ax)
    assert ax.get_position().x1 < 0.8     # (room made for the legend on its right)


def test_a_speedup_chart_on_the_users_axes_keeps_their_layout():
    import warnings

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from workbench.kernels.baselines import Baselines, plot_speedup
    fig, (left, _) = plt.subplots(1, 2, layout="constrained")
    engine = fig.get_layout_engine()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (matplotlib warns when a layout is replaced)
        assert plot_speedup(Baselines([]), ax=left) is fig
    assert fig.get_layout_engine() is engine
    plt.close(fig)
