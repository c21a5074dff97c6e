"""The result of a tune: every configuration tried, the best one, plots."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..benchmarking.result import SIMULATED_TIMES, format_rate, format_seconds
from ..present.figures import figure_axes
from ..present.frames import readable
from ..present.tables import html_fields, html_table, pandas, plain_value, shorten
from .t4 import t4_metadata, t4_results, write_t4

#: objective -> (row column, direction, unit)
OBJECTIVES = {"time": ("median_s", "minimize", "s"),
              "gbps": ("gbps", "maximize", "GB/s"),
              "gflops": ("gflops", "maximize", "GFLOP/s"),
              "energy": ("energy_j", "minimize", "J")}

#: Columns of the table besides the parameters.
COLUMNS = ("index", "status", "reason", "median_s", "min_s", "repeats", "gbps", "gflops",
           "energy_j", "compile_s", "measure_s", "device")


def objective_text(objective: str, value) -> str:
    if value is None or not np.isfinite(value):
        return "N/A"
    if objective == "time":
        return format_seconds(value)
    if objective == "energy":
        return f"{value * 1e3:.4g} mJ" if value < 1 else f"{value:.4g} J"
    return format_rate(value, OBJECTIVES[objective][2])


def config_text(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


@dataclass(eq=False)
class TuneResult:
    """What :func:`workbench.tune` found.

    ``rows`` holds one dict per configuration evaluated, in the order they
    were asked for: its ``config``, ``status`` ("ok", or "compile", "launch",
    "check", "error", "timeout" with the ``reason``, or "restricted": beyond
    the device's limits, not a failure) and its measurements. ``best`` is
    the best configuration (a dict) of the first objective; with several
    objectives :meth:`pareto` gives the configurations no other beats in
    every objective. ``to_pandas()`` is the table, one column per parameter.
    """

    kernel: str
    params: dict[str, str]               # parameter -> kind
    objectives: tuple[str, ...]
    strategy: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    seed: Any = None
    budget: str = ""
    space_size: int = 0                  # allowed configurations
    restricted: int = 0                  # configurations the restrictions left out
    backend: str = "?"
    device: str = "?"
    simulated: bool = False
    reference: str = ""
    tolerance: str = ""
    elapsed_s: float = 0.0
    workers: int = 0                     # Dask workers (0: this process)
    resubmitted: int = 0                 # tasks run again after their worker was lost
    from_cache: bool = False
    problem_size: Any = None
    key: str = ""                        # the tuning cache's key
    checked: bool = False                # every configuration was checked against a reference
    note: str = ""                       # what the tuning cache did, when it is worth saying

    # -- the configurations --------------------------------------------------------
    def ok_rows(self) -> list[dict]:
        return [r for r in self.rows if r["status"] == "ok" and self._values(r) is not None]

    def failed(self) -> list[dict]:
        """Rows of the configurations that failed to compile, launch or check."""
        return [r for r in self.rows if r["status"] not in ("ok", "restricted")]

    def limited(self) -> list[dict]:
        """Rows of the configurations left out for the device's limits
        (threads or shared memory per block, registers), each with its reason."""
        return [r for r in self.rows if r["status"] == "restricted"]

    def _values(self, row) -> tuple | None:
        """The row's objective values, each to be minimised, or None."""
        out = []
        for objective in self.objectives:
            column, direction, _ = OBJECTIVES[objective]
            value = row.get(column)
            if value is None or not np.isfinite(value):
                return None
            out.append(value if direction == "minimize" else -value)
        return tuple(out)

    @property
    def best_row(self) -> dict | None:
        ok = self.ok_rows()
        return min(ok, key=self._values) if ok else None

    @property
    def best(self) -> dict | None:
        """The best configuration (of the first objective), or None if none ran."""
        row = self.best_row
        return dict(row["config"]) if row else None

    @property
    def best_value(self):
        """The first objective's value of the best configuration."""
        row = self.best_row
        return row[OBJECTIVES[self.objectives[0]][0]] if row else None

    @property
    def best_time(self) -> float | None:
        row = self.best_row
        return row["median_s"] if row else None

    def pareto(self) -> list[dict]:
        """Rows no other row beats in every objective (all of them equal or
        better, one strictly), in the order of the first objective."""
        ok = self.ok_rows()
        values = [self._values(r) for r in ok]
        front = [r for r, v in zip(ok, values)
                 if not any(all(a <= b for a, b in zip(w, v)) and w != v for w in values)]
        return sorted(front, key=self._values)

    def best_so_far(self) -> np.ndarray:
        """The best first-objective value after each configuration (NaN
        until one ran), as the search found them."""
        column, direction, _ = OBJECTIVES[self.objectives[0]]
        best, out = None, []
        for row in self.rows:
            value = row.get(column) if row["status"] == "ok" else None
            if value is not None and np.isfinite(value):
                if best is None or (value < best if direction == "minimize" else value > best):
                    best = value
            out.append(np.nan if best is None else best)
        return np.asarray(out, dtype=np.float64)

    # -- tables --------------------------------------------------------------------
    def to_pandas(self):
        """One row per configuration: the parameters, ``status``, ``reason``,
        times in seconds, rates, ``energy_j``, ``compile_s``, ``measure_s``."""
        records = [{**{k: row["config"].get(k) for k in self.params},
                    **{c: row.get(c) for c in COLUMNS}} for row in self.rows]
        df = pandas().DataFrame(records, columns=[*self.params, *COLUMNS])
        df.attrs.update(kernel=self.kernel, strategy=self.strategy, objectives=list(self.objectives),
                        device=self.device, backend=self.backend, simulated=self.simulated)
        return df

    def table(self, all: bool = False):  # noqa: A002 (as wb.timings(all=True))
        """:meth:`to_pandas`'s rows shown for reading (times in µs or ms per
        column, the reasons shortened at a word boundary, the parameters,
        status, times, rates and compile time first: ``all=True`` shows every
        column); the data are :meth:`to_pandas`'s, whole and in seconds."""
        df = self.to_pandas()
        if all:
            return readable(df)
        shown = [*self.params, "status", "median_s", "min_s", "gbps", "gflops", "energy_j",
                 "compile_s", "reason"]
        return readable(df, shown=shown, hide_empty=True,
                        more="result.table(all=True) shows them")

    def to_dict(self) -> dict:
        """JSON-ready (the tuning cache stores this)."""
        rows = [{k: (plain_value(v) if k != "config" else {a: plain_value(b) for a, b in v.items()})
                 for k, v in row.items() if k != "output"} for row in self.rows]
        return {"kernel": self.kernel, "params": dict(self.params),
                "objectives": list(self.objectives), "strategy": self.strategy,
                "seed": plain_value(self.seed), "budget": self.budget, "space_size": self.space_size,
                "restricted": self.restricted, "backend": self.backend, "device": self.device,
                "simulated": self.simulated, "reference": self.reference,
                "tolerance": self.tolerance, "elapsed_s": self.elapsed_s, "workers": self.workers,
                "resubmitted": self.resubmitted, "problem_size": plain_value(self.problem_size),
                "key": self.key, "checked": self.checked, "note": self.note, "rows": rows}

    def to_t4(self, path=None) -> dict:
        """The rows as a results document of the T4 autotuning format (schema
        1.0.0, the one Kernel Tuner writes), times in milliseconds. With
        ``path``, also written there, and the metadata document
        (:meth:`t4_metadata`) beside it as ``<stem>_metadata.json``."""
        document = t4_results(self)
        if path is not None:
            write_t4(path, document, self.t4_metadata())
        return document

    def t4_metadata(self) -> dict:
        """The T4 metadata document (schema 1.0.0): the device and the software."""
        return t4_metadata(self)

    @classmethod
    def from_dict(cls, d: dict, *, from_cache: bool = False) -> "TuneResult":
        d = dict(d)
        d["objectives"] = tuple(d["objectives"])
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**d, from_cache=from_cache)

    # -- plots ---------------------------------------------------------------------
    def plot_best(self, *, ax=None):
        """The best value so far against the number of configurations tried."""
        fig, ax = figure_axes(ax, figsize=(6, 3.6))
        objective = self.objectives[0]
        values = self.best_so_far()
        scale, unit = (1e3, "ms") if objective == "time" else (1.0, OBJECTIVES[objective][2])
        ax.step(np.arange(1, len(values) + 1), values * scale, where="post")
        ax.set_xlabel("configurations tried")
        ax.set_ylabel(f"best {objective} ({unit})")
        ax.set_title(self._title(f"{self.kernel}: best so far ({self.strategy})"))
        ax.grid(True, alpha=0.3)
        return fig

    def plot_params(self, *, objective: str | None = None):
        """The objective against each parameter, one panel per parameter
        (every configuration that ran; the best one highlighted)."""
        objective = objective or self.objectives[0]
        column = OBJECTIVES[objective][0]
        fig, axes = figure_axes(None, figsize=(3.2 * len(self.params), 3.2))
        fig.clear()
        axes = fig.subplots(1, len(self.params), squeeze=False)[0]
        ok = self.ok_rows()
        best = self.best_row
        scale, unit = (1e3, "ms") if objective == "time" else (1.0, OBJECTIVES[objective][2])
        for ax, name in zip(axes, self.params):
            values = [r["config"][name] for r in ok]
            labels = sorted({repr(v) for v in values}, key=lambda t: _sort_key(t))
            x = [labels.index(repr(v)) for v in values]
            ax.scatter(x, [r[column] * scale for r in ok], s=14, alpha=0.6)
            if best is not None:
                ax.scatter([labels.index(repr(best["config"][name]))], [best[column] * scale],
                           s=60, marker="*", color="C3", label="best")
            ax.set_xticks(range(len(labels)), [t.strip("'") for t in labels])
            ax.set_xlabel(name)
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(f"{objective} ({unit})")
        fig.suptitle(self._title(f"{self.kernel}: {objective} by parameter"))
        fig.tight_layout()
        return fig

    def _title(self, text: str) -> str:
        return text + (" [simulated]" if self.simulated else "")

    # -- display -------------------------------------------------------------------
    def _summary(self) -> str:
        failed, limited = len(self.failed()), len(self.limited())
        counts = (f"{len(self.rows)} configurations ({len(self.rows) - failed - limited} ran, "
                  f"{failed} failed" + (f", {limited} over the device's limits" if limited else "")
                  + ")")
        if self.best is None:
            return f"{self.kernel}: {counts}, none ran"
        objective = self.objectives[0]
        return (f"{self.kernel}: best {config_text(self.best)}: "
                f"{objective_text(objective, self.best_value)}; {counts}, strategy {self.strategy}")

    def __repr__(self) -> str:
        note = " [from the tuning cache]" if self.from_cache else ""
        sim = f"  [{SIMULATED_TIMES}]" if self.simulated else ""
        return f"<TuneResult {self._summary()}{note}{sim}>"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self) -> str:
        fields = [("kernel", self.kernel),
                  ("best", config_text(self.best) if self.best else "none ran")]
        for objective in self.objectives:
            column = OBJECTIVES[objective][0]
            row = self.best_row
            fields.append((objective, objective_text(objective, row[column] if row else None)))
        failed = self.failed()
        limited = self.limited()
        fields += [("configurations", f"{len(self.rows)} of {self.space_size} allowed "
                                      f"({self.restricted} left out by restrictions)"),
                   ("failed", _reasons(failed) if failed else "0")]
        if limited:
            fields.append(("over the device's limits", f"{len(limited)}, not compiled or not "
                           f"launched; first: {shorten(limited[0]['reason'], 160)}"
                           + (" (every reason: result.limited())" if len(limited) > 1 else "")))
        fields += [
                   ("strategy", f"{self.strategy}, budget {self.budget or 'all'}"
                                + (f", seed {self.seed}" if self.seed is not None else "")),
                   ("checked against", f"{self.reference} ({self.tolerance})")]
        if self.workers:
            fields.append(("Dask workers", f"{self.workers}"
                           + (f" ({self.resubmitted} task(s) run again after a lost worker)"
                              if self.resubmitted else "")))
        notes = []
        if self.from_cache:
            notes.append("from the tuning cache (tune(..., cache='refresh') measures again)")
        if self.note:
            notes.append(self.note)
        if self.simulated:
            notes.append(f"{SIMULATED_TIMES}, not GPU times")
        body = html_fields(fields, title=f"Tune of {self.kernel}",
                           caption=f"on {self.device} ({self.backend})", notes=notes)
        if len(self.objectives) > 1:
            front = self.pareto()
            rows = [[config_text(r["config"])] + [objective_text(o, r[OBJECTIVES[o][0]])
                                                  for o in self.objectives] for r in front]
            body += html_table(rows, ["configuration", *self.objectives],
                               title=f"Pareto front ({len(front)})")
        return body


def _sort_key(text: str):
    try:
        return (0, float(text))
    except ValueError:
        return (1, text)


def _reasons(rows: list[dict]) -> str:
    """``2 (1 check, 1 launch); first: <its reason, shortened at a word
    boundary>``; every reason whole is in ``failed()`` and ``table()``."""
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r["status"]] = kinds.get(r["status"], 0) + 1
    first = shorten(rows[0]["reason"], 160)
    whole = "" if first == " ".join(str(rows[0]["reason"]).split()) and len(rows) == 1 else \
        " (every reason: result.failed())"
    return (f"{len(rows)} (" + ", ".join(f"{n} {k}" for k, n in kinds.items())
            + f"); first: {first}{whole}")
