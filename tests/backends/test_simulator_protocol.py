"""The simulator's launch path and worker protocol: arguments packed by the
per-kernel layout, launch configurations remembered per call, requests and
replies larger than a pipe's buffer, and a worker that ended between
launches."""
import os
import signal
import time

import numpy as np
import pytest

import workbench as wb
from workbench.errors import KernelArgumentError, LaunchConfigError

rng = np.random.default_rng(12)


@pytest.fixture
def sim(private_simulator):
    return private_simulator(timeout_s=10.0)


PLAIN_TYPES = r'''
#include <cuda_fp16.h>
extern "C" __global__ void store(double* out, float f, double d, int i, unsigned u,
                                 long long ll, unsigned long long ull, short s,
                                 unsigned char b, bool flag, __half h, const float* x) {
    out[0] = f; out[1] = d; out[2] = i; out[3] = u; out[4] = (double)ll;
    out[5] = (double)ull; out[6] = s; out[7] = b; out[8] = flag; out[9] = __half2float(h);
    out[10] = x ? x[3] : -1.0;
}
'''


def test_every_plain_argument_type_arrives_exactly(sim):
    store = wb.compile(PLAIN_TYPES)["store"]
    out = wb.xp.zeros(11, np.float64)
    x = wb.to_device(rng.random(8).astype(np.float32))
    values = (np.float32(1.25), -2.5e300, -7, 4_000_000_000, -(1 << 40), (1 << 63) + 2048, -3, 200,
              True, np.float16(0.75))
    store(out, *values, x, grid=1, block=1)
    expected = [1.25, -2.5e300, -7, 4e9, -(1 << 40), float((1 << 63) + 2048), -3, 200, 1, 0.75,
                float(wb.to_host(x)[3])]
    np.testing.assert_array_equal(wb.to_host(out), expected)
    store(out, *values, None, grid=1, block=1)    # a null pointer
    assert wb.to_host(out)[10] == -1.0


def test_arrays_outside_device_memory_are_refused_by_a_kernel_call(sim):
    scale = wb.compile(r'''
    extern "C" __global__ void scale(float* x, int n) {
        int i = threadIdx.x; if (i < n) x[i] *= 2; }''')["scale"]
    x = wb.to_device(np.arange(8, dtype=np.float32))
    picked = x[[0, 2, 4]]    # fancy indexing: NumPy makes a device array type over host memory
    assert type(picked) is type(x) and not wb.backend().is_device_array(picked)
    with pytest.raises(KernelArgumentError, match="to_device"):
        scale(picked, 3, grid=1, block=8)
    with pytest.raises(KernelArgumentError, match="to_device"):
        scale(np.zeros(8, np.float32), 8, grid=1, block=8)
    scale(x[2:], 3, grid=1, block=8)             # a view inside device memory is fine
    np.testing.assert_array_equal(wb.to_host(x), [0, 1, 4, 6, 8, 5, 6, 7])


def test_launch_configurations_in_every_spelling(sim):
    b = wb.backend()
    m = wb.compile(r'''extern "C" __global__ void where(int* out) {
        out[0] = gridDim.x * 100 + blockDim.x * 10 + blockDim.y; }''')
    fn = m.compiled.get_function("where")
    out = wb.xp.zeros(1, np.int32)
    for grid, block, expected in (((3, 1, 1), (4, 2, 1), 342), ([3], [4, 2], 342),
                                  (np.int64(2), 5, 251), (2, (5,), 251)):
        b.launch(fn, grid, block, (out,))
        assert wb.to_host(out)[0] == expected
    for _ in range(2):  # remembered configurations are still checked every time
        with pytest.raises(LaunchConfigError):
            b.launch(fn, (1, 1, 1), (2048, 1, 1), (out,))


def test_requests_and_replies_larger_than_a_pipe_buffer(sim):
    m = wb.compile(r'''
    __device__ float table[100000];
    extern "C" __global__ void pick(float* out, int i) { out[0] = table[i]; }''')
    values = rng.random(100000).astype(np.float32)   # 400 kB each way
    m.set_global("table", values)
    np.testing.assert_array_equal(m.get_global("table", np.float32, 100000), values)
    out = wb.xp.zeros(1, np.float32)
    m["pick"](out, 99999, grid=1, block=1)
    assert wb.to_host(out)[0] == values[99999]


def test_a_worker_that_ended_between_launches_is_replaced(sim):
    m = wb.compile(r'''
    __constant__ int offset;
    extern "C" __global__ void add(int* x) { x[threadIdx.x] += offset; }''')
    m.set_global("offset", np.int32(5))
    x = wb.xp.zeros(4, np.int32)
    m["add"](x, grid=1, block=4)
    for worker in wb.backend()._workers.values():   # as if the system's OOM killer took it
        os.kill(worker._proc.pid, signal.SIGKILL)
        worker._proc.wait()
    time.sleep(0.05)
    m["add"](x, grid=1, block=4)                     # a new worker, the module and its globals
    np.testing.assert_array_equal(wb.to_host(x), [10] * 4)
    assert m.get_global("offset") == 5


def test_an_interrupt_between_request_and_reply_leaves_no_reply_behind(sim, monkeypatch):
    """Ctrl-C after a request is written but before its reply is read must not
    leave that reply in the pipe for the next request to take as its own."""
    m = wb.compile(r'''
    __device__ int g;
    extern "C" __global__ void put(int* x, int v) { x[0] = v; g = v; }''')
    x = wb.xp.zeros(1, np.int32)
    m["put"](x, 1, grid=1, block=1)
    from workbench.backends.simulator import worker as worker_module
    real = worker_module._write_all
    calls = []

    def interrupted(fd, data):
        real(fd, data)
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt   # as if Ctrl-C came right after the request was written
    monkeypatch.setattr(worker_module, "_write_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m["put"](x, 2, grid=1, block=1)
    monkeypatch.undo()
    # the next request with a reply that matters: loading a new cell's library
    # (out of step, it would read the interrupted launch's reply as its handle)
    other = wb.compile(r'''
    extern "C" __global__ void put_more(int* x, int v) { x[0] = v + 1000; }''')
    other["put_more"](x, 5, grid=1, block=1)
    assert int(wb.to_host(x)[0]) == 1005
    for v in (3, 4):   # each request gets its own reply, in step
        m["put"](x, v, grid=1, block=1)
        assert int(wb.to_host(x)[0]) == v
        m.set_global("g", np.int32(10 * v))
        assert int(m.get_global("g")) == 10 * v


CHILD = r'''
import sys, threading
import numpy as np
import workbench as wb
from workbench.runtime import session as s
s.use_backend("simulator")
m = wb.compile(r"""
extern "C" __global__ void spin(int* x) { while (((volatile int*)x)[0] == 0) { } }""")
x = wb.to_device(np.zeros(1, np.int32))
threading.Thread(target=lambda: m["spin"](x, grid=1, block=1), daemon=True).start()
import time; time.sleep(0.5)
print(" ".join(str(w._proc.pid) for w in wb.backend()._workers.values()), flush=True)
time.sleep(60)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_running_a_kernel_ends_with_the_process_that_started_it(tmp_path):
    """A notebook process killed while its worker runs a kernel that would not
    end leaves no worker behind."""
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
        child.kill()
        child.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "the worker outlived its notebook process"
    finally:
        child.kill()
        child.wait()
