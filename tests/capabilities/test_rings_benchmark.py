"""benchmarks/rings.py --host-only runs anywhere (no kernel: the benchmark
writes the answers itself) and accounts for every message it sent."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_host_only_benchmark_prints_each_batch_and_call():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rings.py"), "--host-only"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=300,
        env={**os.environ, "WORKBENCH_BACKEND": "simulator"})
    out = done.stdout
    for k in (1, 4, 16, 64):
        assert f"send()+recv() of {k} " in out
    assert "call() of a tuple" in out and "call() of a record" in out
    # 5 windows of 4096 messages for each of the six rows, each counted once by stats()
    assert f"stats() of {6 * 5 * 4096} messages" in out
