"""A tune's rows in the T4 autotuning results format (schema 1.0.0).

T4 is the interchange format of the autotuning community's open schemas
(https://github.com/odgaard/TuningSchema), the one Kernel Tuner writes with
``store_output_file`` / ``store_metadata_file``: a results document, one
entry per configuration (``configuration``, ``times``, ``invalidity``,
``correctness``, ``measurements``, ``objectives``), and a metadata document
(hardware, environment). Times are in milliseconds, as Kernel Tuner writes
them (the results document's ``metadata.timeunit`` says so).
"""
from __future__ import annotations

import json
import platform
from importlib import metadata as package_metadata
from pathlib import Path

from .._version import __version__
from ..present.tables import plain_value

SCHEMA_VERSION = "1.0.0"

#: A row's status -> T4's ``invalidity``.
INVALIDITY = {"ok": "correct", "compile": "compile", "launch": "runtime", "error": "runtime",
              "check": "correctness", "restricted": "constraints", "timeout": "timeout"}

#: The workbench's objectives -> (the measurement's name, as Kernel Tuner names
#: it, the row's column, its unit, the factor from the row's value).
MEASUREMENTS = {"time": ("time", "median_s", "ms", 1e3),
                "gbps": ("GB/s", "gbps", "GB/s", 1.0),
                "gflops": ("GFLOP/s", "gflops", "GFLOP/s", 1.0),
                "energy": ("energy", "energy_j", "J", 1.0)}


def _ms(seconds) -> float:
    return float(seconds or 0.0) * 1e3


def t4_entry(row: dict, objectives) -> dict:
    """One configuration of a results document."""
    measurements = []
    if row["status"] == "ok":
        for objective in ("time", "gbps", "gflops", "energy"):
            name, column, unit, factor = MEASUREMENTS[objective]
            value = row.get(column)
            if value is not None:
                measurements.append({"name": name, "value": float(value) * factor, "unit": unit})
        if row.get("min_s") is not None:
            measurements.append({"name": "min_time", "value": _ms(row["min_s"]), "unit": "ms"})
    entry = {
        "configuration": {k: plain_value(v) for k, v in row["config"].items()},
        "times": {"compilation_time": _ms(row.get("compile_s")),
                  "benchmark": _ms(row.get("measure_s")), "runtimes": []},
        "invalidity": INVALIDITY.get(row["status"], "runtime"),
        # 1: the output matched the reference (or nothing was checked); 0: it did not
        "correctness": 0 if row["status"] == "check" else 1,
        "measurements": measurements,
        "objectives": [MEASUREMENTS[o][0] for o in objectives],
    }
    if row.get("reason"):
        entry["reason"] = row["reason"]
    return entry


def t4_results(result) -> dict:
    """The T4 results document of a :class:`~workbench.tuning.TuneResult`."""
    return {"schema_version": SCHEMA_VERSION,
            "results": [t4_entry(row, result.objectives) for row in result.rows],
            "metadata": {"timeunit": "milliseconds", "kernel": result.kernel,
                         "device": result.device, "backend": result.backend,
                         "simulated": bool(result.simulated), "strategy": result.strategy,
                         "problem_size": plain_value(result.problem_size),
                         "tool": f"cuda-workbench {__version__}"}}


def _requirements() -> list[str]:
    out = [f"cuda-workbench=={__version__}"]
    for name in ("numpy", "cupy", "cupy-cuda12x", "cupy-cuda13x", "optuna", "distributed"):
        try:
            out.append(f"{name}=={package_metadata.version(name)}")
        except package_metadata.PackageNotFoundError:
            pass
    return out


def t4_metadata(result) -> dict:
    """The T4 metadata document: the device the tune ran on and the software."""
    device = {"name": result.device, "backend": result.backend,
              "simulated": bool(result.simulated)}
    return {"schema_version": SCHEMA_VERSION,
            "metadata": {"hardware": {"hardware_description": [device],
                                      "operating_system": platform.system() or "unknown"},
                         "environment": {"device_query": device,
                                         "requirements": _requirements()}}}


def metadata_path(path) -> Path:
    """Where the metadata document of results file ``path`` goes: ``<stem>_metadata.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}_metadata.json")


def write_t4(path, results: dict, metadata: dict) -> None:
    """Write the results document to ``path`` and the metadata beside it."""
    path = Path(path)
    path.write_text(json.dumps(results, indent=1))
    metadata_path(path).write_text(json.dumps(metadata, indent=1))


__all__ = ["t4_results", "t4_metadata", "write_t4", "metadata_path", "INVALIDITY",
           "SCHEMA_VERSION"]
