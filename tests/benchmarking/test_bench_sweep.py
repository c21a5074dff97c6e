"""wb.sweep's table and wb.compare's A/B timing on every backend."""
import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking import history
from workbench.benchmarking.ceilings import Ceilings
from workbench.benchmarking.checks import ResultMismatch

KERNELS = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void copy2(const float* x, float* y, int n) {
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = x[i];
    if (i + 1 < n) y[i + 1] = x[i + 1];
}
extern "C" __global__ void wrong(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
'''
SIZES = [256, 1024, 4096]
FAST = {"repeat": 3, "warmup_time": 0, "progress": False}


@pytest.fixture
def kernels(backend):
    return wb.compile(KERNELS, name="bench-sweep-test")


def _setup(backend):
    rng = np.random.default_rng(11)

    def setup(size, **_):
        x = backend.to_device(rng.standard_normal(size).astype(np.float32))
        return x, backend.allocate((size,), np.float32), size
    return setup


def test_sweep_table_has_a_row_per_point_and_variant(backend, kernels):
    copy, copy2 = kernels["copy"], kernels["copy2"]
    table = wb.sweep({"copy": lambda x, y, n: copy(x, y, n, n=n),
                      "copy2": lambda x, y, n: copy2(x, y, n, n=(n + 1) // 2)},
                     sizes=SIZES, setup=_setup(backend), bytes=lambda size: 8 * size,
                     ceilings=False, **FAST)
    assert len(table) == len(SIZES) * 2
    assert sorted(zip(table["name"], table["size"])) == sorted(
        (v, s) for v in ("copy", "copy2") for s in SIZES)
    for col in ("median_s", "q1_s", "q3_s", "iqr_s", "min_s", "max_s", "repeats", "gbps",
                "simulated"):
        assert col in table.columns, col
    assert (table["repeats"] == 3).all()
    assert (table["q1_s"] <= table["median_s"]).all() and (table["median_s"] <= table["q3_s"]).all()
    np.testing.assert_allclose(table["gbps"], 8 * table["size"] / table["median_s"] / 1e9)
    assert table["simulated"].eq(bool(backend.simulated)).all()
    assert table.attrs["params"] == ["size"] and table.attrs["backend"] == backend.name
    # every point is kept for the report, tagged with its sweep
    mine = [r for r in history.results() if r.sweep == table.attrs["sweep"]]
    assert len(mine) == len(table)


def test_sweep_over_a_parameter_grid(backend, kernels):
    copy = kernels["copy"]
    table = wb.sweep(lambda x, y, n, block: copy(x, y, n, n=n, block=block), sizes=[512],
                     params={"block": [32, 64, 128]},
                     setup=lambda size, block: _setup(backend)(size) + (block,), **FAST)
    assert table["block"].tolist() == [32, 64, 128]
    assert table.attrs["params"] == ["size", "block"]
    assert "gbps" in table.columns and table["gbps"].isna().all()  # no bytes= given


def test_sweep_without_setup_times_fn_of_the_point(backend):
    calls = []
    table = wb.sweep(lambda size: calls.append(size), sizes=[1, 2], name="noop", **FAST)
    assert table["name"].tolist() == ["noop", "noop"] and set(calls) == {1, 2}


def test_sweep_check_catches_a_wrong_variant(backend, kernels):
    copy, wrong = kernels["copy"], kernels["wrong"]
    variants = {"copy": lambda x, y, n: copy(x, y, n, n=n),
                "wrong": lambda x, y, n: wrong(x, y, n, n=n)}
    with pytest.raises(ResultMismatch, match="wrong"):
        wb.sweep(variants, sizes=[256], setup=_setup(backend), output=1,
                 check=lambda x, y, n: backend.to_host(x), **FAST)


def test_sweep_percentages_of_given_ceilings(backend, kernels):
    copy = kernels["copy"]
    roof = Ceilings(device="test", backend=backend.name, simulated=True, copy_gbps=100.0,
                    fma_gflops=50.0, gemm_gflops={"float32": 80.0})
    table = wb.sweep(lambda x, y, n: copy(x, y, n, n=n), sizes=SIZES, setup=_setup(backend),
                     bytes=lambda size: 8 * size, flops=lambda size: size, ceilings=roof, **FAST)
    np.testing.assert_allclose(table["pct_bandwidth"], 100 * table["gbps"] / 100.0)
    np.testing.assert_allclose(table["pct_compute"], 100 * table["gflops"] / 80.0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({}, ValueError, "sizes="),
    ({"sizes": []}, ValueError, "empty"),
    ({"sizes": [1], "params": {"size": [2]}}, ValueError, "both"),
    ({"sizes": [1], "bogus": 1}, TypeError, "bogus"),
    ({"params": {"name": ["a", "b"]}}, ValueError, "'name' is a column"),
    ({"sizes": [1], "params": {"bytes": [4]}}, ValueError, "rename the parameter"),
])
def test_sweep_bad_arguments(backend, kwargs, error, message):
    with pytest.raises(error, match=message):
        wb.sweep(lambda **_: None, progress=False, **kwargs)


def test_compare_reports_the_ratio_of_interleaved_times(backend, kernels):
    copy, copy2 = kernels["copy"], kernels["copy2"]
    x, y, n = _setup(backend)(4096)
    c = wb.compare(lambda: copy(x, y, n, n=n), lambda: copy2(x, y, n, n=(n + 1) // 2),
                   names=("copy", "copy2"), output=None, check=False, repeat=8)
    assert c.ratios.shape == (8,)
    np.testing.assert_allclose(c.ratios, c.a.times / c.b.times)
    assert c.speedup == pytest.approx(np.median(c.a.times / c.b.times))
    q1, q3 = c.spread
    assert q1 <= c.speedup <= q3
    assert ("faster" in str(c)) == (c.speedup >= 1) and "copy2" in str(c)
    assert list(c.to_pandas().columns) == ["round", "copy_s", "copy2_s", "ratio"]


def test_compare_checks_results_first(backend, kernels):
    copy, wrong = kernels["copy"], kernels["wrong"]
    x, y, n = _setup(backend)(1024)
    c = wb.compare(copy, copy, x, y, n, n=n, output=1, repeat=2)
    assert c.a.name != c.b.name  # same function: still two labels
    with pytest.raises(ResultMismatch, match="1024 of 1024"):
        wb.compare(copy, wrong, x, y, n, n=n, output=1, repeat=2)
    with pytest.raises(ValueError, match="output="):
        wb.compare(copy, wrong, x, y, n, n=n, repeat=2)


def test_summary_columns_cannot_be_overwritten_by_parameters():
    from workbench.benchmarking.result import SUMMARY_COLUMNS, BenchResult
    roof = Ceilings(device="d", backend="b", simulated=True, copy_gbps=1.0, fma_gflops=1.0)
    row = BenchResult(name="k", times=[1.0], bytes=1.0, flops=1.0).summary(roof)
    assert set(row) == set(SUMMARY_COLUMNS)  # the names sweep() refuses as parameters
    with pytest.raises(ValueError, match="overwrite"):
        BenchResult(name="k", times=[1.0], params={"bytes": 4}).summary()


def test_compare_keeps_repeats_out_of_the_timing_log(backend, kernels):
    copy, copy2 = kernels["copy"], kernels["copy2"]
    x, y, n = _setup(backend)(1024)
    before = len(wb.timings())
    wb.compare(lambda: copy(x, y, n, n=n), lambda: copy2(x, y, n, n=(n + 1) // 2),
               check=False, repeat=20)
    # only the first call of each (the checked calls) is a logged launch
    assert len(wb.timings()) - before <= 2
