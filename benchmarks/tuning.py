"""The autotuner (``wb.tune``) measured against its targets, side by side.

    python benchmarks/tuning.py            # the active backend (GPU when there is one)
    python benchmarks/tuning.py --quick    # a smaller space for the strategy race
    WORKBENCH_SIM_DEVICES=2 python benchmarks/tuning.py   # the 2-device row on the simulator
    python benchmarks/tuning.py --kernel-tuner-examples DIR [--only-kernel-tuner] [--out DIR]
                                           # the Kernel Tuner row (a GPU, pip install kernel_tuner)

Targets (PASS/MISS printed beside each on a GPU):

    TPE vs random search, budget 40, space >= 500 configurations, 5 seeds:
        TPE's best within 5% of the exhaustive best more often than random's
    overhead of the tuner per configuration, compile excluded       <= 5 ms
    2 GPUs vs 1 for a tune of 64 configurations (Dask)               wall time <= 0.6x
    Kernel Tuner vs wb.tune on Kernel Tuner's examples/cuda/matmul.cu, the space and
    restriction of its matmul.py, both exhaustive, in one process:
        the same best configuration, and wb.tune's wall time           <= 0.9x Kernel Tuner's

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

The Kernel Tuner row: DIR holds Kernel Tuner's matmul.cu (its examples/cuda/, from a checkout
of Kernel Tuner: there is no default). Kernel Tuner runs as its matmul.py does (32
iterations, no answer to check, on CuPy: lang="CUPY"); wb.tune as a user runs it (the same 32
launches, every configuration checked against the default configuration's output). Both
compile from empty caches (a fresh CUPY_CACHE_DIR). Kernel Tuner's cache file is written under
--out (default $OUT, else the current folder) as kernel_tuner_matmul_cache.json, with
kernel_tuner_matmul_cache_best.json (its best configuration) beside it; load them with
WORKBENCH_KERNEL_TUNER_CACHE=... pytest -m gpu tests/capabilities/test_tuning_kernel_tuner.py.
The table is also written there as tuning_kernel_tuner.txt.

On the simulator the times are CPU wall-clock times; the figures carry no verdict.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
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


KT_LABEL = "Kernel Tuner vs wb.tune, Kernel Tuner's matmul.cu, exhaustive"
#: Kernel Tuner's examples/cuda/matmul.py: its space, restriction and grid divisors.
KT_PARAMS = {"block_size_x": [16 * 2**i for i in range(3)],
             "block_size_y": [2**i for i in range(6)],
             "tile_size_x": [2**i for i in range(4)],
             "tile_size_y": [2**i for i in range(4)]}
KT_RESTRICT = ["block_size_x==block_size_y*tile_size_y"]
KT_GRID_DIV = {"grid_div_x": ["block_size_x", "tile_size_x"],
               "grid_div_y": ["block_size_y", "tile_size_y"]}


def kernel_tuner_matmul(examples: Path, out: Path, simulated: bool) -> list[list]:
    """Kernel Tuner and wb.tune on Kernel Tuner's matmul example, one after the other."""
    try:
        from kernel_tuner import tune_kernel
    except ImportError as exc:
        return [[KT_LABEL, f"needs Kernel Tuner: pip install kernel_tuner ({exc})", "", ""]]
    if simulated:
        return [[KT_LABEL, "needs a GPU (Kernel Tuner runs CUDA kernels on a GPU only)", "", ""]]
    source_path = next((p for p in (examples / "matmul.cu", examples / "cuda" / "matmul.cu")
                        if p.is_file()), None)
    if source_path is None:
        return [[KT_LABEL, f"no matmul.cu in {examples}", "", ""]]
    source = source_path.read_text()
    width = 4096                       # the example's #define WIDTH
    rng = np.random.default_rng(0)
    A = rng.standard_normal((width, width)).astype(np.float32)
    B = rng.standard_normal((width, width)).astype(np.float32)
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="kt-row-")   # both compile afresh
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "kernel_tuner_matmul_cache.json"
    cache.unlink(missing_ok=True)
    # a launch of each first: the GPU's clocks up, CuPy's and the workbench's set-up done
    wb.compile("extern \"C\" __global__ void nop() {}")["nop"](grid=1, block=1)
    wb.synchronize()

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        results, env = tune_kernel("matmul_kernel", source, (width, width),
                                   [np.zeros_like(A), A, B], KT_PARAMS, restrictions=KT_RESTRICT,
                                   iterations=32, lang="CUPY", cache=str(cache), quiet=True,
                                   **KT_GRID_DIV)
    kt_wall = time.perf_counter() - start
    kt_best = {k: int(env["best_config"][k]) for k in KT_PARAMS}
    cache.with_name(cache.stem + "_best.json").write_text(json.dumps(kt_best))

    start = time.perf_counter()
    r = wb.tune(source, [np.zeros_like(A), A, B], kernel_name="matmul_kernel", space=KT_PARAMS,
                restrictions=KT_RESTRICT, problem_size=(width, width), output=0, repeat=32,
                cache=False, progress=False, **KT_GRID_DIV)
    wb_wall = time.perf_counter() - start
    kt_ran = sum(1 for row in results if "__error__" not in row)
    wb_ran = len(r.ok_rows())
    kt_times = {tuple(row[k] for k in KT_PARAMS): row["time"] * 1e-3 for row in results
                if "__error__" not in row}
    wb_times = {tuple(row["config"][k] for k in KT_PARAMS): row["median_s"] for row in r.ok_rows()}
    same = r.best == kt_best
    key_kt, key_wb = tuple(kt_best.values()), tuple((r.best or {}).values())
    best_text = (f"both {kt_best}" if same else
                 f"Kernel Tuner {kt_best} ({kt_times.get(key_kt, float('nan')) * 1e3:.3f} ms; "
                 f"wb.tune measured it {wb_times.get(key_kt, float('nan')) * 1e3:.3f} ms), "
                 f"wb.tune {r.best} ({wb_times.get(key_wb, float('nan')) * 1e3:.3f} ms; "
                 f"Kernel Tuner {kt_times.get(key_wb, float('nan')) * 1e3:.3f} ms)")
    ratio = wb_wall / kt_wall
    compile_s = sum(row["compile_s"] for row in r.rows)
    return [[f"{KT_LABEL}: best configuration", best_text, "", "PASS" if same else "MISS"],
            [f"{KT_LABEL}: wall time",
             f"Kernel Tuner {kt_wall:.1f} s ({kt_ran} of {len(results)} ran), wb.tune "
             f"{wb_wall:.1f} s ({wb_ran} of {len(r.rows)} ran, {compile_s:.1f} s compiling, "
             f"each checked): {ratio:.2f}x", "target <= 0.9x", "PASS" if ratio <= 0.9 else "MISS"],
            [f"{KT_LABEL}: Kernel Tuner's cache file", str(cache), "", ""]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a space of 256 configurations")
    parser.add_argument("--kernel-tuner-examples", type=Path, default=None, metavar="DIR",
                        help="a folder with Kernel Tuner's matmul.cu: adds the Kernel Tuner row")
    parser.add_argument("--only-kernel-tuner", action="store_true",
                        help="only the Kernel Tuner row")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")),
                        help="where the Kernel Tuner row writes its files (default: $OUT)")
    opts = parser.parse_args()
    b = wb.backend()
    simulated = bool(b.simulated)
    print(f"backend: {b.name}, device: {b.device_properties().name}"
          + ("  [simulated: CPU wall-clock times, no verdicts]" if simulated else ""))
    if opts.kernel_tuner_examples is not None or opts.only_kernel_tuner:
        if opts.kernel_tuner_examples is None:
            parser.error("--only-kernel-tuner needs --kernel-tuner-examples DIR (a folder with "
                         "Kernel Tuner's examples/cuda/matmul.cu)")
        examples = opts.kernel_tuner_examples
        rows = kernel_tuner_matmul(examples, opts.out, simulated)
        header = ["what", "result", "target", "verdict"]
        print_table("Kernel Tuner and wb.tune side by side", header, rows)
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            print_table("Kernel Tuner and wb.tune side by side", header, rows)
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "tuning_kernel_tuner.txt").write_text(table.getvalue())
        if opts.only_kernel_tuner:
            return
    race = strategy_race(QUICK_SPACE if opts.quick else SPACE, simulated)
    print_table("Strategies on measured times (spin kernel, known optimum)",
                ["what", "result", "found / exhaustive best", "verdict"], race)
    print_table("Tuner overhead and scaling", ["what", "figure", "verdict"],
                overhead(simulated) + two_gpus(simulated))


if __name__ == "__main__":
    main()
