"""wb.tune and wb.tuned on both backends; wb.sweep and wb.tune on a Dask cluster.

The known optimum is a spin kernel whose time is ``base * (1 + 4 * ((log2
block - 7)^2 + (W - 2)^2))`` clock cycles: fastest at block 128 and W=2, the
next best five times slower, so the order holds against timing noise on the
simulator (clock64 is the CPU's time-stamp counter there) and on a GPU.
"""
from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.errors import MissingExtra, TuneError

from helpers import using_backend

SPIN = r"""
#ifndef W
#define W 1
#endif
#if W == 5
#error W=5 is not supported
#endif
extern "C" __global__ void spin(float* out, long long base)
{
    int b = 0;
    for (int v = blockDim.x; v > 1; v >>= 1) ++b;          // log2(block)
    long long f = 1 + 4 * ((b - 7) * (b - 7) + (W - 2) * (W - 2));
    if (threadIdx.x == 0) {
        long long start = clock64();
        while (clock64() - start < base * f) { }
        out[blockIdx.x] = (W == 4) ? -1.0f : (float)blockIdx.x;   // W=4 computes a wrong result
    }
}
"""
SPACE = {"block": [32, 64, 128, 256], "W": [1, 2, 3]}
FAST = {"max_time": 0.01, "min_repeat": 3}
BEST = {"block": 128, "W": 2}


def spin_args():
    return (np.zeros(4, np.float32), np.int64(20000))


def expected_spin(out, base):
    return np.arange(4, dtype=np.float32)


pytestmark = pytest.mark.usefixtures("private_tuning_cache")


def test_the_grid_finds_the_known_optimum(backend):
    r = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, progress=False, **FAST)
    assert r.strategy == "grid" and len(r.rows) == 12
    assert r.best == BEST
    df = r.to_pandas()
    assert list(df.columns[:2]) == ["block", "W"] and (df["status"] == "ok").all()
    # every configuration's time follows the model's order: the best is far ahead
    times = df.set_index(["block", "W"])["median_s"]
    assert times[(128, 2)] * 2.5 < times.drop((128, 2)).min()
    assert "block=128, W=2" in repr(r) and "block=128, W=2" in r._repr_html_()
    assert r.best_so_far()[-1] == pytest.approx(times[(128, 2)])


def test_failures_are_recorded_with_their_reason(backend):
    space = {"block": [128, 2048], "W": [2, 4, 5]}
    r = wb.tune(SPIN, spin_args(), space=space, grid=4, reference=expected_spin,
                progress=False, **FAST)
    rows = {(row["config"]["block"], row["config"]["W"]): row for row in r.rows}
    assert rows[(128, 2)]["status"] == "ok"
    assert rows[(128, 4)]["status"] == "check" and "differ from the reference" in rows[(128, 4)]["reason"]
    assert rows[(128, 5)]["status"] == "compile" and "W=5 is not supported" in rows[(128, 5)]["reason"]
    # a block the device cannot launch is left out before compiling, with the reason
    for w in (2, 4, 5):
        row = rows[(2048, w)]
        assert row["status"] == "restricted" and row["compile_s"] == 0.0
        assert "2048 threads per block" in row["reason"] and "allows 1024" in row["reason"]
    assert r.best == {"block": 128, "W": 2}
    assert len(r.failed()) == 2 and len(r.limited()) == 3
    assert "3 over the device's limits" in repr(r)
    # the workbench still works after the failures
    out = wb.to_device(np.zeros(4, np.float32))
    wb.compile(SPIN, defines=["W=2"])["spin"](out, np.int64(10), grid=4, block=32)
    np.testing.assert_array_equal(wb.to_host(out), np.arange(4, dtype=np.float32))


def test_the_default_configuration_is_the_reference(backend):
    r = wb.tune(SPIN, spin_args(), space={"W": [2, 4]}, block=128, grid=4, progress=False, **FAST)
    assert "default configuration" in r.reference
    assert [row["status"] for row in r.rows] == ["ok", "check"]
    assert r.best == {"W": 2}


def test_restrictions_leave_configurations_out(backend):
    calls = []

    def small(block, W):
        calls.append((block, W))
        return block * W <= 256

    r = wb.tune(SPIN, spin_args(), space=SPACE, restrictions=["W != 3", small], grid=4,
                progress=False, **FAST)
    tried = {(row["config"]["block"], row["config"]["W"]) for row in r.rows}
    assert tried == {(32, 1), (32, 2), (64, 1), (64, 2), (128, 1), (128, 2), (256, 1)}
    assert r.restricted == 5 and r.space_size == 7
    assert r.best == BEST
    with pytest.raises(ValueError, match="names \\['X'\\]"):
        wb.tune(SPIN, spin_args(), space=SPACE, restrictions="X > 1", grid=4, progress=False)
    with pytest.raises(TuneError, match="exclude every configuration"):
        wb.tune(SPIN, spin_args(), space=SPACE, restrictions="block > 1000", grid=4, progress=False)


def test_budgets_of_a_count_and_of_a_time(backend, monkeypatch):
    r = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy="random", budget=5, seed=3,
                progress=False, **FAST)
    assert len(r.rows) == 5 and len({tuple(row["config"].values()) for row in r.rows}) == 5
    again = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy="random", budget=5, seed=3,
                    progress=False, cache=False, **FAST)
    assert [row["config"] for row in again.rows] == [row["config"] for row in r.rows]
    # a time budget, on a clock of the test's own: each finished configuration takes a second
    from workbench.tuning import tuner
    now = [0.0]

    class Tick:
        def __init__(self, total, label):
            pass

        def update(self, n):
            now[0] += n

        def set_postfix_str(self, text, refresh=False):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tuner, "_clock", lambda: now[0])
    monkeypatch.setattr(tuner, "_progress_factory", Tick)
    timed = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy="tpe", budget="3s",
                    seed=1, cache=False, **FAST)
    assert len(timed.rows) == 3 and timed.budget == "3 s"   # started at 0, 1 and 2 s
    with pytest.raises(TuneError, match="budget"):
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, budget="soon", progress=False)


def test_tpe_finds_the_optimum_of_the_spin_kernel(backend):
    space = {"block": [16, 32, 64, 128, 256, 512], "W": [1, 2, 3]}    # 18 configurations
    r = wb.tune(SPIN, spin_args(), space=space, grid=4, strategy="tpe", budget=12, seed=0,
                progress=False, **FAST)
    assert len(r.rows) == 12 and r.best == BEST


def test_a_second_tune_comes_from_the_cache_and_tuned_uses_it(backend, capsys):
    first = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, progress=False, **FAST)
    assert not first.from_cache
    second = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, progress=False, **FAST)
    assert second.from_cache
    assert second.best == first.best and len(second.rows) == len(first.rows)
    assert "from the tuning cache" in repr(second)
    # another problem size is another entry
    other = (np.zeros(8, np.float32), np.int64(20000))
    third = wb.tune(SPIN, other, space={"W": [1, 2]}, block=128, grid=8, progress=False, **FAST)
    assert not third.from_cache
    # wb.tuned compiles and launches the stored best configuration, and says so
    tk = wb.tuned(wb.compile(SPIN)["spin"])
    out = wb.to_device(np.zeros(4, np.float32))
    tk(out, np.int64(20000), grid=4)
    assert tk.config == BEST and "tuned configuration used" in tk.note
    assert "tuned configuration used (block=128, W=2)" in capsys.readouterr().out
    np.testing.assert_array_equal(wb.to_host(out), np.arange(4, dtype=np.float32))
    # a size never tuned runs the kernel as it is, and says that too
    untuned = wb.tuned(wb.compile(SPIN)["spin"], block=64)
    small = wb.to_device(np.zeros(2, np.float32))
    untuned(small, np.int64(10), grid=2)
    assert untuned.config is None and "default used" in capsys.readouterr().out


TILED = r"""
template <int TILE>
__global__ void matmul(const float* A, const float* B, float* C, int n)
{
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] = (row < n && k0 + threadIdx.x < n) ? A[row * n + k0 + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (col < n && k0 + threadIdx.y < n) ? B[(k0 + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) C[row * n + col] = acc;
}
"""


def test_template_arguments_checked_against_numpy(backend):
    n = 24
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    r = wb.tune(TILED, (a, b, np.zeros((n, n), np.float32), np.int32(n)),
                space={"TILE": [4, 8], "block_x": [4, 8], "block_y": [4, 8]},
                restrictions="block_x == TILE and block_y == TILE",
                grid=lambda c: (-(-n // c["TILE"]), -(-n // c["TILE"])),
                reference=lambda a, b, c, n: a.astype(np.float64) @ b.astype(np.float64),
                rtol=1e-4, atol=1e-4, progress=False, **FAST)
    assert r.params == {"TILE": "template", "block_x": "launch", "block_y": "launch"}
    assert [row["status"] for row in r.rows] == ["ok", "ok"]
    assert r.best in ({"TILE": 4, "block_x": 4, "block_y": 4}, {"TILE": 8, "block_x": 8, "block_y": 8})
    assert "rtol=0.0001" in r.tolerance


def test_gbps_objective_and_a_pareto_front(backend):
    r = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, objective=["time", "gbps"],
                bytes=lambda c: 1e6 * c["W"], progress=False, **FAST)
    front = r.pareto()
    configs = [row["config"] for row in front]
    # the fastest is on the front; nothing on it is beaten in both objectives by another row
    assert BEST in configs
    for row in r.ok_rows():
        for f in front:
            assert not (row["median_s"] < f["median_s"] and row["gbps"] > f["gbps"])
    assert "Pareto front" in r._repr_html_()
    with pytest.raises(TuneError, match="needs flops="):
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, objective="gflops", progress=False)


def test_energy_needs_a_device_that_reports_it(simulator):
    with pytest.raises(TuneError, match="energy through NVML"):
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, objective="energy", progress=False)


@pytest.mark.gpu
def test_energy_per_launch_on_the_gpu():
    with using_backend("cupy"):
        from workbench.tuning.task import energy_available
        if not energy_available():
            pytest.skip("this GPU does not report its energy counter")
        r = wb.tune(SPIN, (np.zeros(4, np.float32), np.int64(2_000_000)),
                    space={"block": [64, 128]}, grid=4, objective=["time", "energy"],
                    progress=False, cache=False, **FAST)
        assert all(row["energy_j"] > 0 for row in r.ok_rows())
        assert r.pareto()


def test_the_missing_optuna_message(backend, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)   # import optuna now raises ImportError
    with pytest.raises(MissingExtra) as info:
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy="tpe", budget=4, progress=False)
    message = str(info.value)
    assert "\n" not in message and "pip install 'cuda-workbench[tune]'" in message
    assert "strategy='grid'" in message
    r = wb.tune(SPIN, spin_args(), space={"W": [1, 2]}, block=128, grid=4, progress=False, **FAST)
    assert r.best == {"W": 2}


def test_bad_arguments_are_explained(simulator):
    with pytest.raises(TuneError, match="strategy="):
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy="annealing")
    with pytest.raises(ValueError, match="space\\['W'\\] is empty"):
        wb.tune(SPIN, spin_args(), space={"W": []}, grid=4)
    with pytest.raises(TuneError, match="no kernel 'nope'"):
        wb.tune(SPIN, spin_args(), space=SPACE, kernel_name="nope")
    with pytest.raises(TypeError, match="unexpected keyword"):
        wb.tune(SPIN, spin_args(), space=SPACE, grid=4, flush=True)


def test_fixed_defines_as_a_dict_reach_every_configuration(backend):
    source = r"""
    extern "C" __global__ void fill(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = VALUE; }
    """
    r = wb.tune(source, (np.zeros(256, np.float32),), space={"block": [64, 128]},
                grid=lambda c: 256 // c["block"], defines={"VALUE": 7.5},
                reference=lambda out: np.full(256, 7.5, np.float32), progress=False, **FAST)
    assert [row["status"] for row in r.rows] == ["ok", "ok"], r.rows  # (read as names: VALUE=1)
    with pytest.raises(wb.errors.DefinesError, match="VALUE"):
        wb.tune(source, (np.zeros(256, np.float32),), space={"block": [64]}, grid=4,
                defines={"VALUE": None}, progress=False, **FAST)


def test_a_kernel_pickles_as_its_source(backend):
    k = wb.compile(SPIN, defines=["W=3"])["spin"]
    again = pickle.loads(pickle.dumps(k))
    out = wb.to_device(np.ones(4, np.float32))
    again(out, np.int64(1), grid=4, block=32)
    np.testing.assert_array_equal(wb.to_host(out), np.arange(4, dtype=np.float32))
    assert again.module.options.defines == ("W=3",)


# -- Dask ------------------------------------------------------------------------------------

def _cluster(monkeypatch, **options):
    distributed = pytest.importorskip("distributed")
    # worker processes choose their backend as this one does: the simulator here
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    cluster = distributed.LocalCluster(dashboard_address=None, threads_per_worker=1, **options)
    return cluster, distributed.Client(cluster)


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_a_tune_on_a_local_cluster_equals_the_local_tune(processes, monkeypatch, simulator):
    space = {"block": [64, 128, 4096], "W": [1, 2, 4, 5]}
    options = dict(space=space, restrictions="W != 1 or block == 64", grid=4,
                   progress=False, cache=False, **FAST)
    local = wb.tune(SPIN, spin_args(), **options)
    cluster, client = _cluster(monkeypatch, n_workers=2 if processes else 1, processes=processes)
    with cluster, client:
        remote = wb.tune(SPIN, spin_args(), client=client, **options)
    assert remote.workers == (2 if processes else 1)
    columns = ["block", "W", "status"]
    assert local.to_pandas()[columns].equals(remote.to_pandas()[columns])
    assert [r["reason"].split(":")[0] for r in local.rows] == \
        [r["reason"].split(":")[0] for r in remote.rows]
    assert remote.best == local.best == {"block": 128, "W": 2}


def test_a_sweep_on_a_local_cluster_equals_the_local_sweep(monkeypatch, simulator):
    k = wb.compile(SPIN, defines=["W=2"])["spin"]

    def setup(size, block):
        return wb.to_device(np.zeros(size, np.float32)), np.int64(2000)

    def run(out, base, block):
        return k(out, base, grid=out.shape[0], block=block)

    options = dict(sizes=[2, 4], params={"block": [32, 128]}, progress=False, repeat=3,
                   setup=lambda size, block: {"out": setup(size, block)[0],
                                              "base": np.int64(2000), "block": block})
    local = wb.sweep(run, **options)
    cluster, client = _cluster(monkeypatch, n_workers=1, processes=False)
    with cluster, client:
        remote = wb.sweep(run, client=client, **options)
    assert local[["name", "size", "block", "repeats"]].equals(remote[["name", "size", "block", "repeats"]])


def _die_once(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)          # the worker process dies holding this task
    return os.getpid()


def test_a_task_of_a_lost_worker_is_run_again(tmp_path, monkeypatch):
    from workbench.benchmarking.distributed import Pool
    cluster, client = _cluster(monkeypatch, n_workers=2, processes=True)
    with cluster, client:
        pool = Pool(client)
        pool.submit(_die_once, str(tmp_path / "died"), tag="x")
        results = list(pool.as_completed())
    assert len(results) == 1
    tag, value, error = results[0]
    assert tag == "x" and error is None and isinstance(value, int)


def test_a_local_cluster_measures_on_each_virtual_device(monkeypatch, private_simulator):
    pytest.importorskip("distributed")
    from distributed import Client
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    monkeypatch.setenv("WORKBENCH_SIM_DEVICES", "2")
    private_simulator(devices=2)
    with wb.tuning.local_cluster() as cluster, Client(cluster) as client:
        r = wb.tune(SPIN, spin_args(), space={"W": [1, 2, 3, 4]}, block=128, grid=4,
                    client=client, cache=False, progress=False, **FAST)
    assert r.workers == 2
    assert {row["device"] for row in r.rows} == {0, 1}      # worker k measures on device k
    assert [row["status"] for row in r.rows] == ["ok", "ok", "ok", "check"]
    assert r.best == {"W": 2}


@pytest.mark.parametrize("strategy", ["random", "tpe", "cmaes", "qmc", "nsga2"])
def test_every_optuna_strategy_keeps_to_its_budget(strategy, simulator):
    pytest.importorskip("optuna")
    objective = ["time", "gbps"] if strategy == "nsga2" else "time"
    try:
        r = wb.tune(SPIN, spin_args(), space=SPACE, grid=4, strategy=strategy, budget=5, seed=0,
                    objective=objective, bytes=lambda c: 1e3 * c["W"], cache=False,
                    progress=False, **FAST)
    except MissingExtra as exc:        # cmaes / scipy not installed: said in one line
        assert "\n" not in str(exc) and "pip install" in str(exc)
        return
    assert len(r.rows) == 5 and len({tuple(row["config"].values()) for row in r.rows}) == 5
    assert r.rows[0]["config"] == {"block": 32, "W": 1}     # the default configuration first
    assert r.strategy == strategy and r.best is not None


def test_the_notebook_progress_draws_the_best_so_far(simulator, capsys):
    from workbench.tuning import set_progress_factory
    from workbench.widgets.progress import TuneProgress
    made = []

    def factory(total, label):
        made.append(TuneProgress(total, label))
        return made[-1]

    set_progress_factory(factory)
    try:
        r = wb.tune(SPIN, spin_args(), space={"W": [1, 2, 3]}, block=128, grid=4, cache=False, **FAST)
    finally:
        set_progress_factory(None)
    (bar,) = made
    assert bar.n == 3 and bar.total == 3 and r.best == {"W": 2}
    assert "<svg" in bar._chart.value and "best so far" in bar._chart.value
    assert bar.line() == "tune of spin: 3 configurations"      # what a saved notebook keeps
