"""Figures: a new or given matplotlib axes, a figure rendered to SVG (or
PNG), and small live charts drawn as SVG text without matplotlib.

matplotlib is imported inside these functions, never at module import:
``import workbench`` and the core must not pay for it (a plot is drawn only
when a user asks for one).

Panels show SVG: it stays sharp at any device-pixel ratio and zoom, and
``benchmarks/panel_charts.py`` measured it no slower to render than the PNG
it replaced. A figure's SVG is as large on screen as the inline backend's
PNG of the same ``figsize`` (both 96-100 px an inch), so a panel's chart
and an inline plot beside it have the same lettering.
"""
from __future__ import annotations

import html
import io
import math


def figure_axes(ax, figsize=(7, 4.2)):
    """``(figure, axes)``: those of ``ax``, or a new figure closed in pyplot so
    that it shows once, as the value the plot function returns."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt  # lazy: matplotlib costs ~0.3 s to import
    fig, ax = plt.subplots(figsize=figsize)
    plt.close(fig)  # the caller displays the returned figure; pyplot must not show it again
    fig._workbench_made = True  # (its layout is the workbench's to choose: legend_outside)
    return fig, ax


def legend_outside(ax, fontsize: int = 8, **kwargs):
    """The legend of ``ax`` to the right of the plot, where it never covers
    the data, and a figure the workbench made (:func:`figure_axes`) laid out
    so that the legend fits in it; a figure of the user's (``ax=``) keeps
    the layout they chose."""
    legend = ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, **kwargs)
    lay_out_own(ax.figure)
    return legend


def lay_out_own(fig) -> None:
    """``fig`` laid out tightly if the workbench made it (:func:`figure_axes`);
    a figure of the user's (``ax=``) keeps the layout they chose."""
    if getattr(fig, "_workbench_made", False):
        fig.tight_layout()


def new_figure(figsize, dpi: int = 100):
    """A figure outside pyplot (no global state, safe from a panel's thread),
    ready to draw on and to render with :func:`figure_svg`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: see the module docstring
    from matplotlib.figure import Figure  # lazy: see the module docstring
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig, dpi: int | None = None) -> bytes:
    """``fig`` laid out tightly and rendered as PNG bytes."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def figure_svg(fig) -> bytes:
    """``fig`` laid out tightly and rendered as SVG bytes (for an image
    widget with ``format="svg+xml"``)."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    return buffer.getvalue()


# -- live line charts as SVG text -------------------------------------------------------------
# A device panel redraws every second; these charts cost well under a
# millisecond and a few KiB, take JupyterLab's theme colours, and need no
# matplotlib (see benchmarks/panel_charts.py).

_LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def _ticks(top: float) -> list[float]:
    """Three or four round tick values from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 3
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def _tick_text(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e4 else f"{value:.0e}"


def line_chart_svg(title: str, series: dict, *, span: float, y_max: float | None = None,
                   width: int = 320, height: int = 150) -> str:
    """A small line chart as an inline ``<svg>``: ``series`` is ``{label:
    [(seconds_ago, value), ...]}`` (seconds before now, so ``0`` is now and
    ``-span`` the left edge); ``y_max`` fixes the top of the axis (else the
    data's maximum, rounded up). Missing values (NaN) leave gaps."""
    left, right, top, bottom = 38, 16, 18, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for points in series.values() for _, v in points if v == v]
    ticks = _ticks(y_max if y_max is not None else max(values, default=0.0) or 1.0)
    y_top = ticks[-1]

    def x_of(t: float) -> float:
        return left + plot_w * (1 + t / span) if span > 0 else left + plot_w

    def y_of(v: float) -> float:
        return top + plot_h * (1 - min(max(v / y_top, 0.0), 1.0))

    text = "fill='var(--jp-ui-font-color2, #616161)' font-size='10'"
    grid = "stroke='var(--jp-border-color2, #e0e0e0)' stroke-width='1'"
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' role='img' aria-label='{html.escape(title)}' "
           "style='font-family:var(--jp-ui-font-family, sans-serif)'>",
           f"<text x='{left}' y='12' font-size='11' "
           f"fill='var(--jp-ui-font-color1, #212121)'>{html.escape(title)}</text>"]
    for tick in ticks:
        y = y_of(tick)
        out.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' {grid}/>")
        out.append(f"<text x='{left - 4}' y='{y + 3:.1f}' text-anchor='end' {text}>"
                   f"{_tick_text(tick)}</text>")
    for t in (-span, -span / 2, 0.0):
        label = "now" if t == 0 else f"{t:g} s"
        out.append(f"<text x='{x_of(t):.1f}' y='{height - 8}' text-anchor='middle' {text}>"
                   f"{label}</text>")
    for colour, (label, points) in zip(_LINE_COLOURS, series.items()):
        runs, run = [], []
        for t, v in points:
            if v == v and -span <= t <= 0:
                run.append(f"{x_of(t):.1f},{y_of(v):.1f}")
            elif run:
                runs.append(run)
                run = []
        runs.append(run)
        for run in runs:
            if len(run) > 1:
                out.append(f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' "
                           f"points='{' '.join(run)}'><title>{html.escape(label)}</title>"
                           "</polyline>")
            elif run:
                x, y = run[0].split(",")
                out.append(f"<circle cx='{x}' cy='{y}' r='2' fill='{colour}'/>")
    if len(series) > 1:
        x = left + 4
        for colour, label in zip(_LINE_COLOURS, series):
            out.append(f"<text x='{x}' y='{top + 10}' font-size='10' fill='{colour}'>"
                       f"{html.escape(label)}</text>")
            x += 7 * len(label) + 10
    out.append("</svg>")
    return "".join(out)
