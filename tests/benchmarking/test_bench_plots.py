"""Plots of sweeps, speedups and the roofline: figure objects with the
expected lines and labels, on every backend."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.benchmarking import plots  # noqa: E402
from workbench.benchmarking.ceilings import Ceilings  # noqa: E402

KERNELS = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void axpy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + y[i];
}
'''
SIZES = [256, 1024, 4096]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def table(backend):
    m = wb.compile(KERNELS, name="bench-plot-test")
    copy, axpy = m["copy"], m["axpy"]
    rng = np.random.default_rng(5)

    def setup(size):
        return (backend.to_device(rng.standard_normal(size).astype(np.float32)),
                backend.to_device(rng.standard_normal(size).astype(np.float32)), size)
    return wb.sweep({"copy": lambda x, y, n: copy(x, y, n, n=n),
                     "axpy": lambda x, y, n: axpy(x, y, n, n=n)},
                    sizes=SIZES, setup=setup, bytes=lambda size: 8 * size,
                    flops=lambda size: 2 * size, repeat=3, warmup_time=0, progress=False,
                    ceilings=ROOF)


ROOF = Ceilings(device="test device", backend="test", simulated=False, copy_gbps=100.0,
                fma_gflops=400.0, gemm_gflops={"float32": 500.0, "float16": 2000.0})


def _line_labels(ax):
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_time_against_size(backend, table):
    fig = plots.plot_sweep(table)
    ax = fig.axes[0]
    assert _line_labels(ax) == ["copy", "axpy"]
    for line in ax.get_lines():
        np.testing.assert_array_equal(line.get_xdata(), SIZES)
    assert ax.get_xlabel() == "size" and ax.get_ylabel().startswith("median time (")
    assert ("simulated" in ax.get_title()) is bool(backend.simulated)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.collections) == 2  # the shaded interquartile ranges


def test_bandwidth_with_ceiling(backend, table):
    ax = plots.plot_sweep(table, "bandwidth").axes[0]
    labels = _line_labels(ax)
    assert labels[:2] == ["copy", "axpy"] and labels[2].startswith("copy ceiling (100 GB/s)")
    copy_line = ax.get_lines()[0]
    expected = table[table["name"] == "copy"].sort_values("size")["gbps"].to_numpy()
    np.testing.assert_allclose(copy_line.get_ydata(), expected)
    assert ax.get_ylabel() == "bandwidth (GB/s)"


def test_speedup_over_a_baseline_variant(backend, table):
    ax = plots.plot_speedup(table, "copy").axes[0]
    assert _line_labels(ax) == ["axpy", "copy (baseline)"]
    t = table.set_index(["name", "size"])["median_s"]
    expected = [t["copy", s] / t["axpy", s] for s in SIZES]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), expected)
    assert ax.get_ylabel() == "speedup over copy"
    with pytest.raises(ValueError, match="not a variant"):
        plots.plot_speedup(table, "numpy")


def test_roofline_has_measured_roofs_and_one_point_per_kernel_run(backend, table):
    ax = plots.plot_roofline(table, ROOF).axes[0]
    labels = _line_labels(ax)
    assert labels == ["copy bandwidth 100 GB/s", "FMA kernel (float32) 400 GFLOP/s",
                      "GEMM float32 500 GFLOP/s", "GEMM float16 2000 GFLOP/s"]
    scatters = ax.collections
    assert [s.get_label() for s in scatters] == ["copy", "axpy"]
    offsets = np.concatenate([s.get_offsets() for s in scatters])
    assert offsets.shape == (len(table), 2)
    np.testing.assert_allclose(offsets[:, 0], 0.25)  # 2 FLOP per 8 bytes
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    assert ("simulated" in ax.get_title()) is bool(backend.simulated)
    # the sloped roof is bandwidth x intensity until it meets the highest flat roof
    x, y = ax.get_lines()[0].get_data()
    np.testing.assert_allclose(y, np.minimum(100.0 * x, 2000.0))


def test_roofline_of_bench_results(backend):
    r = wb.types.BenchResult(name="k", times=[1e-3, 1e-3], bytes=1e6, flops=4e6)
    ax = plots.plot_roofline([r], ROOF).axes[0]
    np.testing.assert_allclose(ax.collections[0].get_offsets(), [[4.0, 4.0]])


def test_histogram_of_one_result(backend):
    times = np.random.default_rng(2).normal(2e-3, 1e-5, 200)
    r = wb.types.BenchResult(name="k", times=times)
    ax = plots.plot_times(r).axes[0]
    assert _line_labels(ax) == ["median", "quartiles"]
    assert ax.get_xlabel() == "time (ms)"


def test_plot_on_given_axes_and_bad_column(backend, table):
    fig, ax = plt.subplots()
    assert plots.plot_sweep(table, "gflops", ax=ax) is fig
    with pytest.raises(ValueError, match="no column 'nope'"):
        plots.plot_sweep(table, "nope")
