"""The autotuner (``wb.tune``) measured against its targets, side by side.

    python benchmarks/tuning.py            # the active backend (GPU when there is one)
    python benchmarks/tuning.py --quick    # a smaller space for the strategy race
    WORKBENCH_SIM_DEVICES=2 python benchmarks/tuning.py   # the 2-device row on the simulator

Targets (PASS/MISS printed beside each on a GPU):

    TPE vs random search, budget 40, space >= 500 configurations, 5 seeds:
        TPE's best within 5% of the exhaustive best more often than random's
    overhead of the tuner per configuration, compile excluded       <= 5 ms
    2 GPUs vs 1 for a tune of 64 configurations (Dask)               wall time <= 0.6x

The strategy race: a spin kernel whose time is a known function of its block
size, a ``-D`` define and a template argument (``base * f(block, A, B)``
clock cycles, one optimum) is measured at every one of 512 configurations
by ``wb.tune(strategy="grid")``: real timings, the exhaustive best known.
Then random search and TPE are replayed on those measured times through the
tuner's own search loop (the same ask/tell, duplicates and budget), five
seeds each, so the race costs no further measurements.

The overhead: the tune's wall time per configuration minus the time spent
compiling and measuring (``compile_s``, ``measure_s`` of each row), with
every configuration already compiled.

On the simulator the times are CPU wall-clock times; the figures carry no verdict.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import workbench as wb
from workbench.tuning import tuner as tuner_module
from workbench.tuning.result import TuneResult
from workbench.tuning.space import Space
from workbench.tuning.strategies import make_search
from workbench.tuning.task import Task

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402

SPIN = r"""
#ifndef A
#define A 0
#endif
template <int B>
__global__ void spin(float* out, long long base)
{
    const float bx = blockDim.x / 32.0f - 11.0f;
    const float f = 1.0f + bx * bx / 32.0f + (A - 5) * (A - 5) / 4.0f + (B - 2) * (B - 2) / 2.0f;
    if (threadIdx.x == 0) {
        const long long start = clock64(), cycles = (long long)(base * f);
        while (clock64() - start < cycles) { }
        out[blockIdx.x] = 1.0f;
    }
}
"""
SPACE = {"block": [32 * k for k in range(1, 17)], "A": list(range(8)), "B": [0, 1, 2, 3]}
QUICK_SPACE = {"block": [32 * k for k in range(1, 17)], "A": list(range(8)), "B": [1, 2]}
PLAN = {"max_time": 0.01, "min_repeat": 3, "warmup_time": 0.0}
SEEDS = range(5)
BUDGET = 40


class _TableRunner:
    """The tuner's runner interface over measured times: no launches."""

    workers = 0
    resubmitted = 0
    capacity = 1

    def __init__(self, table: dict, space: Space):
        self.table, self.space, self._done = table, space, []

    def submit(self, task, handle):
        value = self.table[self.space.key(task.config)]
        self._done.append((task, handle, {"index": task.index, "config": dict(task.config),
                                          "status": "ok", "reason": "", "median_s": value}))

    def in_flight(self):
        return len(self._done)

    def finished(self):
        while self._done:
            yield self._done.pop(0)

    def close(self):
        pass


def replay(strategy: str, seed: int, table: dict, space: Space) -> float:
    """The best time ``strategy`` finds in ``BUDGET`` configurations of the measured table."""
    search = make_search(space, strategy, ["minimize"], seed)
    base = Task(source="", kernel="spin", template_params=("B",), config={},
                kinds={p: space.kind(p) for p in space.names}, output=None)
    result = TuneResult(kernel="spin", params={}, objectives=("time",), strategy=strategy)
    tuner_module._search(search, space, base, _TableRunner(table, space), result, False,
                         BUDGET, None, time.perf_counter(), None)
    assert len(result.rows) == BUDGET
    return result.best_value


def strategy_race(space_dict: dict, simulated: bool) -> list[list]:
    out = np.zeros(4, np.float32)
    base_cycles = 20_000 if simulated else 4_000
    start = time.perf_counter()
    exhaustive = wb.tune(SPIN, (out, np.int64(base_cycles)), space=space_dict, grid=4,
                         reference=False, cache=False, progress=False, **PLAN)
    measured_s = time.perf_counter() - start
    space = Space.make(space_dict, (), ("B",))
    table = {space.key(r["config"]): r["median_s"] for r in exhaustive.rows if r["status"] == "ok"}
    if len(table) != space.size:
        raise SystemExit(f"only {len(table)} of {space.size} configurations ran: "
                         f"{exhaustive.failed()[:1]}")
    best = min(table.values())
    within = sum(v <= 1.05 * best for v in table.values())
    rows = []
    hits = {}
    for strategy in ("random", "tpe"):
        try:
            found = [replay(strategy, seed, table, space) for seed in SEEDS]
        except wb.MissingExtra as exc:
            rows.append([f"{strategy}: {exc}", "", "", ""])
            continue
        hits[strategy] = sum(f <= 1.05 * best for f in found)
        rows.append([f"{strategy}, budget {BUDGET}, {len(SEEDS)} seeds",
                     f"{hits[strategy]}/{len(SEEDS)} within 5%",
                     f"worst {max(found) / best:.2f}x, median {np.median(found) / best:.2f}x",
                     ""])
    if len(hits) == 2:
        verdict = "PASS" if hits["tpe"] > hits["random"] else "MISS"
        rows[-1][3] = "" if simulated else verdict
    rows.insert(0, [f"exhaustive: {space.size} configurations measured in {measured_s:.0f} s",
                    f"{within} within 5% of the best",
                    f"best {exhaustive.best} ({best * 1e6:.1f} µs)", ""])
    return rows


def overhead(simulated: bool) -> list[list]:
    out = np.zeros(4, np.float32)
    space = {"block": [32 * k for k in range(1, 17)], "A": [4, 5], "B": [2]}
    rows = []
    for strategy in ("grid", "tpe"):
        options = dict(space=space, grid=4, reference=None, cache=False, progress=False,
                       strategy=strategy, budget=32, seed=0, **PLAN)
        try:
            wb.tune(SPIN, (out, np.int64(2000)), **options)      # compiles everything once
            start = time.perf_counter()
            r = wb.tune(SPIN, (out, np.int64(2000)), **options)
            wall = time.perf_counter() - start
        except wb.MissingExtra as exc:
            rows.append([f"tuner overhead per configuration ({strategy})", str(exc), ""])
            continue
        inner = sum(row["measure_s"] + row["compile_s"] for row in r.rows)
        per = (wall - inner) / len(r.rows)
        verdict = "" if simulated else ("PASS" if per <= 5e-3 else "MISS")
        rows.append([f"tuner overhead per configuration ({strategy}, {len(r.rows)} configs)",
                     f"{per * 1e3:.2f} ms (target <= 5 ms)", verdict])
    return rows


def two_gpus(simulated: bool) -> list[list]:
    label = "2 GPUs vs 1, tune of 64 configurations (Dask)"
    n = wb.backend().device_count()
    if n < 2:
        return [[label, f"needs two GPUs (this machine has {n})", ""]]
    try:
        from distributed import Client
    except ImportError as exc:
        return [[label, f"needs dask and distributed ({exc})", ""]]
    space = {"block": [32 * k for k in range(1, 17)], "A": [3, 4, 5, 6], "B": [2]}
    walls = {}
    for workers in (1, 2):
        # one worker per device: dask-cuda's LocalCUDACluster on GPUs where installed,
        # else worker processes pinned to devices 0 and 1 (the simulator's virtual ones too)
        with wb.tuning.local_cluster(workers) as cluster, Client(cluster) as client:
            client.wait_for_workers(workers)
            start = time.perf_counter()
            r = wb.tune(SPIN, (np.zeros(4, np.float32), np.int64(200_000)), space=space, grid=4,
                        client=client, cache=False, progress=False, max_time=0.05, min_repeat=3)
            walls[workers] = time.perf_counter() - start
            assert len(r.rows) == 64, r
    ratio = walls[2] / walls[1]
    verdict = "" if simulated else ("PASS" if ratio <= 0.6 else "MISS")
    return [[label, f"{walls[1]:.2f} s -> {walls[2]:.2f} s: {ratio:.2f}x (target <= 0.6x)",
             verdict]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a space of 256 configurations")
    opts = parser.parse_args()
    b = wb.backend()
    simulated = bool(b.simulated)
    print(f"backend: {b.name}, device: {b.device_properties().name}"
          + ("  [simulated: CPU wall-clock times, no verdicts]" if simulated else ""))
    race = strategy_race(QUICK_SPACE if opts.quick else SPACE, simulated)
    print_table("Strategies on measured times (spin kernel, known optimum)",
                ["what", "result", "found / exhaustive best", "verdict"], race)
    print_table("Tuner overhead and scaling", ["what", "figure", "verdict"],
                overhead(simulated) + two_gpus(simulated))


if __name__ == "__main__":
    main()
