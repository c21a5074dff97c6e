"""The simulator's sanitizer against compute-sanitizer: every case of
``sanitize_cases.py`` (planted bugs and correct kernels) run through
``wb.sanitize`` on the CPU simulator and, on the GPU, under compute-sanitizer;
prints per case both verdicts (error / warning / clean) and the lines their
findings name, and whether they agree.

    python benchmarks/sanitize_vs_gpu.py            # on the GPU machine, about 2-3 minutes
    python benchmarks/sanitize_vs_gpu.py --only race

Agreement: the same verdict and the same lines; where the case says the GPU
differs (``gpu=`` with ``why``: the simulator is stricter there), the GPU's
verdict is checked against that. With ``$OUT`` set, the table is written to
``$OUT/sanitize_vs_gpu.md`` and ``.csv``, and compute-sanitizer's own report of
each case to ``$OUT/sanitize_vs_gpu.log``. Exit status 1 when a case does not
agree.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import workbench as wb
from workbench.backends import gpu_unavailable_reason

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402
import sanitize_cases  # noqa: E402


def _lines(report) -> str:
    return ",".join(str(n) for n in sanitize_cases.found_lines(report)) or "-"


def _run(case, backend: str):
    """``(verdict, lines, report or None, seconds)`` of ``case`` on ``backend``."""
    start = time.perf_counter()
    try:
        with wb.backend(backend):
            report = sanitize_cases.run(case)
    except Exception as exc:  # noqa: BLE001 -- a case that cannot run is a row that says why
        return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}", "-", None, \
            time.perf_counter() - start
    return report.verdict, _lines(report), report, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="only the cases whose name contains this")
    parser.add_argument("--no-gpu", action="store_true", help="the simulator's side alone")
    args = parser.parse_args(argv)
    cases = [c for c in sanitize_cases.cases() if args.only in c.name]
    gpu = not args.no_gpu and gpu_unavailable_reason() is None
    if not args.no_gpu and not gpu:
        print(f"no GPU here ({gpu_unavailable_reason()}): the simulator's side alone")
    rows, log, disagree = [], [], 0
    for case in cases:
        expected_lines = ",".join(map(str, case.lines())) if case.expect != "clean" else "-"
        sim, sim_lines, _, sim_s = _run(case, "simulator")
        ok_sim = sim == case.expect and (case.tool is None or sim_lines == expected_lines)
        if case.tool is None or not gpu:
            cs, cs_lines, cs_s, ok_gpu = "n/a", "-", 0.0, True
        else:
            cs, cs_lines, report, cs_s = _run(case, "cupy")
            want = case.gpu or case.expect
            ok_gpu = cs == want and (want == "clean" or cs_lines == expected_lines)
            if report is not None:
                log.append(f"## {case.name}\n{report.output}")
        agree = ("n/a" if cs == "n/a" else "yes" if sim == cs and sim_lines == cs_lines else
                 "stricter" if ok_gpu and case.gpu else "NO")
        if not (ok_sim and ok_gpu):
            disagree += 1
        rows.append([case.name, case.tool or "schedules", sim, sim_lines, cs, cs_lines, agree,
                     "ok" if ok_sim and ok_gpu else "UNEXPECTED", f"{sim_s:.1f}/{cs_s:.1f}",
                     case.why])
    header = ["case", "tool", "simulator", "lines", "compute-sanitizer", "lines", "agree",
              "as expected", "s (sim/gpu)", "why they may differ"]
    print_table("wb.sanitize: the simulator and compute-sanitizer", header, rows)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        with open(Path(out) / "sanitize_vs_gpu.csv", "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
        with open(Path(out) / "sanitize_vs_gpu.md", "w") as f:
            f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
            f.writelines("| " + " | ".join(str(c) for c in r) + " |\n" for r in rows)
        (Path(out) / "sanitize_vs_gpu.log").write_text("\n".join(log))
        print(f"\nwritten: {out}/sanitize_vs_gpu.md, .csv, .log")
    print(f"\n{len(rows) - disagree} of {len(rows)} cases as expected")
    return 1 if disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
