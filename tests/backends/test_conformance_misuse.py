"""Misuse on the simulator behaves as on the GPU, and says so: what g++
would delete as undefined behaviour but the GPU keeps (a spin on a flag, a
store through a null pointer) is kept; a write far outside every allocation
faults like the GPU's illegal address. Each test checks the error type, that
the message names the cause and the fix, and that the next launch works
with earlier arrays intact. (Simulator only: on a GPU a fault ends the CUDA
context.)"""
import numpy as np
import pytest

import workbench as wb

SOURCE = r'''
extern "C" __global__ void spin_on_flag(int* flag) {
    while (flag[0] == 0) { }          // spins on the GPU: the load is never re-read
}
extern "C" __global__ void store_through_null(int* out, int n) {
    int* p = n > 100 ? out : nullptr;
    p[0] = 5;                         // n <= 100: a null pointer
}
extern "C" __global__ void write_at(float* x, long long offset) {
    x[offset] = 1.0f;
}
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''


@pytest.fixture
def sim(private_simulator):
    return private_simulator(timeout_s=1.0)


@pytest.fixture
def mod(sim):
    return wb.compile(SOURCE, name="misuse")


def _next_launch_works(mod, x, before):
    np.testing.assert_array_equal(wb.to_host(x), before)
    mod["add_one"](x, x.size, n=x.size)
    np.testing.assert_array_equal(wb.to_host(x), before + 1)


def test_a_spin_on_a_flag_spins_until_the_time_limit(mod):
    x = wb.to_device(np.arange(8, dtype=np.float32))
    flag = wb.to_device(np.zeros(1, np.int32))
    with pytest.raises(wb.KernelFault) as info:
        mod["spin_on_flag"](flag, grid=1, block=1)
    assert info.value.signal == "timeout"
    assert "time limit of 1 s" in str(info.value)
    assert "timeout_s=" in str(info.value)          # how to change the limit
    _next_launch_works(mod, x, np.arange(8, dtype=np.float32))


def test_a_store_through_a_null_pointer_faults(mod):
    x = wb.to_device(np.arange(8, dtype=np.float32))
    out = wb.to_device(np.zeros(1, np.int32))
    with pytest.raises(wb.KernelFault, match=r"SIGSEGV.*null pointer") as info:
        mod["store_through_null"](out, 5, grid=1, block=1)
    assert info.value.block == (0, 0, 0)
    assert wb.to_host(out)[0] == 0
    mod["store_through_null"](out, 500, grid=1, block=1)
    assert wb.to_host(out)[0] == 5
    _next_launch_works(mod, x, np.arange(8, dtype=np.float32))


def test_a_write_far_past_every_allocation_faults(mod):
    x = wb.to_device(np.arange(64, dtype=np.float32))   # 256 bytes
    with pytest.raises(wb.KernelFault, match=r"SIGSEGV: invalid memory access at address") as info:
        mod["write_at"](x, (400 << 20) // 4, grid=1, block=1)   # 400 MB past it
    assert "outside every allocation" in str(info.value)
    _next_launch_works(mod, x, np.arange(64, dtype=np.float32))
    y = wb.to_device(np.zeros(1 << 20, np.float32))     # memory allocated later is reachable
    mod["write_at"](y, (1 << 20) - 1, grid=1, block=1)
    assert wb.to_host(y)[-1] == 1.0


HANGS = r'''
extern "C" __global__ void barrier_hang(int* flag) {
    if (threadIdx.x == 40) { while (flag[0] == 0) { } }   // never reaches the barrier
    __syncthreads();                                       // line 4
}
__device__ __noinline__ int recurse(int n) {
    volatile int pad[64];
    for (int i = 0; i < 64; ++i) pad[i] = n + i;
    if (n == 0) return 0;
    int r = recurse(n - 1);
    return r + pad[n & 63];
}
extern "C" __global__ void too_deep(int* out) { out[threadIdx.x] = recurse(1 << 30); }
extern "C" __global__ void too_deep_after_barrier(int* out) {
    __syncthreads();
    out[threadIdx.x] = recurse(1 << 30);
}
'''


def test_a_barrier_hang_says_which_threads_wait_where(sim):
    m = wb.compile(HANGS, name="hangs")
    flag = wb.to_device(np.zeros(1, np.int32))
    with pytest.raises(wb.KernelFault) as info:
        m["barrier_hang"](flag, grid=1, block=64)
    text = str(info.value)
    assert info.value.thread == (40, 0, 0)
    assert "thread (40,0,0) was running" in text
    assert "40 threads wait at __syncthreads (line 4): (0,0,0)-(39,0,0)" in text
    assert "wb.backend('simulator', timeout_s=" in text
    m2 = wb.compile(SOURCE, name="misuse")
    _next_launch_works(m2, flag.astype(np.float32), np.zeros(1, np.float32))


@pytest.mark.parametrize("kernel", ["too_deep", "too_deep_after_barrier"])
def test_deep_recursion_is_a_stack_overflow(sim, kernel):
    m = wb.compile(HANGS, name="hangs")
    out = wb.to_device(np.zeros(32, np.int32))
    with pytest.raises(wb.KernelFault, match="stack overflow.*recursion") as info:
        m[kernel](out, grid=1, block=32)
    assert info.value.signal == "stack overflow"
    _next_launch_works(wb.compile(SOURCE, name="misuse"), wb.to_device(np.ones(4, np.float32)),
                       np.ones(4, np.float32))


def test_a_deadlock_says_which_threads_wait_where(sim):
    m = wb.compile('extern "C" __global__ void dead(int* x) {\n'
                   '    if (threadIdx.x == 0) x[0] = __shfl_sync(0xffffffff, 1, 0);\n'
                   '    else __syncwarp();\n'
                   '    __syncthreads();\n'
                   '}', name="dead", line_offset=1)
    x = wb.to_device(np.zeros(64, np.int32))
    with pytest.raises(wb.KernelFault) as info:
        m["dead"](x, grid=1, block=64)
    text = str(info.value)
    assert info.value.signal == "deadlock"
    assert "32 threads wait at __syncthreads (line 5): (32,0,0)-(63,0,0)" in text   # cell line
    assert "32 wait at a warp operation: (0,0,0)-(31,0,0)" in text
    _next_launch_works(wb.compile(SOURCE, name="misuse"), wb.to_device(np.ones(4, np.float32)),
                       np.ones(4, np.float32))


def test_a_far_write_faults_in_checked_mode_too(private_simulator):
    private_simulator(checked=True)
    m = wb.compile(SOURCE, name="misuse")
    x = wb.to_device(np.arange(64, dtype=np.float32))
    with pytest.raises(wb.KernelFault, match="invalid memory access.*outside every allocation") as info:
        m["write_at"](x, (400 << 20) // 4, grid=1, block=1)
    assert info.value.line == 10                         # checked mode finds the line
    _next_launch_works(m, x, np.arange(64, dtype=np.float32))
