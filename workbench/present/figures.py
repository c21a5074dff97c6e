"""Figures: a new or given matplotlib axes, and a figure rendered to PNG.

matplotlib is imported inside these functions, never at module import:
``import workbench`` and the core must not pay for it (a plot is drawn only
when a user asks for one).
"""
from __future__ import annotations

import io


def figure_axes(ax, figsize=(7, 4.2)):
    """``(figure, axes)``: those of ``ax``, or a new figure closed in pyplot so
    that it shows once, as the value the plot function returns."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt  # lazy: matplotlib costs ~0.3 s to import
    fig, ax = plt.subplots(figsize=figsize)
    plt.close(fig)  # the caller displays the returned figure; pyplot must not show it again
    return fig, ax


def new_figure(figsize, dpi: int = 80):
    """A figure outside pyplot (no global state, safe from a panel's thread),
    ready to draw on and to render with :func:`figure_png`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: see the module docstring
    from matplotlib.figure import Figure  # lazy: see the module docstring
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig, dpi: int | None = None) -> bytes:
    """``fig`` laid out tightly and rendered as PNG bytes (for an image widget)."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
