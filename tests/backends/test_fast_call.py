"""The whole-call C path of a wb.Kernel on the GPU (``FastCall`` in
workbench/backends/gpu/native/launch.c): the common call runs in one C call, and
every call it does not take goes the Python way with the same result or the
same error. ``_fast.taken`` counts the calls it launched."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import KernelArgumentError

from helpers import new_timings, using_backend

pytestmark = pytest.mark.gpu

SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void spin(long long ns) {
    long long t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
               if (t - t0 > ns) break; }
}
extern "C" __global__ void kinds(signed char b, unsigned char B, short h, unsigned short H, int i,
                                 unsigned int I, long long q, unsigned long long Q, float f, double d,
                                 long long* ints, unsigned long long* big, double* reals) {
    ints[0] = b; ints[1] = B; ints[2] = h; ints[3] = H; ints[4] = i; ints[5] = I; ints[6] = q;
    big[0] = Q; reals[0] = f; reals[1] = d;
}
extern "C" __global__ void shared_sum(const float* x, float* out) {
    extern __shared__ float scratch[];
    scratch[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) { float s = 0; for (int k = 0; k < blockDim.x; ++k) s += scratch[k]; *out = s; }
}
"""
rng = np.random.default_rng(11)


@pytest.fixture(scope="module")
def kernels():
    with using_backend("cupy"):
        module = wb.compile(SOURCE)
        if module["saxpy"]._fast is None:
            from workbench.backends.gpu import native_launch
            pytest.skip(f"no C whole-call path here: {native_launch.unavailable_reason()}")
        warm = wb.xp.zeros(1, dtype=np.float32)
        module["saxpy"](1.0, warm, warm, 1, grid=1, block=32)  # (the log takes its timing source)
        if _log().source != "CUPTI activity records":  # (events: every timed call is Python's)
            pytest.skip(f"the C path times by CUPTI only; the log times by {_log().source}")
        yield module


def _log():
    from workbench.runtime.session import session
    return session().timing_log


def test_common_calls_run_in_c_and_are_each_timed(kernels):
    saxpy = kernels["saxpy"]
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = wb.to_device(x), wb.to_device(y)
    saxpy(1.5, dx, dy, n, grid=4, block=256)  # a new configuration: checked by Python, cached
    before = saxpy._fast.taken
    with new_timings() as added:
        for a in (0.5, -2.0, 3.25):
            saxpy(a, dx, dy, n, grid=4, block=256)
        assert saxpy._fast.taken == before + 3
        expected = y.astype(np.float64)
        for a in (1.5, 0.5, -2.0, 3.25):
            expected = a * x.astype(np.float64) + expected
        np.testing.assert_allclose(wb.to_host(dy), expected, rtol=1e-5, atol=1e-5)
    df = added.frame
    df = df[df["kind"] == "kernel"]  # (the copy back is logged too)
    assert list(df["kernel"]) == ["saxpy"] * 3
    assert (df["ms"] > 0).all() and list(df["grid"]) == [(4, 1, 1)] * 3
    assert list(df["block"]) == [(256, 1, 1)] * 3


def test_c_timed_launches_keep_their_lengths(kernels):
    """Kernels of 1x, 10x and 2x the work launched by the C call keep their
    device times' order and ratios (within 20%)."""
    spin = kernels["spin"]
    spin(1000, grid=1, block=1)
    wb.synchronize()
    before = spin._fast.taken
    with new_timings() as added:
        for us in (200, 2000, 400):
            spin(us * 1000, grid=1, block=1)
    assert spin._fast.taken == before + 3
    ms = added.frame["ms"].to_numpy()
    assert ms[1] / ms[0] == pytest.approx(10, rel=0.2) and ms[2] / ms[0] == pytest.approx(2, rel=0.2)


def test_calls_it_does_not_take_go_the_python_way(kernels):
    saxpy = kernels["saxpy"]
    n = 256
    x = rng.standard_normal(n).astype(np.float32)
    dx, dy = wb.to_device(x), wb.to_device(np.zeros(n, np.float32) + 1)
    saxpy(1.0, dx, dy, n, grid=1, block=256)
    taken = saxpy._fast.taken
    saxpy(np.float32(2.0), dx, dy, np.int32(n), grid=1, block=256)  # NumPy scalars
    saxpy(2.0, dx, dy, n, grid=1, block=256, stream=wb.xp.cuda.get_current_stream())
    with pytest.raises(KernelArgumentError, match="float64"):
        saxpy(2.0, wb.to_device(x.astype(np.float64)), dy, n, grid=1, block=256)
    with pytest.raises(KernelArgumentError, match="strided"):
        saxpy(2.0, dx[::2], dy, n // 2, grid=1, block=256)
    with pytest.raises(KernelArgumentError):
        saxpy(2.0, dx, dy, 2**31, grid=1, block=256)  # out of int's range
    with pytest.raises(KernelArgumentError):
        saxpy(2.0, dx, dy, grid=1, block=256)  # an argument short
    assert saxpy._fast.taken == taken
    np.testing.assert_allclose(wb.to_host(dy), 1 + 5 * x.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_events_and_paused_logs(kernels):
    saxpy = kernels["saxpy"]
    n = 256
    dx, dy = wb.to_device(np.ones(n, np.float32)), wb.to_device(np.ones(n, np.float32))
    saxpy(1.0, dx, dy, n, grid=1, block=256)
    log = _log()
    taken = saxpy._fast.taken
    with new_timings() as added:
        with log.paused():
            saxpy(1.0, dx, dy, n, grid=1, block=256)  # launched in C, not logged
        assert saxpy._fast.taken == taken + 1
        with log.timed_by_events():
            saxpy(1.0, dx, dy, n, grid=1, block=256)  # events: the Python path
        assert saxpy._fast.taken == taken + 1
    df = added.frame
    assert len(df) == 1 and df["ms"].iloc[0] > 0
    np.testing.assert_array_equal(wb.to_host(dy), np.full(n, 4.0, np.float32))


def test_every_integer_and_float_kind_packs_as_its_c_type(kernels):
    kinds = kernels["kinds"]
    ints, big, reals = (wb.xp.zeros(7, dtype=np.int64), wb.xp.zeros(1, dtype=np.uint64),
                        wb.xp.zeros(2, dtype=np.float64))
    low = (-128, 0, -2**15, 0, -2**31, 0, -2**63, 0, -3.0e38, -1.5e308)
    high = (127, 255, 2**15 - 1, 2**16 - 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, 3.0e38, 1.5e308)
    kinds(*low, ints, big, reals, grid=1, block=1)  # (a new configuration: Python's path)
    drawn = tuple(int(rng.integers(lo, hi + 1, dtype=np.int64 if lo else np.uint64))
                  for lo, hi in zip(low[:8], high[:8])) + (float(rng.standard_normal()),
                                                           float(rng.standard_normal()) * 1e300)
    for values in (high, low, drawn):
        for a in (ints, big, reals):
            a.fill(0)
        taken = kinds._fast.taken
        kinds(*values, ints, big, reals, grid=1, block=1)
        assert kinds._fast.taken == taken + 1
        np.testing.assert_array_equal(wb.to_host(ints), np.array(values[:7], dtype=np.int64))
        assert int(wb.to_host(big)[0]) == values[7]
        np.testing.assert_array_equal(wb.to_host(reals), [np.float64(np.float32(values[8])), values[9]])


def test_more_shared_memory_is_opted_in_by_python_then_taken_in_c(kernels):
    shared_sum = kernels["shared_sum"]
    x = rng.standard_normal(1024).astype(np.float32)
    dx, out = wb.to_device(x), wb.xp.zeros(1, dtype=np.float32)
    big = 64 * 1024  # (over 48 KiB: a kernel must opt in)
    shared_sum(dx, out, grid=1, block=1024, shared_mem=big)
    taken = shared_sum._fast.taken
    shared_sum(dx, out, grid=1, block=1024, shared_mem=big)
    assert shared_sum._fast.taken == taken + 1
    assert float(wb.to_host(out)[0]) == pytest.approx(float(x.astype(np.float64).sum()), abs=1e-2)


def test_a_c_record_equals_the_python_paths(kernels):
    from workbench.runtime import records
    saxpy = kernels["saxpy"]
    dx, dy = wb.to_device(np.ones(64, np.float32)), wb.to_device(np.ones(64, np.float32))
    saxpy(1.0, dx, dy, 64, grid=2, block=32)
    log = _log()
    taken = saxpy._fast.taken
    saxpy(1.0, dx, dy, 64, grid=2, block=32)
    saxpy(1.0, dx, dy, np.int32(64), grid=2, block=32)  # (a NumPy scalar: Python's path)
    assert saxpy._fast.taken == taken + 1
    c_made, python_made = list(log.records)[-2:]
    for field in range(len(c_made)):
        if field == records.STREAM:  # (the same stream, maybe two objects for it)
            assert c_made[field].ptr == python_made[field].ptr
        elif field != records.WALL:
            assert c_made[field] == python_made[field], field
    assert abs(c_made[records.WALL] - python_made[records.WALL]) < 5


def test_a_wrapped_timed_launch_keeps_calls_on_the_python_path(kernels):
    """A wrapper of every launch (the NVTX ranges under a profiler wrap
    TimingLog.timed_launch) must see every call: the C path steps aside."""
    saxpy = kernels["saxpy"]
    dx, dy = wb.to_device(np.ones(64, np.float32)), wb.to_device(np.ones(64, np.float32))
    saxpy(1.0, dx, dy, 64, grid=2, block=32)
    log = _log()
    seen = []
    original = log.timed_launch

    def wrapped(b, name, *rest, **options):
        seen.append(name)
        return original(b, name, *rest, **options)
    had_wrapper = "timed_launch" in vars(log)  # (NVTX's ranges, left on by another test)
    log.timed_launch = wrapped
    try:
        taken = saxpy._fast.taken
        saxpy(1.0, dx, dy, 64, grid=2, block=32)
    finally:
        if had_wrapper:
            log.timed_launch = original
        else:
            del log.timed_launch
    assert seen == ["saxpy"] and saxpy._fast.taken == taken
    saxpy(1.0, dx, dy, 64, grid=2, block=32)
    assert saxpy._fast.taken == taken + 1
