"""wb.bench: statistics against NumPy on the raw times, checks, rotation,
rates and result objects, on every backend (the ``backend`` fixture)."""
import json
import subprocess
import sys
import time

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking import engine
from workbench.benchmarking.checks import ResultMismatch
from workbench.benchmarking.result import BenchResult

from helpers import new_timings

COPY = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
'''
SCALE = r'''
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
'''
N = 4096


@pytest.fixture
def arrays(backend):
    rng = np.random.default_rng(7)
    host = rng.standard_normal(N).astype(np.float32)
    return host, backend.to_device(host), backend.allocate((N,), np.float32)


def _numpy_stats(t):
    q1, q3 = np.percentile(t, [25, 75])
    return {"median": np.median(t), "mean": t.mean(), "std": t.std(), "min": t.min(),
            "max": t.max(), "q1": q1, "q3": q3, "iqr": q3 - q1}


def test_kernel_times_and_statistics_match_numpy(backend, arrays):
    host, x, y = arrays
    copy = wb.compile(COPY)["copy"]
    r = wb.bench(copy, x, y, N, grid=N // 256, block=256, repeat=25, bytes=2 * 4 * N)
    assert isinstance(r, wb.types.BenchResult)
    assert r.repeats == 25 and r.times.shape == (25,) and r.times.dtype == np.float64
    assert np.all(r.times > 0) and np.all(r.times < 10)  # seconds, not milliseconds
    for name, expected in _numpy_stats(r.times).items():
        assert getattr(r, name) == pytest.approx(expected, rel=1e-12), name
    assert r.relative_iqr == pytest.approx(r.iqr / r.median)
    assert r.gbps == pytest.approx(2 * 4 * N / np.median(r.times) / 1e9)
    assert r.name == "copy" and r.backend == backend.name
    assert r.simulated is bool(backend.simulated)
    assert ("simulated" in str(r)) is bool(backend.simulated)
    assert ("simulated" in r._repr_html_()) is bool(backend.simulated)
    np.testing.assert_array_equal(backend.to_host(y), host)  # the kernel really ran


@pytest.mark.parametrize("seed", [0, 1])
def test_statistics_of_given_times(seed):
    times = np.random.default_rng(seed).lognormal(-7, 0.3, size=101)
    r = BenchResult(name="t", times=times, bytes=1e6, flops=2e6)
    for name, expected in _numpy_stats(times).items():
        assert getattr(r, name) == pytest.approx(expected, rel=1e-12), name
    assert r.gflops == pytest.approx(2e6 / np.median(times) / 1e9)
    assert r.intensity == pytest.approx(2.0)
    df = r.to_pandas()
    assert list(df.columns) == ["repeat", "time_s", "input_set"]
    np.testing.assert_array_equal(df["time_s"].to_numpy(), times)


def test_simulator_times_are_wall_clock_seconds(simulator):
    # a 2 ms sleep between the events: the median is 2 ms (plus the sleep's
    # overshoot), stored in seconds, not milliseconds
    r = wb.bench(lambda: time.sleep(0.002), repeat=10)
    assert r.simulated and r.repeats == 10
    assert 1.9e-3 <= r.median <= 4e-3, r.times
    assert np.all(r.times >= 1.9e-3)  # time.sleep never returns early
    assert "ms median" in str(r)


def test_time_budget_bounds_the_repeats(backend, arrays):
    _, x, y = arrays
    copy = wb.compile(COPY)["copy"]
    r = wb.bench(copy, x, y, N, n=N, max_time=1e-6, min_repeat=4)
    assert r.repeats == 4
    r = wb.bench(copy, x, y, N, n=N, max_time=30, max_repeat=9)
    assert r.repeats == 9


def test_repeats_stay_out_of_the_timing_log(backend, arrays):
    _, x, y = arrays
    copy = wb.compile(COPY)["copy"]
    with new_timings() as added:
        wb.bench(copy, x, y, N, n=N, repeat=40, warmup=3)
    # the first (checked) call is a normal, logged launch; the repeats are not
    assert list(added.frame.query("kind == 'kernel'")["kernel"]) == ["copy"]


def test_check_against_reference_array_and_function(backend, arrays):
    host, x, y = arrays
    scale = wb.compile(SCALE)["scale"]
    ok = wb.bench(scale, x, y, 2.5, N, n=N, repeat=3, check=2.5 * host, output=1)
    assert ok.repeats == 3
    wb.bench(scale, x, y, 2.5, N, n=N, repeat=3, output=1,
             check=lambda out: np.allclose(out, 2.5 * host))
    with pytest.raises(ResultMismatch, match=rf"{N} of {N} elements differ"):
        wb.bench(scale, x, y, 2.5, N, n=N, repeat=3, check=3.0 * host, output=1)
    with pytest.raises(ResultMismatch, match="returned False"):
        wb.bench(scale, x, y, 2.5, N, n=N, repeat=3, output=1, check=lambda out: False)
    with pytest.raises(ResultMismatch, match="output="):  # a kernel returns None
        wb.bench(scale, x, y, 2.5, N, n=N, repeat=3, check=2.5 * host)


def test_check_tolerance_by_dtype(backend):
    host = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    x = backend.to_device(host)
    noisy = host * np.float32(1 + 3e-5)  # rounding-sized difference
    wb.bench(lambda a: a, x, repeat=2, check=noisy)  # float32 default rtol 1e-4
    with pytest.raises(ResultMismatch):
        wb.bench(lambda a: a, x, repeat=2, check=noisy, rtol=1e-6, atol=0)


def test_rotation_uses_every_input_set(backend):
    sets = [(backend.to_device(np.full(8, i, np.float32)),) for i in range(3)]
    seen = []
    r = wb.bench(lambda a: seen.append(float(backend.to_host(a)[0])), rotate=sets, repeat=6)
    assert r.input_sets == 3
    assert {0.0, 1.0, 2.0} <= set(seen)
    assert r.to_pandas()["input_set"].tolist() == [0, 1, 2, 0, 1, 2]


def test_l2_flush_runs_before_every_call(backend, arrays, monkeypatch):
    _, x, y = arrays
    copy = wb.compile(COPY)["copy"]
    made, flushes, allocated = [], [], []
    real_make_flush, real_allocate = engine._make_flush, backend.allocate

    def allocate(shape, dtype, *a, **k):  # the real allocation, seen on its way
        out = real_allocate(shape, dtype, *a, **k)
        allocated.append(int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return out

    def make_flush(b, stream):
        flush = real_make_flush(b, stream)
        made.append(list(allocated))
        return lambda: (flushes.append(len(flushes)), flush())

    monkeypatch.setattr(engine, "_make_flush", make_flush)
    monkeypatch.setattr(backend, "allocate", allocate)
    r = wb.bench(copy, x, y, N, n=N, repeat=3, flush_l2=True)
    assert r.flush_l2 and r.repeats == 3 and "L2 flushed" in str(r)
    l2 = backend.device_properties().l2_cache_bytes
    assert len(made) == 1 and made[0][0] == 2 * l2  # one read buffer, twice the L2
    # one flush before every warm-up call after the first and every timed call
    assert len(flushes) == (r.warmup - 1) + r.repeats
    before = len(flushes)
    wb.bench(copy, x, y, N, n=N, repeat=3)
    assert len(flushes) == before  # no flush unless asked


def test_percent_of_measured_ceilings_is_shown(simulator, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))  # nothing measured there yet
    x = simulator.to_device(np.random.default_rng(5).standard_normal(1 << 16).astype(np.float32))
    before = wb.bench(lambda a: a * 2, x, repeat=5, bytes=8 * x.size, flops=x.size, record=False)
    assert "%" not in str(before) and "%" not in before._repr_html_()  # never measures by itself
    assert before.ceilings is None
    roof = wb.ceilings()
    # a result is what it was when made: ceilings measured later do not change its display
    assert "%" not in str(before) and "%" not in before._repr_html_()
    r = wb.bench(lambda a: a * 2, x, repeat=5, bytes=8 * x.size, flops=x.size, record=False)
    assert r.ceilings is roof
    bandwidth = 100 * r.gbps / roof.copy_gbps
    compute = 100 * r.gflops / roof.compute_gflops
    assert f"({bandwidth:.3g}% of copy ceiling)" in str(r)
    assert f"({compute:.3g}% of FMA/GEMM ceiling)" in str(r)
    assert "% of copy ceiling" in r._repr_html_()
    other = BenchResult(name="elsewhere", times=r.times, backend="cupy", device="Other GPU",
                        bytes=8 * x.size)
    assert "%" not in str(other)  # ceilings of another device do not apply


def test_result_display_reads_only_the_result(monkeypatch):
    from workbench.benchmarking import ceilings as ceilings_module
    from workbench.benchmarking.ceilings import Ceilings
    from workbench.runtime import session

    def forbidden(*_, **__):
        raise AssertionError("a result's display looked up the backend or the ceilings cache")
    for module, name in ((session, "backend"), (session, "active_backend_or_none"),
                         (ceilings_module, "cached"), (ceilings_module, "cached_for"),
                         (ceilings_module, "for_results")):
        monkeypatch.setattr(module, name, forbidden)
    roof = Ceilings(device="d", backend="b", simulated=False, copy_gbps=100.0, fma_gflops=10.0)
    r = BenchResult(name="k", times=[1e-3], bytes=1e7, flops=2e6, ceilings=roof)
    assert "10 GB/s (10% of copy ceiling)" in str(r)
    assert "2 GFLOP/s (20% of FMA/GEMM ceiling)" in str(r)
    assert "10% of copy ceiling" in r._repr_html_()
    assert "%" not in str(BenchResult(name="k", times=[1e-3], bytes=1e7))


@pytest.mark.parametrize("kwargs, message", [
    ({"repeat": 0}, "repeat=0"),
    ({"max_time": 0}, "max_time"),
    ({"min_repeat": 5, "max_repeat": 2}, "min_repeat"),
    ({"warmup": 0}, "warmup=0"),
    ({"bytes": "lots"}, "bytes="),
])
def test_bad_options_say_what_is_wrong(backend, kwargs, message):
    with pytest.raises(ValueError, match=message):
        wb.bench(lambda: None, **kwargs)


def test_rotate_and_positional_arguments_conflict(backend):
    with pytest.raises(ValueError, match="not both"):
        wb.bench(lambda a: None, 1, rotate=[(1,), (2,)])


def test_json_and_csv_round_trip(backend, tmp_path):
    x = backend.to_device(np.arange(16, dtype=np.float32))
    r = wb.bench(lambda a: a * 2, x, repeat=5, bytes=128, name="double")
    data = json.loads(r.to_json(tmp_path / "r.json"))
    assert data["unit"] == "s" and data["name"] == "double"
    assert data["times"] == r.times.tolist()
    assert data["stats"]["median"] == r.median and data["rates"]["gbps"] == r.gbps
    back = BenchResult.from_dict(json.loads((tmp_path / "r.json").read_text()))
    np.testing.assert_array_equal(back.times, r.times)
    assert back.simulated == r.simulated and back.bytes == 128
    csv = r.to_csv(tmp_path / "r.csv").splitlines()
    assert csv[0] == "repeat,time_s,input_set" and len(csv) == 6


def test_wb_bench_stays_callable_after_the_magics_load():
    # importing a submodule must not shadow the function wb.bench
    code = ("import workbench, workbench.benchmarking.sweep, inspect\n"
            "import workbench as wb\n"
            "print(callable(wb.bench), 'max_time' in inspect.signature(wb.bench).parameters)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr


@pytest.mark.parametrize("module", ["workbench.benchmarking.timer", "workbench.benchmarking.engine",
                                    "workbench.benchmarking.sweep",
                                    "workbench.benchmarking.compare", "workbench.benchmarking.report",
                                    "workbench.benchmarking.ceilings", "workbench.benchmarking.plots"])
def test_bench_modules_import_no_notebook_libraries(module):
    code = (f"import sys, {module}\n"
            "print(','.join(m for m in ('IPython', 'ipywidgets', 'matplotlib', 'pandas', 'tqdm')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
