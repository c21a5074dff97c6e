"""Nsight Compute's results: the metrics asked for, the CSV reader and :class:`NcuReport`.

The report is read with Nsight Compute's own exporter, ``ncu --import
report.ncu-rep --csv --page raw`` (one row per profiled kernel launch, one
column per metric, and a row of units under the header), parsed with the
:mod:`csv` module. The details page's long form (``Metric Name``,
``Metric Unit``, ``Metric Value`` columns) is read too.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field

from ..errors import ArgumentValueError, NameNotFound
from ..benchmarking.ceiling_figures import Ceilings
from ..benchmarking.plots import plot_roofline
from ..present.tables import html_table, pandas
from . import counters
from .gpus import gpu_figures
from .predict import DRAM_EFFICIENCY, STAND_IN_NOTE
from .line_table import LineTable

#: Metric names (Nsight Compute 2023 and later) for each field of a :class:`KernelProfile`.
METRICS = {
    "duration": "gpu__time_duration.sum",
    "compute_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes": "dram__bytes.sum",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "registers": "launch__registers_per_thread",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
}

#: Floating-point instructions executed by threads, with the FLOPs each counts
#: (an FMA is two): f = float32, d = float64, h = float16.
FLOP_METRICS = {f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": weight
                for p in "fdh" for op, weight in (("add", 1), ("mul", 1), ("fma", 2))}

#: DRAM bytes read and written (the simulator predicts them from its footprint).
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")

#: Every metric a profile collects (``--metrics``): with the access counters
#: the simulator counts too (:mod:`.counters`), so a cell reads the same on both.
ALL_METRICS = tuple(METRICS.values()) + tuple(FLOP_METRICS) + DRAM_METRICS + counters.ALL

#: Both throughputs under this % of peak: neither unit limits; the kernel waits (latency).
LATENCY_BOUND_PCT = 60.0

_SCALE = {  # unit -> factor to the base unit (seconds, bytes)
    "nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
    "second": 1.0, "s": 1.0,
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30,
}
_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
               "Stream", "Block Size", "Grid Size", "Device", "CC")


def number(text: str, unit: str = ""):
    """A CSV cell as a number in the base unit (seconds, bytes, %), or None
    (``n/a``, empty). Thousands separators are dropped."""
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "na", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    value *= _SCALE.get(unit.strip().lower(), 1)
    return int(value) if value.is_integer() and abs(value) < 2**53 and "." not in text else value


def short_name(name: str) -> str:
    """``"void ns::scale<float>(float *, int)"`` -> ``"scale"``."""
    name = re.sub(r"^void\s+", "", name.strip())
    return name.split("(", 1)[0].split("<", 1)[0].split("::")[-1].strip()


def _dims(text: str) -> tuple[int, ...] | None:
    """``"(256, 1, 1)"`` -> ``(256, 1, 1)``."""
    found = re.findall(r"\d+", text or "")
    return tuple(int(v) for v in found) if found else None


def read_csv(text: str) -> list[dict]:
    """The launches of an ``ncu --csv`` export as dicts: the identifying
    columns as text, every metric as ``(value text, unit)``. Lines before the
    header (a program's own output, ``==PROF==`` lines) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    reader = csv.reader(lines[start:])
    header = next(reader)
    body = [r for r in reader if r]
    if "Metric Name" in header:  # the details page: one row per metric
        col = {name: i for i, name in enumerate(header)}
        launches: dict[str, dict] = {}
        for r in body:
            row = launches.setdefault(r[col["ID"]], {k: r[col[k]] for k in _ID_COLUMNS if k in col})
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            row[r[col["Metric Name"]]] = (r[col["Metric Value"]], unit)
        return list(launches.values())
    units = [""] * len(header)
    if body and body[0] and body[0][0] == "":  # the raw page's row of units
        units = body.pop(0)
    launches = []
    for r in body:
        row = {}
        for name, value, unit in zip(header, r, units):
            row[name] = value if name in _ID_COLUMNS else (value, unit)
        launches.append(row)
    return launches


@dataclass
class KernelProfile:
    """One profiled kernel launch. Times in seconds, sizes in bytes,
    throughputs and occupancy in % of the device's peak; None where the
    metric was not collected (or the device has no such counter).

    ``metrics`` holds every metric by Nsight Compute's name. A launch counted
    on the CPU simulator (``simulated``) has no measured time or throughput:
    its ``metrics`` are the counted access figures (:data:`.counters.COUNTED`;
    :data:`.counters.ESTIMATED` are estimates, named in ``estimated``),
    ``predicted`` its time on a chosen GPU (:class:`.predict.Prediction`, a
    model), ``lines`` the source lines worst first (:class:`.counters.LineRow`)
    and :meth:`access_map` draws one line's warp."""

    id: int
    name: str
    duration: float | None = None
    compute_pct: float | None = None          # SM throughput, % of peak ("speed of light")
    memory_pct: float | None = None           # memory throughput (DRAM, L2, L1), % of peak
    dram_pct: float | None = None
    dram_bytes: int | None = None
    occupancy_pct: float | None = None        # achieved: active warps, % of the SM's maximum
    theoretical_occupancy_pct: float | None = None
    registers: int | None = None              # per thread
    block: tuple | None = None
    grid: tuple | None = None
    flops: float | None = None                # FLOPs executed (an FMA is two), all precisions
    metrics: dict = field(default_factory=dict, repr=False)  # every metric: name -> number
    predicted: object = None                  # simulator: a Prediction (a model, not measured)
    lines: list = field(default_factory=list, repr=False)    # simulator: LineRows, worst first
    counts: object = field(default=None, repr=False)         # simulator: the LaunchCounts
    arrays: tuple = field(default=(), repr=False)            # simulator: (name, address, bytes)
    estimated: tuple = field(default=(), repr=False)         # metrics that are estimates

    @property
    def simulated(self) -> bool:
        """True for a launch counted on the CPU simulator (nothing was measured)."""
        return self.counts is not None

    @property
    def stand_in(self) -> bool:
        """True when the simulator ran a stand-in for the GPU's kernel (its
        code calls ``wbsim_stand_in()``): the counts and the prediction are
        not those of the kernel a GPU runs."""
        return self.counts is not None and self.counts.stand_in

    @property
    def limiter(self) -> str | None:
        """What limits the kernel: ``"memory"`` or ``"compute"``, the unit
        nearer its peak, when that unit is at or above
        :data:`LATENCY_BOUND_PCT` % of it; ``"latency"`` when both are under
        it (neither is saturated: too few bytes or instructions in flight to
        hide the latency, or too few threads); None when either was not measured.
        Counted on the simulator: the predicted limiter, ``"memory"``,
        ``"compute"`` or ``"latency"``.

        ``compute`` is Nsight Compute's SM throughput, which counts the issue
        of load and store instructions too: a kernel that moves a few bytes
        per thread (a one-float copy) can show an SM throughput as high as
        its memory throughput while neither is near its peak. Such a kernel
        is latency-bound, not compute-bound, and ``limiter`` says so."""
        if self.memory_pct is None or self.compute_pct is None:
            return self.predicted.limiter if self.predicted is not None else None
        if self.latency_bound:
            return "latency"
        return "memory" if self.memory_pct >= self.compute_pct else "compute"

    @property
    def latency_bound(self) -> bool:
        """True when both throughputs are under :data:`LATENCY_BOUND_PCT` of
        peak: the kernel neither saturates memory nor compute (too little
        parallelism, or it waits on latency)."""
        if self.predicted is not None and self.memory_pct is None:
            return self.predicted.latency_bound
        values = [v for v in (self.memory_pct, self.compute_pct) if v is not None]
        return bool(values) and max(values) < LATENCY_BOUND_PCT

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOPs per DRAM byte (predicted on the simulator)."""
        if self.predicted is not None and not self.dram_bytes:
            return self.predicted.intensity
        if not self.flops or not self.dram_bytes:
            return None
        return self.flops / self.dram_bytes

    @property
    def gflops(self) -> float | None:
        """Performance: FLOPs per second, in GFLOP/s (predicted on the simulator)."""
        if self.predicted is not None and not self.duration:
            return self.predicted.gflops
        if not self.flops or not self.duration:
            return None
        return self.flops / self.duration / 1e9

    def access_map(self, line: int | None = None, what: str | None = None, *, ax=None):
        """Draw one warp's accesses of a source line (the worst one by
        default): which sector or bank each lane touched. ``what``: ``"global
        load"``, ``"shared store"``... when the line has several kinds."""
        from .access_map import plot_access_map  # (matplotlib, when a map is drawn)
        rows = [r for r in self.lines if r.sample is not None and (line is None or r.line == line)
                and (what is None or r.what == what)]
        if not rows:
            known = ", ".join(f"{r.line} ({r.what})" for r in self.lines if r.sample is not None)
            raise ArgumentValueError(
                f"no sampled access on line {line}{f' ({what})' if what else ''}; "
                f"lines with one: {known or 'none (a launch on a GPU has none)'}")
        shared = self.counts.shared_variables if self.counts is not None else ()
        return plot_access_map(rows[0], shared, self.arrays, ax=ax)

    def line_table(self, limit: int | None = None):
        """The source lines, worst first, as a table (``to_pandas()``'s
        columns; HTML in a notebook)."""
        return LineTable(self.lines[:limit] if limit else self.lines, self.name)

    @property
    def dram_gbps(self) -> float | None:
        """DRAM bytes (read and written) per second, in GB/s."""
        if self.dram_bytes is None or not self.duration:
            return None
        return self.dram_bytes / self.duration / 1e9

    def bound(self) -> str:
        """In words: what limits the kernel."""
        if self.limiter is None:
            return "N/A"
        if self.limiter == "latency":
            return (f"latency (memory {self.memory_pct:.0f}%, compute {self.compute_pct:.0f}% "
                    "of peak)")
        return self.limiter

    @classmethod
    def from_row(cls, row: dict) -> "KernelProfile":
        values = {k: number(*v) for k, v in row.items() if isinstance(v, tuple)}
        get = {attr: values.get(name) for attr, name in METRICS.items()}
        flop_counts = [(values.get(m), w) for m, w in FLOP_METRICS.items()]
        flops = (sum((v or 0) * w for v, w in flop_counts)
                 if any(v is not None for v, _ in flop_counts) else None)
        registers = get["registers"]
        return cls(id=int(number(row.get("ID", "0")) or 0), name=row.get("Kernel Name", "?"),
                   duration=get["duration"], compute_pct=get["compute_pct"],
                   memory_pct=get["memory_pct"], dram_pct=get["dram_pct"],
                   dram_bytes=None if get["dram_bytes"] is None else int(get["dram_bytes"]),
                   occupancy_pct=get["occupancy_pct"],
                   theoretical_occupancy_pct=get["theoretical_occupancy_pct"],
                   registers=None if registers is None else int(registers),
                   block=_dims(row.get("Block Size", "")), grid=_dims(row.get("Grid Size", "")),
                   flops=flops, metrics=values)


_COLUMNS = ["kernel", "duration_us", "memory_pct", "compute_pct", "limiter", "occupancy_pct",
            "registers", "block", "grid", "dram_bytes", "flops", "gflops", "dram_gbps"]


def _fmt(value, spec: str = ".1f"):
    return "N/A" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


class NcuReport:
    """Nsight Compute's measurements of the kernels a program, a cell or one
    launch ran: one :class:`KernelProfile` per profiled launch (``report[0]``,
    ``report["saxpy"]``, iteration), ``to_pandas()``, a table in the
    notebook and points on the roofline (:meth:`plot_roofline`).

    ``path`` is the ``.ncu-rep`` file (open it in the Nsight Compute GUI for
    every section), ``command`` the ncu command line, ``output`` what the
    profiled process and ncu printed. Times are measured under ncu, which
    locks the clocks to base and flushes the caches before each launch:
    durations are longer than :func:`workbench.bench`'s.
    """

    def __init__(self, kernels, *, target: str, command=(), path: str | None = None,
                 output: str = ""):
        self.kernels: list[KernelProfile] = list(kernels)
        self.target = target
        self.command = list(command)
        self.path = path
        self.output = output

    @classmethod
    def from_csv(cls, text: str, **kwargs) -> "NcuReport":
        """A report from the text of an ``ncu --csv`` export (raw or details page)."""
        return cls([KernelProfile.from_row(r) for r in read_csv(text)], **kwargs)

    def __len__(self) -> int:
        return len(self.kernels)

    def __iter__(self):
        return iter(self.kernels)

    def __getitem__(self, key) -> KernelProfile:
        """By position, or the first launch of the kernel named ``key``."""
        if isinstance(key, str):
            for k in self.kernels:
                if key in (k.name, short_name(k.name)):
                    return k
            raise NameNotFound(
                f"no kernel {key!r} in this report; it has: "
                f"{', '.join(dict.fromkeys(k.name for k in self.kernels)) or 'none'}")
        return self.kernels[key]

    @property
    def simulated(self) -> bool:
        """True when the launches were counted on the CPU simulator (their
        times are predictions, not measurements)."""
        return bool(self.kernels) and all(k.simulated for k in self.kernels)

    def rows(self) -> list[dict]:
        if self.simulated:
            return [_simulated_row(k) for k in self.kernels]
        return [{"kernel": k.name, "duration_us": None if k.duration is None else k.duration * 1e6,
                 "memory_pct": k.memory_pct, "compute_pct": k.compute_pct, "limiter": k.bound(),
                 "occupancy_pct": k.occupancy_pct, "registers": k.registers,
                 "block": k.block, "grid": k.grid, "dram_bytes": k.dram_bytes, "flops": k.flops,
                 "gflops": k.gflops, "dram_gbps": k.dram_gbps} for k in self.kernels]

    def to_pandas(self):
        """One row per profiled launch: kernel, duration (µs), memory and
        compute throughput (% of peak), limiter, achieved occupancy (%),
        registers, block, grid, DRAM bytes, FLOPs, GFLOP/s, DRAM GB/s.
        Counted on the simulator: kernel, device, predicted µs, limiter and
        every counted metric by Nsight Compute's name."""
        if self.simulated:
            return pandas().DataFrame(self.rows())
        return pandas().DataFrame(self.rows(), columns=_COLUMNS)

    def _table(self) -> list[list]:
        return [[k.name, _fmt(k.duration and k.duration * 1e6, ".2f"), _fmt(k.memory_pct),
                 _fmt(k.compute_pct), k.bound(), _fmt(k.occupancy_pct),
                 _fmt(k.registers, "d"), "x".join(map(str, k.block or ())) or "N/A",
                 "x".join(map(str, k.grid or ())) or "N/A", _fmt(k.dram_gbps, ".1f"),
                 _fmt(k.gflops, ".1f")] for k in self.kernels]

    _HEADER = ["kernel", "time (µs)", "memory %", "compute %", "limiter", "occupancy %",
               "registers", "block", "grid", "DRAM GB/s", "GFLOP/s"]

    def __repr__(self) -> str:
        head = f"<NcuReport of {self.target}: {len(self)} kernel launch{'es' if len(self) != 1 else ''}"
        if not self.kernels:
            return head + ">"
        if self.simulated:
            return head + "\n" + "\n".join(_simulated_text(k) for k in self.kernels) + ">"
        rows = [self._HEADER] + self._table()
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self._HEADER))]
        lines = ["  ".join(str(v).ljust(w) if i in (0, 4) else str(v).rjust(w)
                           for i, (v, w) in enumerate(zip(r, widths))) for r in rows]
        return head + "\n" + "\n".join(lines) + "\n(memory/compute: % of peak throughput)>"

    def _repr_html_(self) -> str:
        if self.simulated:
            return _simulated_html(self)
        notes = ["memory and compute: throughput in % of the device's peak (Nsight Compute's "
                 "speed of light); the larger one is the limiter, both under "
                 f"{LATENCY_BOUND_PCT:.0f}%: latency (neither unit saturated)."]
        if self.path:
            notes.append(f"report: {self.path} (open it in Nsight Compute for every section)")
        def r(value, digits=1):
            return None if value is None else round(value, digits)
        rows = [[k.name, r(k.duration and k.duration * 1e6, 2), r(k.memory_pct), r(k.compute_pct),
                 k.bound(), r(k.occupancy_pct), k.registers, "x".join(map(str, k.block or ())) or None,
                 "x".join(map(str, k.grid or ())) or None, r(k.dram_gbps), r(k.gflops)]
                for k in self.kernels]
        return html_table(rows, self._HEADER, title=f"Nsight Compute: {self.target}", notes=notes)

    def roofline_points(self) -> list[dict]:
        """Each launch with FLOPs and DRAM bytes as a roofline point
        (:func:`workbench.benchmarking.plots.plot_roofline` draws them);
        counted on the simulator: the predicted point."""
        def label(k):
            return f"{k.name} (predicted on {k.predicted.device})" if k.simulated else f"{k.name} (ncu)"
        return [{"label": label(k), "name": label(k), "intensity": k.intensity,
                 "gflops": k.gflops, "simulated": False}
                for k in self.kernels if k.intensity and k.gflops]

    def plot_roofline(self, *others, ceilings=None, ax=None, annotate: bool = False,
                      title: str | None = None):
        """The device's roofline (measured ceilings) with this report's
        kernels as points, and ``others`` (BenchResults, reports) beside them."""
        if self.simulated and ceilings is None:  # the predicted device's published roofline
            ceilings = published_ceilings(self.kernels[0].predicted.device)
            title = title or f"predicted roofline of {ceilings.device}"
        return plot_roofline([self, *others], ceilings, ax=ax, annotate=annotate, title=title)


def published_ceilings(device):
    """A roofline's ceilings from GPU ``device``'s published peaks
    (:mod:`.gpus`): copy bandwidth at the model's DRAM efficiency, the FP32
    FMA peak."""
    g = gpu_figures(device)
    return Ceilings(device=f"{g.name} (published peaks)", backend="published figures",
                    simulated=False, copy_gbps=g.dram_gbps * DRAM_EFFICIENCY,
                    fma_gflops=g.fp32_gflops, measured=g.source)


_SUMMARY = [("global load sectors / request", counters.SECTORS_PER_REQUEST.format(op="ld")),
            ("global store sectors / request", counters.SECTORS_PER_REQUEST.format(op="st")),
            ("shared load bank conflicts", counters.SHARED_CONFLICTS.format(op="ld")),
            ("shared store bank conflicts", counters.SHARED_CONFLICTS.format(op="st")),
            ("active lanes per instruction (estimate)", counters.LANES_PER_INSTRUCTION)]


def _count(value) -> str:
    """A counter as text: whole numbers with thousands separators, ratios to two places."""
    if value is None:
        return "N/A"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _bound(k: KernelProfile) -> str:
    p = k.predicted
    if p.bound == "latency":
        return "latency-bound (too few warps in flight to hide their waits)"
    return f"{k.limiter}-bound ({p.bound})"


def _simulated_row(k: KernelProfile) -> dict:
    p = k.predicted
    return {"kernel": k.name, "device": p.device, "predicted_us": p.seconds * 1e6,
            "limiter": k.limiter, "bound": p.bound, "stand_in": k.stand_in, **k.metrics}


#: What a launch whose warps' access buffers were delivered part-way says.
CUT_NOTE = ("some warps made more accesses between two barriers than the counter holds at once "
            "(4 million): their instructions there were counted in parts, so requests and "
            "sectors may be too high; profile fewer iterations a thread to count them exactly")


def _simulated_text(k: KernelProfile) -> str:
    p = k.predicted
    out = [f"{k.name}: predicted {p.seconds * 1e6:.4g} µs on {p.device}, {_bound(k)} (a model, "
           f"not a measurement)"]
    out += [f"  {label}: {_count(k.metrics.get(name))}" for label, name in _SUMMARY]
    if k.stand_in:
        out.append(f"  {STAND_IN_NOTE}")
    if k.counts.cut:
        out.append(f"  {CUT_NOTE}")
    worst = [r for r in k.lines if r.advice][:3]
    out += [f"  line {r.line} ({r.what}): {r.advice}" for r in worst]
    return "\n".join(out)


def _simulated_html(report: NcuReport) -> str:
    header = ["kernel", "predicted time (µs)", "on", "limiter"] + [label for label, _ in _SUMMARY]
    rows = [[k.name, round(k.predicted.seconds * 1e6, 3), k.predicted.device, _bound(k)]
            + [None if k.metrics.get(name) is None else round(k.metrics[name], 2) for _, name in _SUMMARY]
            for k in report.kernels]
    notes = ["counted on the CPU simulator as Nsight Compute counts them (.metrics has every figure "
             "by ncu's name); the times are predictions of a model on the device named, not "
             "measurements"]
    notes += [f"{k.name}: {STAND_IN_NOTE}" for k in report.kernels if k.stand_in]
    notes += [f"{k.name}: {CUT_NOTE}" for k in report.kernels if k.counts.cut]
    html = html_table(rows, header, title=f"Simulator counts: {report.target}", notes=notes)
    for k in report.kernels[:4]:
        if k.lines:
            html += LineTable(k.lines[:8], k.name)._repr_html_()
    return html
