"""The result of one benchmark: raw times and the statistics over them."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ArgumentValueError
from ..present.tables import html_fields, pandas, plain_value
from ..present.units import time_unit
from .ceiling_figures import Ceilings


#: Version of the dictionaries written by :meth:`BenchResult.to_dict`.
RESULT_SCHEMA = "workbench.bench-result/1"

#: What simulated results say about their times.
SIMULATED_TIMES = "simulated: CPU wall-clock times"
_SIMULATED_NOTE = f"{SIMULATED_TIMES}, not GPU times"


def format_seconds(seconds: float) -> str:
    """``0.0012345`` -> ``"1.234 ms"``; N/A for NaN or None."""
    if seconds is None or not np.isfinite(seconds):
        return "N/A"
    unit, scale = time_unit(seconds)
    return f"{seconds / scale:.{1 if unit == 'ns' else 3}f} {unit}"


def format_rate(value: float | None, unit: str) -> str:
    """A rate with 4 significant figures, or N/A."""
    if value is None or not np.isfinite(value):
        return "N/A"
    return f"{value:.4g} {unit}"


#: Columns of :meth:`BenchResult.summary` besides the parameters; a sweep
#: parameter may not take one of these names.
SUMMARY_COLUMNS = ("name", "repeats", "median_s", "mean_s", "std_s", "min_s", "max_s",
                   "q1_s", "q3_s", "iqr_s", "bytes", "flops", "gbps", "gflops",
                   "pct_bandwidth", "pct_compute", "simulated")


@dataclass(eq=False)
class BenchResult:
    """Times of one callable, measured by :func:`workbench.bench`.

    ``times`` holds every timed repeat in seconds (a float64 array of shape
    ``(repeats,)``), measured with the backend's events around each call; the
    statistics are properties computed from it. ``bytes`` and ``flops`` are
    per call, when given, and give :attr:`gbps` and :attr:`gflops`.
    ``simulated`` is True when the times are CPU wall-clock times of the
    simulator rather than GPU times. ``ceilings``: the device's measured
    :class:`~workbench.benchmarking.ceilings.Ceilings` when they were known
    as the result was made (its display then gives the rates as percentages
    of them); a result never looks them up itself.
    """

    name: str
    times: np.ndarray
    backend: str = "?"
    device: str = "?"
    simulated: bool = False
    warmup: int = 0
    flush_l2: bool = False
    input_sets: int = 1
    bytes: float | None = None
    flops: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    sweep: str | None = None
    timestamp: str = field(default_factory=lambda: _dt.datetime.now().isoformat(timespec="seconds"))
    ceilings: "Ceilings | None" = None

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=np.float64).reshape(-1)
        if self.times.size == 0:
            raise ArgumentValueError("a BenchResult needs at least one time")

    # -- statistics (seconds) ------------------------------------------------
    @property
    def repeats(self) -> int:
        """Number of timed calls."""
        return int(self.times.size)

    @property
    def median(self) -> float:
        return float(np.median(self.times))

    @property
    def mean(self) -> float:
        return float(np.mean(self.times))

    @property
    def std(self) -> float:
        """Standard deviation (population, ``ddof=0``)."""
        return float(np.std(self.times))

    @property
    def min(self) -> float:
        return float(np.min(self.times))

    @property
    def max(self) -> float:
        return float(np.max(self.times))

    @property
    def q1(self) -> float:
        """First quartile (25th percentile, linear interpolation)."""
        return float(np.percentile(self.times, 25))

    @property
    def q3(self) -> float:
        """Third quartile (75th percentile, linear interpolation)."""
        return float(np.percentile(self.times, 75))

    @property
    def iqr(self) -> float:
        """Interquartile range ``q3 - q1``: the spread of the middle half."""
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        """``iqr / median``: the spread as a fraction of the typical time."""
        return self.iqr / self.median if self.median > 0 else float("nan")

    # -- rates -----------------------------------------------------------------
    @property
    def gbps(self) -> float | None:
        """Bytes moved per call over the median time, in GB/s (1e9 bytes)."""
        if self.bytes is None or self.median <= 0:
            return None
        return self.bytes / self.median / 1e9

    @property
    def gflops(self) -> float | None:
        """Floating-point operations per call over the median time, in GFLOP/s."""
        if self.flops is None or self.median <= 0:
            return None
        return self.flops / self.median / 1e9

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP per byte (the roofline's x axis)."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def percent_of(self, ceilings) -> dict[str, float | None]:
        """Rates as percentages of measured :class:`~workbench.benchmarking.ceilings.Ceilings`:
        ``{"bandwidth": % of the copy ceiling, "compute": % of the compute ceiling}``."""
        bw, fl = self.gbps, self.gflops
        return {
            "bandwidth": None if bw is None or not ceilings.copy_gbps else 100 * bw / ceilings.copy_gbps,
            "compute": None if fl is None or not ceilings.compute_gflops else 100 * fl / ceilings.compute_gflops,
        }

    # -- views -------------------------------------------------------------------
    def summary(self, ceilings=None) -> dict[str, Any]:
        """One flat row: name, parameters, statistics in seconds and rates
        (what :func:`workbench.sweep` puts in its table)."""
        clash = set(self.params) & set(SUMMARY_COLUMNS)
        if clash:
            raise ArgumentValueError(
                f"parameter(s) {sorted(clash)} would overwrite the summary's own "
                "column(s) of that name; rename the parameter(s)")
        row: dict[str, Any] = {"name": self.name, **self.params,
                               "repeats": self.repeats, "median_s": self.median,
                               "mean_s": self.mean, "std_s": self.std,
                               "min_s": self.min, "max_s": self.max,
                               "q1_s": self.q1, "q3_s": self.q3, "iqr_s": self.iqr,
                               "bytes": self.bytes, "flops": self.flops,
                               "gbps": self.gbps, "gflops": self.gflops}
        if ceilings is not None:
            pct = self.percent_of(ceilings)
            row["pct_bandwidth"] = pct["bandwidth"]
            row["pct_compute"] = pct["compute"]
        row["simulated"] = self.simulated
        return row

    def to_pandas(self):
        """The raw times, one row per timed call: ``repeat``, ``time_s`` and
        ``input_set`` (which rotated input set the call used)."""
        n = self.repeats
        df = pandas().DataFrame({"repeat": np.arange(n), "time_s": self.times,
                           "input_set": np.arange(n) % max(self.input_sets, 1)})
        df.attrs.update(name=self.name, simulated=self.simulated, backend=self.backend)
        return df

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (times in seconds)."""
        return {
            "schema": RESULT_SCHEMA, "name": self.name, "backend": self.backend,
            "device": self.device, "simulated": self.simulated,
            "timestamp": self.timestamp, "sweep": self.sweep,
            "params": {str(k): plain_value(v) for k, v in self.params.items()},
            "options": {"warmup": self.warmup, "flush_l2": self.flush_l2,
                        "input_sets": self.input_sets},
            "bytes": self.bytes, "flops": self.flops, "unit": "s",
            "stats": {"repeats": self.repeats, "median": self.median, "mean": self.mean,
                      "std": self.std, "min": self.min, "max": self.max,
                      "q1": self.q1, "q3": self.q3, "iqr": self.iqr},
            "rates": {"gbps": self.gbps, "gflops": self.gflops},
            "times": self.times.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchResult":
        """Rebuild a result from :meth:`to_dict`'s output."""
        opts = d.get("options", {})
        return cls(name=d["name"], times=np.asarray(d["times"]), backend=d.get("backend", "?"),
                   device=d.get("device", "?"), simulated=bool(d.get("simulated")),
                   warmup=opts.get("warmup", 0), flush_l2=opts.get("flush_l2", False),
                   input_sets=opts.get("input_sets", 1), bytes=d.get("bytes"),
                   flops=d.get("flops"), params=dict(d.get("params", {})),
                   sweep=d.get("sweep"), timestamp=d.get("timestamp", ""))

    def to_json(self, path=None, *, indent: int | None = 2) -> str:
        """The result as JSON text (see :meth:`to_dict`); also written to
        ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    def to_csv(self, path=None) -> str:
        """The raw times as CSV (``repeat,time_s,input_set``); also written to
        ``path`` when given."""
        text = self.to_pandas().to_csv(index=False)
        if path is not None:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        return text

    # -- display --------------------------------------------------------------------
    def _rates(self) -> list[tuple[str, str]]:
        """(what, text) for bandwidth and compute, with the percentage of the
        measured ceiling when the result carries :attr:`ceilings`."""
        pct = self.percent_of(self.ceilings) if self.ceilings is not None else {}
        rows = []
        for what, value, unit, key, ceiling in (
                ("bandwidth", self.gbps, "GB/s", "bandwidth", "copy ceiling"),
                ("compute", self.gflops, "GFLOP/s", "compute", "FMA/GEMM ceiling")):
            if value is None:
                continue
            text = format_rate(value, unit)
            if pct.get(key) is not None:
                text += f" ({pct[key]:.3g}% of {ceiling})"
            rows.append((what, text))
        return rows

    def _rates_text(self) -> str:
        return ", ".join(text for _, text in self._rates())

    def __str__(self) -> str:
        text = (f"{self.name}: {format_seconds(self.median)} median, IQR {format_seconds(self.iqr)} "
                f"(min {format_seconds(self.min)}, max {format_seconds(self.max)}, "
                f"{self.repeats} repeats")
        if self.flush_l2:
            text += ", L2 flushed"
        text += ")"
        rates = self._rates_text()
        if rates:
            text += f", {rates}"
        if self.simulated:
            text += f"  [{_SIMULATED_NOTE}]"
        return text

    def __repr__(self) -> str:
        return f"<BenchResult {self}>"

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def _repr_html_(self) -> str:
        rows = [("median", format_seconds(self.median)), ("IQR", format_seconds(self.iqr)),
                ("min", format_seconds(self.min)), ("max", format_seconds(self.max)),
                ("mean ± std", f"{format_seconds(self.mean)} ± {format_seconds(self.std)}"),
                ("repeats", str(self.repeats))]
        rows += self._rates()
        options = [f"{self.warmup} warm-up calls"]
        if self.flush_l2:
            options.append("L2 flushed before each call")
        if self.input_sets > 1:
            options.append(f"{self.input_sets} input sets rotated")
        return html_fields(rows, title=self.name,
                           caption=f"on {self.device} ({self.backend}); {', '.join(options)}",
                           notes=[_SIMULATED_NOTE] if self.simulated else ())
