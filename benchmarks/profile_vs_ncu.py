"""The simulator's counts and predicted times against a GPU's: run on a
machine with a GPU and Nsight Compute.

    python benchmarks/profile_vs_ncu.py                  # every case (a few minutes on an H200)
    python benchmarks/profile_vs_ncu.py --quick          # smaller sizes, to try it out
    python benchmarks/profile_vs_ncu.py --only probes,sum,sgemm --device H200
    python benchmarks/profile_vs_ncu.py --max-blocks 2048    # the simulator samples big launches

Every case of ``profile_cases.py`` (kernels written for one access pattern
each, and every kernel of the kernel library at its benchmark size) runs
three ways, and the table puts them side by side:

1. counted on the simulator (a child process, ``WORKBENCH_BACKEND=simulator``,
   started first: it runs on the CPUs while the GPU works), with a predicted
   time on ``--device``;
2. under Nsight Compute on the GPU (a child process ncu starts; every launch
   profiled once), asked for the same metrics (``workbench.profiling.counters``);
3. timed on the GPU in this process (the timing log's kernel times, CUPTI's
   where it records them: the median of ``--repeats`` calls after a warm-up).

Targets: every counter within 2% of ncu's; predicted against measured time over the
library's rows: median absolute error at most 25%, none off by more than 2x.
Counters the simulator estimates (active lanes per instruction, instructions
executed) are shown, not judged. Shared-memory wavefronts and bank conflicts
are compared as the instructions' addresses decide them
(``counters.instruction_level``): ncu's l1tex counters less the wavefronts
arbitration with other L1 traffic adds (its l1tex wavefronts less its
SASS-level ones), which on an H200 are a few percent, on conflict-free kernels
too; the summary prints how many there were. The tables are printed and, when ``$OUT``
is set (or ``--out``), written there as CSV and Markdown.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import workbench as wb
from workbench.profiling import counters
from workbench.profiling.report import METRICS, short_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402
import profile_cases  # noqa: E402

TOLERANCE = 0.02
#: (the SASS-level wavefronts are the compared wavefronts, see counters.instruction_level)
SHOWN = tuple(m for m in counters.COUNTED + counters.ESTIMATED
              if m not in {counters.SHARED_INSTRUCTION_WAVEFRONTS.format(op=op) for op in ("ld", "st")})
ASKED = (METRICS["duration"], *counters.ALL, "dram__bytes_read.sum", "dram__bytes_write.sum",
         "launch__grid_size", "launch__block_size")


# -- the child processes ------------------------------------------------------------------
def count_cases(path: str, quick: bool, only, device: str, max_blocks: int | None) -> None:
    """``--count``: on the simulator, count every case's launches; write JSON."""
    from workbench.profiling.simulated import default_device, report
    from workbench.runtime.session import session
    b = wb.backend()
    device = device or default_device(b)
    records = []
    for group, name, call in profile_cases.cases(quick, only):
        start = time.perf_counter()
        with b.count_launches(max_blocks=max_blocks) as launches:
            call()
        modules = [m for m in session().modules.values() if m.backend is b]
        for k in report(launches, modules, name, device):
            records.append({"case": name, "group": group, "kernel": short_name(k.name),
                            "metrics": k.metrics, "predicted_s": k.predicted.seconds,
                            "limiter": k.limiter, "bound": k.predicted.bound,
                            "threads": _threads(k.grid, k.block),
                            "blocks": [k.counts.blocks_recorded, k.counts.blocks],
                            "stand_in": k.stand_in,
                            "cpu_s": time.perf_counter() - start})
        print(f"counted {name}: {len(launches)} launches, {time.perf_counter() - start:.1f} s",
              flush=True)
    Path(path).write_text(json.dumps(records))


def run_cases(quick: bool, only) -> None:
    """``--run`` (under ncu): every case once; a MANIFEST line names its launches."""
    from workbench.runtime.session import session
    for group, name, call in profile_cases.cases(quick, only):
        wb.synchronize()
        session().timing_log.clear()
        call()
        wb.synchronize()
        kernels = [short_name(k) for k in wb.timings()["kernel"]]
        print("MANIFEST " + json.dumps({"case": name, "group": group, "kernels": kernels}),
              flush=True)


def _threads(grid, block) -> int:
    g, b = grid or (1,), block or (1,)
    out = 1
    for v in (*g, *b):
        out *= int(v)
    return out


# -- this process: GPU times, ncu's report, the comparison -------------------------------
def measured_times(quick: bool, only, repeats: int) -> dict:
    """Median kernel time per call of each case (s), from the timing log."""
    from workbench.runtime.session import session
    log = session().timing_log
    out = {}
    for group, name, call in profile_cases.cases(quick, only):
        for _ in range(3):
            call()
        wb.synchronize()
        log.clear()
        for _ in range(repeats):
            call()
        wb.synchronize()
        ms = list(wb.timings()["ms"])
        per = max(1, len(ms) // repeats)
        out[name] = statistics.median(sum(ms[i * per:(i + 1) * per]) / 1e3 for i in range(repeats))
    return out


def ncu_launches(quick: bool, only, timeout: float) -> list[dict]:
    """Every case's launches as ncu measured them: ``{"case", "kernel", "metrics", "threads"}``."""
    args = [str(Path(__file__).resolve()), "--run"] + (["--quick"] if quick else [])
    if only:
        args += ["--only", ",".join(sorted(only))]
    report = wb.profiling.profile_executable(sys.executable, args, metrics=ASKED, launch_count=None,
                                             timeout=timeout)
    manifest = [json.loads(line[9:]) for line in report.output.splitlines()
                if line.startswith("MANIFEST ")]
    launches, queue = [], list(report)
    for entry in manifest:
        for kernel in entry["kernels"]:
            while queue and short_name(queue[0].name) != kernel:
                queue.pop(0)  # a launch that is not the workbench's (a library's own kernel)
            if not queue:
                break
            k = queue.pop(0)
            launches.append({"case": entry["case"], "kernel": kernel,
                             "metrics": counters.instruction_level(k.metrics),
                             "arbitration": _arbitration(k.metrics),
                             "threads": _threads(k.grid, k.block)})
    return launches


def _arbitration(measured: dict) -> float:
    """Shared-memory wavefronts ncu's l1tex counters carry beyond what the
    instructions' addresses need (not compared)."""
    return sum(max(0.0, counters.arbitration_wavefronts(measured, op) or 0.0) for op in ("ld", "st"))


#: What the tables say of a kernel whose simulator code is a stand-in.
STAND_IN = "the simulator runs a stand-in (wbsim_stand_in) for the GPU's kernel: not compared"


def verdict(stand_in: bool, metric: str, sim: float, gpu: float | None) -> str:
    if gpu is None:
        return "no ncu value"
    if stand_in:
        return "not compared (stand-in)"
    if metric in counters.ESTIMATED:
        return "estimate"
    return "ok" if abs(sim - gpu) <= max(TOLERANCE * abs(gpu), 0.5) else "DIFF"


def _label(metric: str) -> str:
    return (metric.replace("l1tex__t_", "").replace("l1tex__data_", "").replace("_pipe_lsu_mem", "")
            .replace("smsp__", "").replace(".sum", "").replace(".ratio", ""))


def compare(sim: list[dict], gpu: list[dict]) -> list[list]:
    """Counter rows: case, kernel, metric, simulator, ncu, difference %, verdict."""
    rows, queue = [], list(gpu)
    for s in sim:
        match = next((g for g in queue if g["case"] == s["case"] and g["kernel"] == s["kernel"]), None)
        if match is not None:
            queue.remove(match)
        for metric in SHOWN:
            value = s["metrics"].get(metric, 0)
            other = match["metrics"].get(metric) if match else None
            if not value and not other:
                continue
            diff = (value - other) / other * 100 if other else None
            rows.append([s["case"], s["kernel"], _label(metric), value, other,
                         "N/A" if diff is None else f"{diff:+.2f}%",
                         verdict(s.get("stand_in", False), metric, value, other)])
    return rows


def time_rows(sim: list[dict], measured: dict) -> list[list]:
    """Case, group, predicted µs, measured µs, predicted / measured, limiter."""
    per_case: dict[str, list] = {}
    for s in sim:
        entry = per_case.setdefault(s["case"], [s["group"], 0.0, s["limiter"], False])
        entry[1] += s["predicted_s"]
        entry[3] = entry[3] or s.get("stand_in", False)
    rows = []
    for case, (group, predicted, limiter, stand_in) in per_case.items():
        got = measured.get(case)
        ratio = predicted / got if got else None
        rows.append([case, group, predicted * 1e6, None if got is None else got * 1e6,
                     None if ratio is None else round(ratio, 3), limiter,
                     STAND_IN if stand_in else ""])
    return rows


def summary(counter_rows: list[list], times: list[list], gpu: list[dict]) -> list[str]:
    judged = [r for r in counter_rows if r[6] in ("ok", "DIFF")]
    ok = sum(r[6] == "ok" for r in judged)
    shared = [r for r in counter_rows if "shared" in r[2] and r[6] in ("ok", "DIFF")]
    lines = [f"counters within {TOLERANCE:.0%} of ncu: {ok} of {len(judged)} "
             f"(global: {sum(r[6] == 'ok' for r in judged if 'global' in r[2])} of "
             f"{sum('global' in r[2] for r in judged)}; shared: "
             f"{sum(r[6] == 'ok' for r in shared)} of {len(shared)})",
             f"shared wavefronts ncu's l1tex counters carried beyond the instructions' own "
             f"(arbitration, not compared): {sum(g.get('arbitration', 0.0) for g in gpu):,.0f}"]
    library = [r for r in times if r[1] == "library" and r[4] and not r[6]]
    if library:
        errors = [abs(r[4] - 1) for r in library]
        worst = max(library, key=lambda r: max(r[4], 1 / r[4]))
        lines.append(f"predicted vs measured over {len(library)} library rows: median absolute "
                     f"error {statistics.median(errors):.0%} (target <= 25%); "
                     f"{sum(max(r[4], 1 / r[4]) <= 2 for r in library)} within 2x; worst "
                     f"{worst[0]} at {worst[4]:.2f}x")
    return lines


def write(out: str, counter_rows, times, lines) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    import csv
    with open(folder / "profile_vs_ncu_counters.csv", "w", newline="") as f:
        csv.writer(f).writerows([["case", "kernel", "metric", "simulator", "ncu", "difference",
                                  "verdict"], *counter_rows])
    with open(folder / "profile_vs_ncu_times.csv", "w", newline="") as f:
        csv.writer(f).writerows([["case", "group", "predicted_us", "measured_us", "ratio",
                                  "limiter", "note"], *times])
    md = ["# The simulator's counts and predictions against the GPU", "", *lines, "",
          "| case | kernel | metric | simulator | ncu | difference | verdict |", "|---" * 7 + "|"]
    md += ["| " + " | ".join(str(c) for c in r) + " |" for r in counter_rows]
    md += ["", "| case | group | predicted µs | measured µs | predicted/measured | limiter | note |",
           "|---" * 7 + "|"]
    md += ["| " + " | ".join("" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c)
                             for c in r) + " |" for r in times]
    (folder / "profile_vs_ncu.md").write_text("\n".join(md) + "\n")
    print(f"\ntables written to {folder}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", default="", help="library kernel names and/or 'probes'")
    parser.add_argument("--device", default=None, help="the GPU to predict for (default: this one)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per case")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for ncu")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for the tables")
    parser.add_argument("--max-blocks", type=int, default=None,
                        help="the simulator counts about so many blocks of a launch and scales "
                             "(faster, an estimate; default: every block)")
    parser.add_argument("--count", help=argparse.SUPPRESS)  # the simulator child
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the ncu child
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.count:
        count_cases(args.count, args.quick, only, args.device, args.max_blocks)
        return 0
    if args.run:
        run_cases(args.quick, only)
        return 0
    b = wb.backend()
    if b.simulated:
        print("profile_vs_ncu compares with a GPU: run it where CuPy sees one (and ncu is installed)")
        return 2
    device = args.device or b.device_properties().name
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        counts = os.path.join(tmp, "counts.json")
        child = [sys.executable, str(Path(__file__).resolve()), "--count", counts, "--device", device]
        child += (["--quick"] if args.quick else []) + (["--only", args.only] if only else [])
        child += ["--max-blocks", str(args.max_blocks)] if args.max_blocks else []
        sim_proc = subprocess.Popen(child, env={**os.environ, "WORKBENCH_BACKEND": "simulator"})
        gpu = ncu_launches(args.quick, only, args.timeout)
        print(f"ncu: {len(gpu)} launches in {time.perf_counter() - started:.0f} s", flush=True)
        measured = measured_times(args.quick, only, args.repeats)
        if sim_proc.wait() != 0:
            print("the simulator's counting failed (its output is above)")
            return 1
        sim = json.loads(Path(counts).read_text())
    counter_rows = compare(sim, gpu)
    times = time_rows(sim, measured)
    print_table(f"counters: simulator against Nsight Compute on {b.device_properties().name}",
                ["case", "kernel", "metric", "simulator", "ncu", "difference", "verdict"], counter_rows)
    print_table(f"time: predicted on {device} against measured ({b.timing_source()})",
                ["case", "group", "predicted µs", "measured µs", "predicted/measured", "limiter",
                 "note"], times)
    lines = summary(counter_rows, times, gpu)
    print("\n" + "\n".join(lines) + f"\n({time.perf_counter() - started:.0f} s in all)")
    if args.out:
        write(args.out, counter_rows, times, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
