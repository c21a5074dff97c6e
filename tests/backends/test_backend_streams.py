"""Streams and events of the Backend interface, on every backend: work on one
stream runs in order, an event orders two streams, ``None`` is the current
stream."""
import numpy as np

import workbench as wb

SOURCE = r'''
extern "C" __global__ void fill(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + i;
}
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
'''


def test_an_event_orders_work_on_two_streams(backend):
    m = wb.compile(SOURCE, name="streams")
    n = 1 << 20
    x, y = wb.allocate((n,), np.float32), wb.allocate((n,), np.float32)
    s1 = backend.create_stream()
    s2 = backend.create_stream(priority=-1, non_blocking=True)
    with backend.use_stream(s1):
        m["fill"](x, 1.5, n, n=n)                # queued on s1, the current stream
    done = backend.create_event()
    backend.record_event(done, s1)
    backend.stream_wait_event(s2, done)         # s2 starts after the fill
    m["twice"](x, y, n, n=n, stream=s2)
    backend.stream_synchronize(s2)
    backend.event_synchronize(done)
    assert backend.event_done(done)
    np.testing.assert_array_equal(wb.to_host(y), 2.0 * (1.5 + np.arange(n, dtype=np.float32)))


def test_none_means_the_current_stream(backend):
    m = wb.compile(SOURCE, name="streams")
    x = wb.allocate((64,), np.float32)
    with backend.use_stream(None) as current:
        assert current is backend.current_stream()
        m["fill"](x, 0.0, 64, n=64)
    backend.stream_synchronize(None)
    np.testing.assert_array_equal(wb.to_host(x), np.arange(64, dtype=np.float32))


def test_a_pool_limit_of_zero_is_no_limit(backend):
    wb.memory.set_limit(bytes=1 << 30)
    backend.set_pool_limit(0)
    assert wb.memory.stats().limit is None
    assert wb.to_host(wb.to_device(np.ones(1 << 16))).sum() == 1 << 16
