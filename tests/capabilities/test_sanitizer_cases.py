"""The planted bugs of ``benchmarks/sanitize_cases.py`` (and the correct
kernels beside them) through ``wb.sanitize``: on the simulator each case's
verdict (error / warning / clean) and the lines its findings name; on a GPU
(gpu-marked) compute-sanitizer's, against what the case expects there."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import sanitize_cases  # noqa: E402

CASES = sanitize_cases.cases()
GPU_CASES = [c for c in CASES if c.tool is not None]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_the_simulator(simulator, case):
    report = sanitize_cases.run(case)
    assert report.verdict == case.expect, repr(report)
    if case.expect != "clean" and case.tool is not None:
        assert sanitize_cases.found_lines(report) == case.lines(), repr(report)
    if case.tool is None:
        assert all(f.tool == "schedules" for f in report.findings)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=[c.name for c in GPU_CASES])
def test_case_under_compute_sanitizer(gpu, case):
    report = sanitize_cases.run(case)
    assert report.where == "compute-sanitizer"
    expected = case.gpu or case.expect
    assert report.verdict == expected, f"{case.why}\n{report.output}"
    if expected != "clean":
        assert sanitize_cases.found_lines(report) == case.lines(), report.output
