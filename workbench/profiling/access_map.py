"""The access map: one warp-level instruction's addresses as a picture, lane
by lane: which 32-byte sectors (global memory) or which of the 32 banks
(shared memory) each lane touched. matplotlib is imported when one is drawn.
"""
from __future__ import annotations

from ..errors import ArgumentValueError
from ..backends.counting import SHARED_DYNAMIC_BASE, SHARED_STATIC_BASE
from ..present.figures import figure_axes

#: Global memory maps show at most this many sectors (the first ones touched).
MAX_SECTORS = 64


def _shared_origin(address: int, variables) -> tuple[int, str]:
    """The start of the shared variable holding ``address`` and its name."""
    if address >= SHARED_DYNAMIC_BASE:
        return SHARED_DYNAMIC_BASE, "dynamic shared memory"
    for v in variables:
        if v.address <= address < v.address + v.size:
            return v.address, v.name.split("::")[-1]
    return SHARED_STATIC_BASE, "shared memory"


def _array_name(address: int, arrays) -> tuple[int, str]:
    """The array (``(name, start, bytes)``) holding a global address and its start."""
    for name, start, nbytes in arrays or ():
        if start <= address < start + nbytes:
            return start, name
    return 0, ""


def plot_access_map(row, shared_variables=(), arrays=(), *, ax=None, title: str | None = None):
    """Draw the sample instruction of ``row`` (a :class:`.counters.LineRow`):
    lanes down, sectors (global) or banks (shared) across, each cell a lane's
    access. A shared bank with more than one word in a phase of the warp is a
    conflict: its cells are red. ``arrays``: ``(name, address, bytes)`` of the
    launch's arrays, to say which one a global access is in."""
    import numpy as np  # (NumPy is the workbench's own dependency)
    sample = row.sample
    if sample is None:
        raise ArgumentValueError(f"line {row.line} ({row.what}) has no sampled instruction to draw")
    active = [(lane, a) for lane, a in enumerate(sample.addresses) if a is not None]
    size = max(1, sample.size)
    fig, ax = figure_axes(ax, figsize=(9, 6))
    from matplotlib.colors import ListedColormap  # lazy: matplotlib only when a map is drawn
    if row.what.startswith("shared"):
        origin, name = _shared_origin(active[0][1], shared_variables)
        grid = np.zeros((32, 32))
        labels = {}
        lanes_per_phase = 8 if size >= 16 else 16 if size == 8 else 32
        for lane, a in active:
            offset = a - origin
            for j in range(max(1, size // 4)):
                word = offset // 4 + j
                bank = word % 32
                phase = lane // lanes_per_phase
                words = {w for l2, a2 in active if l2 // lanes_per_phase == phase
                         for w in range((a2 - origin) // 4, (a2 - origin) // 4 + max(1, size // 4))
                         if w % 32 == bank}
                grid[lane, bank] = 2 if len(words) > 1 else 1
                labels[lane, bank] = str(word)
        cmap = ListedColormap(["#f4f4f4", "#8fbf8f", "#e06666"])
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=2, aspect="auto")
        ax.set_xlabel(f"bank (4-byte word of {name} modulo 32)")
        subject = f"{row.units_per_request:.1f} wavefronts per request, ideal {row.ideal_per_request:.1f}"
    else:
        origin, name = _array_name(active[0][1], arrays)
        sectors = sorted({s for _, a in active for s in range(a // 32, (a + size - 1) // 32 + 1)})
        shown = sectors[:MAX_SECTORS]
        column = {s: i for i, s in enumerate(shown)}
        grid = np.zeros((32, len(shown)))
        labels = {}
        for lane, a in active:
            for s in range(a // 32, (a + size - 1) // 32 + 1):
                if s in column:
                    grid[lane, column[s]] = 1
                    labels[lane, column[s]] = ""
        cmap = ListedColormap(["#f4f4f4", "#6d9eeb"])
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        step = max(1, len(shown) // 16)
        ax.set_xticks(range(0, len(shown), step))
        ax.set_xticklabels([f"{(s * 32 - origin)}" for s in shown[::step]], rotation=90, fontsize=7)
        where = f" of {name}" if name else ""
        more = f" (first {MAX_SECTORS} of {len(sectors)})" if len(sectors) > len(shown) else ""
        ax.set_xlabel(f"32-byte sector: byte offset{where}{more}")
        subject = f"{len(sectors)} sectors, ideal {row.ideal_per_request:.1f} per request"
    if row.what.startswith("shared") and len(labels) <= 400:
        for (lane, col), text in labels.items():
            ax.text(col, lane, text, ha="center", va="center", fontsize=5)
    ax.set_yticks(range(0, 32, 4))
    ax.set_ylabel("lane")
    block = ",".join(map(str, sample.block))
    ax.set_title(title or f"line {row.line} ({row.what}), warp {sample.warp} of block ({block}): "
                          f"{subject}", fontsize=10)
    return fig
