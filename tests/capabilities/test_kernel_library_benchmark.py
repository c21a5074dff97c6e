"""benchmarks/kernel_library.py runs and prints each figure beside its
ceiling and target (on the simulator: scaled-down sizes, labelled)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_benchmark_prints_figures_ceilings_and_verdicts(tmp_path):
    report = tmp_path / "kernels.csv"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernel_library.py"), "--only", "sum,gelu,relu,dropout",
         "--max-time", "0.01", "--report", str(report)],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "WORKBENCH_BACKEND": "simulator"})
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.strip() and line.split()[0] in
            ("sum", "gelu", "relu", "dropout")}
    assert set(rows) == {"sum", "gelu", "relu", "dropout"}
    assert "90%" in rows["sum"] and ("PASS" in rows["sum"] or "below" in rows["sum"])
    assert "85%" in rows["relu"] and "copy" in rows["relu"]
    assert "PASS" not in rows["dropout"] and "below" not in rows["dropout"]  # no target
    assert "simulated" in done.stdout
    assert "sum" in report.read_text()


def test_benchmark_runs_the_tensor_core_rows_with_their_checks():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernel_library.py"), "--only",
         "gemm_bf16,attention_half", "--max-time", "0.01"],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "WORKBENCH_BACKEND": "simulator"})
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith(("hgemm", "attention"))]
    assert len(rows) == 3                                  # bf16 GEMM, attention causal and not
    assert all("simulator" in row for row in rows)         # the variant that ran
    errors = [float(row.split()[-1]) for row in rows]      # against float64 NumPy
    assert all(0 <= e < 2e-2 for e in errors)
