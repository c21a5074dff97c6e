"""Kernel calls, copies and allocations from several Python threads at once,
on every backend: each thread's results are its own and complete, nothing
hangs. (The simulator serialises its worker channel; on the GPU every thread
launches on its current stream, CUDA's default stream unless it chose one.)"""
import threading

import numpy as np

import workbench as wb

SOURCE = r'''
extern "C" __global__ void bump(float* x, float by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += by;
}
'''

THREADS = 8
LAUNCHES = 500


def _run_in_threads(work):
    errors, threads = [], []

    def guarded(i):
        try:
            work(i)
        except BaseException as exc:  # reported below with the thread's index
            errors.append((i, exc))
    for i in range(THREADS):
        threads.append(threading.Thread(target=guarded, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[0]


def test_eight_threads_each_make_500_launches(backend):
    bump = wb.compile(SOURCE, name="threads")["bump"]
    n = 1000
    results = {}

    def work(i):
        x = wb.to_device(np.full(n, i, dtype=np.float32))   # a copy in this thread
        for _ in range(LAUNCHES):
            bump(x, 1.0, n, n=n)
        backend.synchronize()
        results[i] = wb.to_host(x)
    _run_in_threads(work)
    for i in range(THREADS):
        np.testing.assert_array_equal(results[i], np.full(n, i + LAUNCHES, dtype=np.float32))
    # the session works afterwards
    x = wb.to_device(np.zeros(n, np.float32))
    bump(x, 2.0, n, n=n)
    assert wb.to_host(x).sum() == 2 * n


def test_threads_allocate_copy_and_compile(backend):
    rng = np.random.default_rng(7)
    data = [rng.standard_normal(4096).astype(np.float32) for _ in range(THREADS)]
    results = {}

    def work(i):
        m = wb.compile(SOURCE.replace("bump", f"bump{i % 2}"), name=f"threads{i}")
        out = []
        for r in range(20):
            x = wb.allocate((4096,), np.float32)
            x[...] = wb.to_device(data[i])
            m[f"bump{i % 2}"](x, float(r), 4096, n=4096)
            out.append(wb.to_host(x))
        results[i] = out
    _run_in_threads(work)
    for i in range(THREADS):
        for r, got in enumerate(results[i]):
            np.testing.assert_allclose(got, data[i] + np.float32(r), rtol=0, atol=0)
