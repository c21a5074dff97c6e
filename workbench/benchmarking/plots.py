"""Plots of benchmark results (matplotlib, imported only when a plot is drawn).

Each function draws on ``ax`` when given, else on a new figure, and returns
the :class:`matplotlib.figure.Figure`. A new figure is not left open in
pyplot: it shows in a notebook when it is the cell's value (so it shows
exactly once, and a figure kept in a variable does not show by itself).
Simulated (CPU wall-clock) results say so in the title.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError
from ..present.figures import figure_axes, legend_outside
from ..present.tables import pandas
from ..present.units import time_unit, times_unit
from . import history
from .ceilings import ceilings as measured_ceilings

_Y_COLUMNS = {"time": "median_s", "bandwidth": "gbps", "gbps": "gbps",
              "gflops": "gflops", "compute": "gflops"}
_Y_LABELS = {"gbps": "bandwidth (GB/s)", "gflops": "compute (GFLOP/s)",
             "pct_bandwidth": "% of copy ceiling", "pct_compute": "% of compute ceiling"}


def _plain_log_ticks(axis) -> None:
    """Tick labels such as 2 and 0.5 instead of 2x10^0 on a log axis (minor
    ticks are labelled when the axis spans less than about a decade)."""
    from matplotlib.ticker import LogFormatter  # lazy: matplotlib only when a plot is drawn
    axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def sweep_x(table) -> str:
    """The column a sweep is plotted against: ``size`` when the sweep has
    sizes, else its first parameter."""
    if "size" in table.columns:
        return "size"
    params = [p for p in (table.attrs.get("params") or []) if p in table.columns]
    if not params:
        raise ArgumentValueError("the table has no 'size' column and no sweep parameters in "
                                 "table.attrs['params']; pass x=<column> to plot against")
    return params[0]


def _log_scale_fits(values) -> bool:
    """True when every value is a positive number (a log axis can show them)."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(array.size) and bool(np.all(np.isfinite(array) & (array > 0)))


def _simulated(table) -> bool:
    sim = table.attrs.get("simulated") if hasattr(table, "attrs") else None
    if sim is None and "simulated" in getattr(table, "columns", ()):
        sim = bool(table["simulated"].any())
    return bool(sim)


def _title(text: str, simulated: bool) -> str:
    return f"{text} [simulated: CPU wall-clock]" if simulated else text


def _series_keys(table, x: str, by: str | Sequence[str] | None) -> list[str]:
    """Columns that tell lines apart: ``by``, or the name plus every sweep
    parameter other than ``x``."""
    if by is not None:
        return [by] if isinstance(by, str) else list(by)
    params = table.attrs.get("params") or []
    return ["name"] + [p for p in params if p != x and p in table.columns]


def _series(table, x: str, keys: list[str]):
    """(label, sorted sub-table) per line, in order of first appearance."""
    if not keys:
        yield "", table.sort_values(x)
        return
    for group, sub in table.groupby(keys, sort=False):
        group = group if isinstance(group, tuple) else (group,)
        parts = [str(v) if k == "name" else f"{k}={v}" for k, v in zip(keys, group)]
        yield " ".join(parts), sub.sort_values(x)


def plot_sweep(table, y: str = "time", *, x: str | None = None, by=None, ax=None,
               logx: bool = True, logy: bool = True, spread: bool = True,
               title: str | None = None):
    """Time (median, with the interquartile range shaded), bandwidth or
    GFLOP/s against ``x`` for every variant of a :func:`workbench.sweep` table.

    ``x``: a column (default: ``size``, or the first sweep parameter of a
    sweep without sizes). ``y``: ``"time"``, ``"bandwidth"`` (GB/s),
    ``"gflops"`` or any numeric column. With ``y="bandwidth"`` and measured
    ceilings in the table, the copy ceiling is drawn as a dashed line.
    ``logx`` applies only when every x value is a positive number.
    """
    x = sweep_x(table) if x is None else x
    if x not in table.columns:
        raise ArgumentValueError(f"the table has no column {x!r} to put on the x axis; "
                                 f"columns: {', '.join(map(str, table.columns))}")
    column = _Y_COLUMNS.get(y, y)
    if column not in table.columns:
        raise ArgumentValueError(
            f"the table has no column {column!r} (y={y!r}); pass bytes=/flops= "
            "to wb.sweep for bandwidth and GFLOP/s")
    fig, ax = figure_axes(ax)
    scale, ylabel = 1.0, _Y_LABELS.get(column, column)
    if column == "median_s":
        unit, scale = times_unit(table["median_s"])
        ylabel = f"median time ({unit})"
    for label, sub in _series(table, x, _series_keys(table, x, by)):
        xs = sub[x].to_numpy()
        ys = sub[column].to_numpy(dtype=float) / scale
        line, = ax.plot(xs, ys, marker="o", label=label or None)
        if spread and column == "median_s" and {"q1_s", "q3_s"} <= set(sub.columns):
            ax.fill_between(xs, sub["q1_s"].to_numpy(float) / scale,
                            sub["q3_s"].to_numpy(float) / scale, color=line.get_color(),
                            alpha=0.2, linewidth=0)
    ceilings = table.attrs.get("ceilings")
    if column == "gbps" and ceilings:
        ax.axhline(ceilings["copy_gbps"], color="gray", linestyle="--",
                   label=f"copy ceiling ({ceilings['copy_gbps']:.4g} GB/s)")
    if logx and _log_scale_fits(table[x]):
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(_title(title or f"{ylabel.split(' (')[0]} against {x}", _simulated(table)))
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return fig


def plot_speedup(table, baseline, *, x: str | None = None, by=None, ax=None, logx: bool = True,
                 title: str | None = None):
    """Speedup of every variant over ``baseline`` at each ``x`` (default as
    in :func:`plot_sweep`): the baseline's median time over the variant's
    (above 1: faster).

    ``baseline`` is a variant name in ``table`` (``"numpy"`` timed in the
    same sweep, say) or another sweep table (a CPU run, CuPy) whose rows
    match on ``x``.
    """
    x = sweep_x(table) if x is None else x
    if isinstance(baseline, str):
        if baseline not in set(table["name"]):
            raise ArgumentValueError(
                f"baseline {baseline!r} is not a variant of this table; variants: "
                f"{', '.join(map(str, table['name'].unique()))}")
        base = table[table["name"] == baseline]
        others = table[table["name"] != baseline]
        base_label = baseline
    elif isinstance(baseline, pandas().DataFrame):
        base, others = baseline, table
        names = baseline["name"].unique() if "name" in baseline.columns else ["baseline"]
        if len(names) != 1:
            raise ArgumentValueError("a baseline table must hold a single variant; select one with "
                                     "table[table['name'] == ...]")
        base_label = str(names[0])
    else:
        raise ArgumentTypeError("baseline= takes a variant name or a sweep table (DataFrame)")
    base_times = base.groupby(x)["median_s"].median()
    fig, ax = figure_axes(ax)
    for label, sub in _series(others, x, _series_keys(others, x, by)):
        matched = sub[sub[x].isin(base_times.index)]
        if matched.empty:
            continue
        xs = matched[x].to_numpy()
        speedup = base_times.loc[xs].to_numpy(float) / matched["median_s"].to_numpy(float)
        ax.plot(xs, speedup, marker="o", label=label or None)
    ax.axhline(1.0, color="gray", linestyle="--", label=f"{base_label} (baseline)")
    if logx and _log_scale_fits(others[x]):
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_ticks(ax.yaxis)
    ax.set_xlabel(x)
    ax.set_ylabel(f"speedup over {base_label}")
    simulated = _simulated(table) or _simulated(base)
    ax.set_title(_title(title or f"speedup over {base_label}", simulated))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def roofline_points(results) -> list[dict]:
    """(label, intensity, gflops, simulated) for every result that has both
    bytes and flops: from BenchResults or a sweep table, and the points of
    anything with a ``roofline_points()`` method (a profiler's report)."""
    points = []
    if hasattr(results, "columns"):  # a sweep table
        keys = _series_keys(results, "", None)
        for _, row in results.iterrows():
            if _finite(row.get("bytes")) and _finite(row.get("flops")) and row["bytes"] > 0:
                label = " ".join(str(row[k]) if k == "name" else f"{k}={row[k]}" for k in keys)
                if "size" in results.columns:
                    label += f" size={row['size']}"
                points.append({"label": label, "name": row["name"],
                               "intensity": row["flops"] / row["bytes"],
                               "gflops": row["flops"] / row["median_s"] / 1e9,
                               "simulated": bool(row.get("simulated", False))})
        return points
    for r in results:
        if hasattr(r, "roofline_points"):  # a profile (NcuReport): its measured kernels
            points += r.roofline_points()
        elif r.bytes and r.flops is not None:
            extra = " ".join(f"{k}={v}" for k, v in r.params.items())
            points.append({"label": f"{r.name} {extra}".strip(), "name": r.name,
                           "intensity": r.intensity, "gflops": r.gflops,
                           "simulated": r.simulated})
    return points


def _finite(value) -> bool:
    try:
        return value is not None and np.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def plot_roofline(results=None, ceilings=None, *, ax=None, annotate: bool = False,
                  title: str | None = None):
    """A roofline: the measured copy bandwidth as the sloped roof, the FMA
    kernel and each GEMM as flat roofs, and every benchmarked kernel that
    has ``bytes`` and ``flops`` as a point (arithmetic intensity, GFLOP/s).

    ``results``: BenchResults (and profiler reports, whose kernels are points
    of measured FLOPs and DRAM bytes), a sweep table, or None for every result
    of the session. ``ceilings``: a :class:`~workbench.benchmarking.ceilings.Ceilings`
    (default: this device's, measured once and cached).
    """
    if ceilings is None:
        ceilings = measured_ceilings()
    if results is None:
        results = history.results()
    elif hasattr(results, "times") or hasattr(results, "roofline_points"):  # one result or report
        results = [results]
    points = roofline_points(results)
    fig, ax = figure_axes(ax)
    intensities = [p["intensity"] for p in points] + [ceilings.ridge_point or 1.0]
    lo = min(min(intensities) / 4, 1 / 16)
    hi = max(max(intensities) * 4, 64)
    xs = np.geomspace(lo, hi, 200)
    roofs = [("FMA kernel (float32)", ceilings.fma_gflops)]
    roofs += [(f"GEMM {dtype}", v) for dtype, v in ceilings.gemm_gflops.items()]
    roofs = [(label, v) for label, v in roofs if v]
    top = max(v for _, v in roofs) if roofs else None
    memory = ceilings.copy_gbps * xs
    ax.plot(xs, np.minimum(memory, top) if top else memory, color="black",
            label=f"copy bandwidth {ceilings.copy_gbps:.4g} GB/s")
    for i, (label, value) in enumerate(roofs):
        knee = value / ceilings.copy_gbps
        sel = xs >= knee
        ax.plot(np.r_[knee, xs[sel]], np.full(sel.sum() + 1, value), linestyle=("--", ":", "-.")[i % 3],
                label=f"{label} {value:.4g} GFLOP/s")
    markers = "osD^v<>ph*"
    names = list(dict.fromkeys(p["name"] for p in points))
    for i, name in enumerate(names):
        mine = [p for p in points if p["name"] == name]
        ax.scatter([p["intensity"] for p in mine], [p["gflops"] for p in mine],
                   marker=markers[i % len(markers)], zorder=3, label=name)
        if annotate:
            for p in mine:
                ax.annotate(p["label"], (p["intensity"], p["gflops"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    simulated = ceilings.simulated or any(p["simulated"] for p in points)
    ax.set_title(_title(title or f"roofline of {ceilings.device}", simulated))
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    return fig


def plot_times(result, *, ax=None, bins: int = 40, title: str | None = None):
    """Histogram of one :class:`~workbench.types.BenchResult`'s times with its
    median and quartiles marked."""
    fig, ax = figure_axes(ax)
    unit, scale = time_unit(result.median)
    ax.hist(result.times / scale, bins=bins, color="tab:blue", alpha=0.7, label="repeats")
    ax.axvline(result.median / scale, color="black", label="median")
    ax.axvline(result.q1 / scale, color="gray", linestyle="--", label="quartiles")
    ax.axvline(result.q3 / scale, color="gray", linestyle="--")
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("calls")
    ax.set_title(_title(title or f"{result.name}: {result.repeats} repeats", result.simulated))
    ax.legend()
    return fig
