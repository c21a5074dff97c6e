"""``wb.report(path)``: every benchmark of the session with the device and
the versions of everything that affects a timing, as JSON or CSV.

The JSON layout is described by ``report.schema.json`` beside this module
(JSON Schema, draft 2020-12).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import ArgumentTypeError, ArgumentValueError
from ..present.tables import html_table, pandas
from ..runtime.session import backend as active_backend
from . import history
from .ceilings import cached
from .result import SIMULATED_TIMES, format_seconds

#: Version of the report layout; bump on incompatible changes.
REPORT_SCHEMA = "workbench.report/1"
SCHEMA_FILE = Path(__file__).with_name("report.schema.json")

#: Rows shown in a notebook: the first and last half of these, beyond them "...".
_HTML_ROWS = 30

_DEVICE_FIELDS = ("name", "compute_capability", "multiprocessors", "total_memory",
                  "l2_cache_bytes", "clock_khz", "memory_clock_khz", "memory_bus_width",
                  "simulated")


class Report:
    """A benchmark report: ``data`` is the JSON document (a dict)."""

    def __init__(self, data: dict[str, Any], path: Path | None = None):
        self.data = data
        self.path = path

    @property
    def benchmarks(self) -> list[dict]:
        return self.data["benchmarks"]

    def rows(self) -> list[dict[str, Any]]:
        """One dict per benchmark: name, sweep id, parameters, statistics (s), rates."""
        rows = []
        for b in self.benchmarks:
            row = {"name": b["name"], "sweep": b["sweep"], **b["params"]}
            row.update({f"{k}_s" if k != "repeats" else k: v for k, v in b["stats"].items()})
            row.update(b["rates"])
            row["simulated"] = b["simulated"]
            rows.append(row)
        return rows

    def to_pandas(self):
        """One row per benchmark: name, parameters, sweep id, statistics (s), rates."""
        return pandas().DataFrame(self.rows())

    def to_json(self, path=None, *, indent: int | None = 2) -> str:
        text = json.dumps(self.data, indent=indent)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_csv(self, path=None) -> str:
        text = self.to_pandas().to_csv(index=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def _headline(self) -> str:
        env = self.data["environment"]
        device = env["device"].get("name", "N/A")
        sim = f" [{SIMULATED_TIMES}]" if env["simulated"] else ""
        where = f" written to {self.path}" if self.path else ""
        return (f"Benchmark report: {len(self.benchmarks)} benchmarks, {len(self.data['sweeps'])} "
                f"sweeps on {device} ({env['backend']}){sim}{where}")

    def __str__(self) -> str:
        lines = [self._headline()]
        versions = self.data["environment"]["versions"]
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in versions.items()))
        for b in self.benchmarks[-20:]:
            label = " ".join([b["name"], *(f"{k}={v}" for k, v in b["params"].items())])
            lines.append(f"  {label}: {format_seconds(b['stats']['median'])} median")
        if len(self.benchmarks) > 20:
            lines.insert(2, f"  ... {len(self.benchmarks) - 20} earlier benchmarks not shown")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Report {self._headline()}>"

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def _repr_html_(self) -> str:
        versions = self.data["environment"]["versions"]
        caption = ", ".join(f"{k} {v}" for k, v in versions.items())
        rows = self.rows()
        columns = list(dict.fromkeys(key for row in rows for key in row))
        cells = [[_shown(row.get(c)) for c in columns] for row in rows]
        if len(cells) > _HTML_ROWS:
            half = _HTML_ROWS // 2
            cells = cells[:half] + [["..."] * len(columns)] + cells[-half:]
        return html_table(cells, columns, title=self._headline(), caption=caption)


def _shown(value):
    """A table cell: floats to 6 significant digits (as pandas shows them)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def environment() -> dict[str, Any]:
    """Backend, device and versions (driver, CUDA runtime, NVRTC, CuPy, NumPy,
    Python, workbench); values the backend cannot give are left out."""
    b = active_backend()
    device: dict[str, Any] = {}
    try:
        props = b.device_properties()
        for name in _DEVICE_FIELDS:
            value = getattr(props, name, None)
            if value is not None:
                device[name] = list(value) if isinstance(value, tuple) else value
    except Exception:  # N/A, not an error
        device = {"name": "N/A"}
    versions = {"workbench": __version__, "python": platform.python_version(),
                "numpy": np.__version__}
    try:
        versions.update({k: str(v) for k, v in b.versions().items()})
    except Exception:
        pass
    return {"backend": b.name, "simulated": bool(b.simulated), "device": device,
            "versions": versions, "platform": platform.platform()}


def build_report(*, include_times: bool = True) -> dict[str, Any]:
    """The report document for the session so far."""
    benchmarks = []
    for r in history.results():
        d = r.to_dict()
        if not include_times:
            d["times"] = []
        benchmarks.append(d)
    sweeps = [{"id": run.id, "variants": list(run.names), "params": list(run.param_names),
               "points": len(run.results), "finished": bool(run.finished)}
              for run in history.sweeps()]
    roof = cached()
    return {"schema": REPORT_SCHEMA,
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
            "environment": environment(),
            "ceilings": roof.to_dict() if roof is not None else None,
            "benchmarks": benchmarks, "sweeps": sweeps}


def report(path=None, *, include_times: bool = True) -> Report:
    """Every benchmark of the session (``wb.bench``, sweeps, compares) with the
    device, driver, CUDA, CuPy and workbench versions and the measured
    ceilings (when measured).

    With ``path``, also writes it: JSON (``.json``, the default) or a CSV
    table of the statistics (``.csv``). ``include_times=False`` leaves the raw
    times out of the JSON. Returns a :class:`Report`.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(
            f"report(path): a file name (.json or .csv), got {type(path).__name__}")
    data = build_report(include_times=include_times)
    rep = Report(data, Path(path) if path is not None else None)
    if path is not None:
        suffix = Path(path).suffix.lower()
        if suffix == ".csv":
            rep.to_csv(path)
        elif suffix in (".json", ""):
            rep.to_json(path)
        else:
            raise ArgumentValueError(f"report({str(path)!r}): write .json (everything) or .csv "
                                     "(the statistics table)")
    return rep
