"""CPU baselines of the kernel library: each kernel timed against its NumPy
reference on the CPU and against the backend's own operation (CuPy's
``sum``, ``matmul`` = cuBLAS...), as a speedup table and plot.

Every timing is a :class:`~workbench.types.BenchResult` recorded for
``wb.report()`` (the JSON / CSV performance report), with ``params``
``kernel``, ``variant`` (``workbench``, ``library``, ``numpy``), ``size`` and
``dtype``.
"""
from __future__ import annotations

import platform
import time

import numpy as np

from ..errors import ArgumentValueError
from ..benchmarking import history
from ..benchmarking.plots import plot_roofline
from ..benchmarking.result import SIMULATED_TIMES, BenchResult, format_seconds
from ..benchmarking.timer import bench
from ..core.arrays import to_device
from ..present.figures import figure_axes, lay_out_own
from ..present.tables import html_table, pandas
from .library import KernelSpec, specs

VARIANTS = ("numpy", "library", "workbench")


def device_args(args: tuple) -> tuple:
    """``args`` with every NumPy array copied to the device."""
    return tuple(to_device(a) if isinstance(a, np.ndarray) else a for a in args)


def _spec(name: str) -> KernelSpec:
    found = specs()
    if name not in found:
        raise ArgumentValueError(
            f"no kernel {name!r} in wb.kernels; wb.kernels.catalog() lists them "
            f"({', '.join(sorted(found))})")
    return found[name]


def time_cpu(fn, args: tuple, *, name: str, max_time: float = 0.25, min_repeat: int = 3,
             max_repeat: int = 1000, bytes=None, flops=None, params=None) -> BenchResult:
    """Time ``fn(*args)`` on the CPU with ``time.perf_counter`` (one untimed
    call first, then repeats until ``max_time`` seconds, at least
    ``min_repeat``); the result's backend is ``"numpy"``."""
    fn(*args)
    times = []
    start = time.perf_counter()
    while len(times) < max_repeat and (len(times) < min_repeat
                                       or time.perf_counter() - start < max_time):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return BenchResult(name=name, times=np.array(times), backend="numpy",
                       device=platform.processor() or platform.machine() or "CPU",
                       simulated=False, warmup=1, bytes=bytes, flops=flops,
                       params=dict(params or {}))


def _record(result: BenchResult, record: bool) -> BenchResult:
    if record:
        history.record_result(result)
    return result


def baseline(name: str, size: int = 1 << 20, dtype: str | None = None, *, cpu: bool = True,
             library: bool = True, max_time: float = 0.25, check: bool = True,
             record: bool = True, seed: int = 0) -> "Baselines":
    """Time kernel ``name`` on inputs of about ``size`` elements (its
    ``example``) three ways: the workbench kernel, the backend's own
    operation (``library=True``, where the kernel has one) and the NumPy
    reference on the CPU (``cpu=True``). With ``check``, the kernel's first
    result is compared with the reference. Returns a :class:`Baselines`."""
    spec = _spec(name)
    dtype = dtype or spec.dtypes[0]
    if dtype not in spec.dtypes:
        raise ArgumentValueError(f"wb.kernels.{name} takes {', '.join(spec.dtypes)}, not {dtype!r}")
    args, elements = spec.example(int(size), dtype, np.random.default_rng(seed))
    moved = spec.bytes_for(dtype) * elements
    flops = spec.flops_per_element * elements
    params = {"kernel": name, "size": int(size), "dtype": dtype}
    expected = spec.reference(*args) if (check or cpu) else None
    dev = device_args(args)
    results = []
    tolerance = {"rtol": spec.rtol, "atol": spec.atol}
    ours = bench(spec.function, *dev, name=name, max_time=max_time, record=False,
                 check=expected if check else None, bytes=moved or None, flops=flops, **tolerance)
    ours.params.update(params, variant="workbench")
    results.append(_record(ours, record))
    if library and spec.library_equivalent is not None:
        theirs = bench(spec.library_equivalent, *dev, name=f"{name} (library)", max_time=max_time,
                       record=False, bytes=moved or None, flops=flops)
        theirs.params.update(params, variant="library")
        results.append(_record(theirs, record))
    if cpu:
        results.append(_record(time_cpu(spec.reference, args, name=f"{name} (numpy)",
                                        max_time=max_time, bytes=moved or None, flops=flops,
                                        params={**params, "variant": "numpy"}), record))
    return Baselines(results)


def baselines(names=None, size: int = 1 << 20, dtype: str | None = "float32", **options) -> "Baselines":
    """:func:`baseline` for several kernels (default: every kernel of the
    library that takes ``dtype``), in one :class:`Baselines` table."""
    chosen = list(specs()) if names is None else ([names] if isinstance(names, str) else list(names))
    results = []
    for name in chosen:
        spec = _spec(name)
        if dtype is not None and dtype not in spec.dtypes:
            continue
        results += baseline(name, size, dtype, **options).results
    return Baselines(results)


class Baselines:
    """Timings of library kernels against NumPy on the CPU and the backend's
    own operations: ``results`` (BenchResults, ``params`` saying kernel,
    variant, size, dtype) and :meth:`speedups` (one row per kernel)."""

    def __init__(self, results: list[BenchResult]):
        self.results = results

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.results)

    def rows(self) -> list[dict]:
        """One dict per timing: kernel, variant, size, dtype, median, GB/s, GFLOP/s."""
        return [{"kernel": r.params.get("kernel", r.name), "variant": r.params.get("variant"),
                 "size": r.params.get("size"), "dtype": r.params.get("dtype"),
                 "backend": r.backend, "median_s": r.median, "gbps": r.gbps, "gflops": r.gflops}
                for r in self.results]

    def speedups(self) -> list[dict]:
        """One dict per (kernel, size, dtype): the median time of each variant
        and the speedups of the workbench kernel over NumPy on the CPU and
        over the backend's own operation (above 1: the kernel is faster)."""
        table: dict = {}
        for row in self.rows():
            key = (row["kernel"], row["size"], row["dtype"])
            table.setdefault(key, {"kernel": key[0], "size": key[1], "dtype": key[2]})
            table[key][f"{row['variant']}_s"] = row["median_s"]
        out = []
        for entry in table.values():
            ours = entry.get("workbench_s")
            for variant in ("numpy", "library"):
                theirs = entry.get(f"{variant}_s")
                entry[f"speedup_vs_{variant}"] = theirs / ours if ours and theirs else None
            out.append(entry)
        return out

    def to_pandas(self):
        """The speedup table (one row per kernel) as a DataFrame."""
        return pandas().DataFrame(self.speedups())

    def __repr__(self) -> str:
        lines = [f"Baselines of {len(self.speedups())} kernels"
                 + (f" [{SIMULATED_TIMES}]" if self.simulated else "")]
        for e in self.speedups():
            parts = [f"{v} {format_seconds(e.get(f'{v}_s'))}" for v in reversed(VARIANTS)
                     if e.get(f"{v}_s") is not None]
            lines.append(f"  {e['kernel']} ({e['dtype']}, size {e['size']}): " + ", ".join(parts))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        header = ["kernel", "dtype", "size", "workbench", "library", "numpy (CPU)",
                  "x vs numpy", "x vs library"]
        rows = [(e["kernel"], e["dtype"], e["size"], format_seconds(e.get("workbench_s")),
                 format_seconds(e.get("library_s")), format_seconds(e.get("numpy_s")),
                 e["speedup_vs_numpy"], e["speedup_vs_library"]) for e in self.speedups()]
        return html_table(rows, header, title="wb.kernels against NumPy (CPU) and the backend's "
                          "own operations", number_format=".3g",
                          notes=["x: how many times faster the workbench kernel is (median times)"]
                          + ([SIMULATED_TIMES] if self.simulated else []))

    def plot_speedup(self, ax=None, title: str | None = None):
        """Bars of the speedups over NumPy (CPU) and over the backend's own operation."""
        return plot_speedup(self, ax=ax, title=title)

    def plot_roofline(self, ax=None, annotate: bool = False):
        """The workbench kernels' timings on the device's roofline (kernels
        that do no arithmetic, such as transpose, have no place on it)."""
        ours = [r for r in self.results if r.params.get("variant") == "workbench" and r.flops]
        return plot_roofline(ours, ax=ax, annotate=annotate)


def plot_speedup(table: Baselines, *, ax=None, title: str | None = None):
    """A bar chart, one group per kernel: the workbench kernel's speedup over
    NumPy on the CPU and over the backend's own operation (log scale; above
    the line at 1 the kernel is faster)."""
    entries = table.speedups()
    fig, ax = figure_axes(ax, figsize=(max(6.0, 0.5 * len(entries) + 2), 4.2))
    xs = np.arange(len(entries))
    width = 0.4
    for i, (variant, label) in enumerate((("numpy", "over NumPy (CPU)"),
                                          ("library", "over the backend's own operation"))):
        values = [e[f"speedup_vs_{variant}"] or np.nan for e in entries]
        ax.bar(xs + (i - 0.5) * width, values, width, label=label)
    ax.axhline(1.0, color="gray", linestyle="--")
    ax.set_xticks(xs)
    ax.set_xticklabels([e["kernel"] for e in entries], rotation=60, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("speedup (times faster)")
    text = title or "wb.kernels speedups"
    ax.set_title(text + (f" [{SIMULATED_TIMES}]" if table.simulated else ""))
    ax.legend()
    lay_out_own(fig)
    return fig
