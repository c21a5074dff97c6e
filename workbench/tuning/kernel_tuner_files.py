"""Kernel Tuner's files read into a :class:`TuneResult`: its cache files and
T4 results files (``wb.tuning.from_kernel_tuner``).

A Kernel Tuner cache file (``tune_kernel(..., cache="file.json")``) is one
JSON document: ``device_name``, ``kernel_name``, ``problem_size``,
``tune_params_keys``, ``tune_params``, ``objective`` (newer versions) and
``cache``, one entry per configuration keyed by its values joined with
commas, holding the parameters, ``time`` (ms, the mean of ``times``) or an
error's name (``InvalidConfig``, ``CompilationFailedConfig``,
``RuntimeFailedConfig``), ``times``, ``compile_time``, ``benchmark_time``
(ms) and the metrics. Kernel Tuner appends entries as it goes and closes the
document at the end: a file left open by a run that stopped is read too.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import TuneError
from .result import TuneResult
from .t4 import INVALIDITY

#: Kernel Tuner's error names -> (status, reason).
_ERRORS = {"InvalidConfig": ("restricted", "Kernel Tuner: InvalidConfig (beyond the device's "
                                           "limits or a restriction)"),
           "CompilationFailedConfig": ("compile", "Kernel Tuner: CompilationFailedConfig"),
           "RuntimeFailedConfig": ("launch", "Kernel Tuner: RuntimeFailedConfig"),
           "ErrorConfig": ("error", "Kernel Tuner: ErrorConfig")}
_STATUS = {v: k for k, v in INVALIDITY.items() if k not in ("error",)}
#: Kernel Tuner's names of measurements -> the row's columns (factor from its unit).
_COLUMNS = {"time": ("median_s", 1e-3), "GFLOP/s": ("gflops", 1.0), "GB/s": ("gbps", 1.0),
            "nvml_energy": ("energy_j", 1.0), "energy": ("energy_j", 1.0)}
_OBJECTIVES = {"time": "time", "GFLOP/s": "gflops", "GB/s": "gbps", "nvml_energy": "energy",
               "energy": "energy"}


def _read_json(path: Path) -> dict:
    text = path.read_text().strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    # a cache file Kernel Tuner is still writing (or that a stopped run left open):
    # its entries end with "," and the closing "}\n}" is missing
    closed = text[:-1] if text.endswith(",") else text
    try:
        return json.loads(closed + "}\n}")
    except json.JSONDecodeError as exc:
        raise TuneError(f"{path} is neither a Kernel Tuner cache file nor a T4 results file "
                        f"(not JSON: {exc.msg} at line {exc.lineno})") from None


def _kind(name: str) -> str:
    return "launch" if name in ("block_size_x", "block_size_y", "block_size_z") else "define"


def from_kernel_tuner(path) -> "TuneResult":
    """A Kernel Tuner cache file or a T4 results file as a :class:`TuneResult`:
    its rows (one per configuration, times in seconds), ``best`` (Kernel
    Tuner's: the least time among the configurations that ran), the plots,
    ``to_pandas()`` and ``to_t4()``, to compare with a tune of the workbench."""
    path = Path(path)
    if not path.is_file():
        raise TuneError(f"{path}: no such file; give the path of a Kernel Tuner cache file "
                        "(tune_kernel(..., cache=...)) or of a T4 results file")
    document = _read_json(path)
    if isinstance(document, dict) and "cache" in document and "tune_params_keys" in document:
        return _from_cache(document, path)
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        return _from_t4(document, path)
    raise TuneError(f"{path} is neither a Kernel Tuner cache file (no 'cache' and "
                    "'tune_params_keys') nor a T4 results file (no 'results' list)")


def _row(index: int, config: dict, status: str, reason: str) -> dict:
    return {"index": index, "config": config, "status": status, "reason": reason,
            "median_s": None, "min_s": None, "repeats": 0, "gbps": None, "gflops": None,
            "energy_j": None, "compile_s": 0.0, "measure_s": 0.0}


def _from_cache(document: dict, path: Path) -> "TuneResult":
    keys = list(document["tune_params_keys"])
    objective = document.get("objective") or ["time"]
    objective = objective[0] if isinstance(objective, list) else objective
    rows = []
    for index, entry in enumerate(document["cache"].values()):
        config = {k: entry.get(k) for k in keys}
        error = next((v for v in entry.values() if isinstance(v, str) and v in _ERRORS), None)
        if error is not None:
            rows.append(_row(index, config, *_ERRORS[error]))
            continue
        row = _row(index, config, "ok", "")
        for name, (column, factor) in _COLUMNS.items():
            value = entry.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[column] = float(value) * factor
        times = [t for t in entry.get("times") or () if isinstance(t, (int, float))]
        if times:
            row.update(min_s=min(times) * 1e-3, repeats=len(times))
        row["compile_s"] = float(entry.get("compile_time") or 0.0) * 1e-3
        row["measure_s"] = float(entry.get("benchmark_time") or 0.0) * 1e-3
        rows.append(row)
    return _result(document.get("kernel_name", "?"), keys, rows, objective,
                   device=document.get("device_name") or "?",
                   problem_size=document.get("problem_size"),
                   note=f"read from Kernel Tuner's cache file {path.name}")


def _from_t4(document: dict, path: Path) -> "TuneResult":
    unit = str((document.get("metadata") or {}).get("timeunit", "milliseconds")).lower()
    to_seconds = {"milliseconds": 1e-3, "ms": 1e-3, "seconds": 1.0, "s": 1.0,
                  "microseconds": 1e-6, "us": 1e-6}.get(unit, 1e-3)
    rows, keys, objective = [], [], "time"
    for index, entry in enumerate(document["results"]):
        config = dict(entry.get("configuration") or {})
        keys += [k for k in config if k not in keys]
        status = _STATUS.get(entry.get("invalidity"), "error")
        row = _row(index, config, status, entry.get("reason") or (
            "" if status == "ok" else f"T4 invalidity: {entry.get('invalidity')}"))
        objective = (entry.get("objectives") or [objective])[0]
        for m in entry.get("measurements") or ():
            column = _COLUMNS.get(m.get("name"))
            value = m.get("value")
            if column is None or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            factor = to_seconds if column[0] == "median_s" else column[1]
            row[column[0]] = float(value) * factor
        times = entry.get("times") or {}
        runtimes = [t for t in times.get("runtimes") or () if isinstance(t, (int, float))]
        if runtimes:
            row.update(min_s=min(runtimes) * to_seconds, repeats=len(runtimes))
        compile_time = times.get("compilation_time", times.get("compilation"))
        row["compile_s"] = float(compile_time or 0.0) * to_seconds
        row["measure_s"] = float(times.get("benchmark") or 0.0) * to_seconds
        if status == "ok" and row["median_s"] is None and row["gflops"] is None:
            row.update(status="error", reason="T4 entry without a time measurement")
        rows.append(row)
    meta = document.get("metadata") or {}
    return _result(meta.get("kernel", path.stem), keys, rows, objective,
                   device=meta.get("device", "?"), problem_size=meta.get("problem_size"),
                   note=f"read from the T4 results file {path.name}")


def _result(kernel, keys, rows, objective, *, device, problem_size, note) -> "TuneResult":
    objective = _OBJECTIVES.get(objective, "time")
    result = TuneResult(kernel=kernel, params={k: _kind(k) for k in keys},
                        objectives=(objective,), strategy="Kernel Tuner", rows=rows,
                        space_size=len(rows), backend="kernel_tuner", device=device,
                        reference="as Kernel Tuner checked it", problem_size=problem_size,
                        note=note)
    if objective == "time" and not any(np.isfinite(r["median_s"] or np.nan) for r in rows):
        result.note += "; no configuration has a time"
    return result


__all__ = ["from_kernel_tuner"]
