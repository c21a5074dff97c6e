"""The whole-call C path of a wb.Kernel on the GPU (``FastCall`` in
workbench/backends/native/launch.c): the common call runs in one C call, and
every call it does not take goes the Python way with the same result or the
same error. ``_fast.taken`` counts the calls it launched."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import KernelArgumentError

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
extern "C" __global__ void offsets(unsigned long long base, short step, double scale, double* out) {
    out[threadIdx.x] = scale * (double)(base + (unsigned long long)(step * (int)threadIdx.x));
}
"""
rng = np.random.default_rng(11)


@pytest.fixture(scope="module")
def kernels():
    from workbench.runtime import session
    previous = session.active_backend_or_none()
    session.use_backend("cupy")
    module = wb.compile(SOURCE)
    if module["saxpy"]._fast is None:
        from workbench.backends import native_launch
        pytest.skip(f"no C whole-call path here: {native_launch.unavailable_reason()}")
    yield module
    session.restore_backend(previous)


def _log():
    from workbench.runtime.session import session
    return session().timing_log


def test_common_calls_run_in_c_and_are_each_timed(kernels):
    saxpy = kernels["saxpy"]
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = wb.to_device(x), wb.to_device(y)
    saxpy(1.5, dx, dy, n, grid=4, block=256)  # a new configuration: checked by Python, cached
    before, logged = saxpy._fast.taken, len(wb.timings())
    for a in (0.5, -2.0, 3.25):
        saxpy(a, dx, dy, n, grid=4, block=256)
    assert saxpy._fast.taken == before + 3
    expected = y.astype(np.float64)
    for a in (1.5, 0.5, -2.0, 3.25):
        expected = a * x.astype(np.float64) + expected
    np.testing.assert_allclose(wb.to_host(dy), expected, rtol=1e-5, atol=1e-5)
    df = wb.timings().iloc[logged:]
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
    before, start = spin._fast.taken, len(wb.timings())
    for us in (200, 2000, 400):
        spin(us * 1000, grid=1, block=1)
    assert spin._fast.taken == before + 3
    ms = wb.timings().iloc[start:]["ms"].to_numpy()
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
    taken, logged = saxpy._fast.taken, len(wb.timings())
    with log.paused():
        saxpy(1.0, dx, dy, n, grid=1, block=256)  # launched in C, not logged
    assert saxpy._fast.taken == taken + 1
    with log.timed_by_events():
        saxpy(1.0, dx, dy, n, grid=1, block=256)  # events: the Python path
    assert saxpy._fast.taken == taken + 1
    df = wb.timings().iloc[logged:]
    assert len(df) == 1 and df["ms"].iloc[0] > 0
    np.testing.assert_array_equal(wb.to_host(dy), np.full(n, 4.0, np.float32))


def test_every_integer_and_float_kind_packs_as_its_c_type(kernels):
    offsets = kernels["offsets"]
    out = wb.xp.zeros(32, dtype=np.float64)
    base, step, scale = 2**63 + 12345, -3, 0.5
    offsets(base - 1, step, scale, out, grid=1, block=32)  # (caches the configuration)
    taken = offsets._fast.taken
    offsets(base, step, scale, out, grid=1, block=32)
    assert offsets._fast.taken == taken + 1
    want = scale * np.array([(base + step * t) % 2**64 for t in range(32)], dtype=np.float64)
    np.testing.assert_allclose(wb.to_host(out), want, rtol=1e-15)
