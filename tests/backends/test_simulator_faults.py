"""Faults on the simulator: a crashing kernel raises wb.KernelFault naming
what happened and where, the notebook survives, device arrays are intact
and the next launch works. (Simulator only: on a GPU a fault ends the
CUDA context.)"""
import numpy as np
import pytest

import workbench as wb

FAULTS = r'''
extern "C" __global__ void wild_write(float* p, int bad_block, int bad_thread) {
    if (blockIdx.x == bad_block && threadIdx.x == bad_thread) { float* q = (float*)64; *q = 1.0f; }
}
extern "C" __global__ void divide(int* out, int d) {
    out[threadIdx.x] = 100 / (d - (int)threadIdx.x);
}
extern "C" __global__ void checks(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(x[i] >= 0);
}
extern "C" __global__ void trap_in(int which) {
    if (blockIdx.x == which && threadIdx.x == 3) __trap();
}
extern "C" __global__ void spin(volatile int* flag) {
    if (blockIdx.x == 2 && threadIdx.x == 5) while (flag[0] == 0) { }
}
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''

OOB = r'''
extern "C" __global__ void off_by_one(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)
        y[i] = 2.0f;
}
'''


@pytest.fixture
def sim(private_simulator):
    return private_simulator(timeout_s=2.0)


@pytest.fixture
def mod(sim):
    return wb.compile(FAULTS)


def _survives(mod, x_host):
    """The array made before the fault is intact and the next launch works."""
    x = wb.to_device(x_host)
    return x


def _check_recovery(mod, x, before):
    np.testing.assert_array_equal(wb.to_host(x), before)
    mod["add_one"](x, len(before), grid=1, block=len(before))
    np.testing.assert_array_equal(wb.to_host(x), before + 1)


def test_segfault_names_signal_block_and_thread(mod):
    before = np.arange(8, dtype=np.float32)
    x = wb.to_device(before)
    with pytest.raises(wb.KernelFault) as info:
        mod["wild_write"](x, 2, 17, grid=4, block=32)
    err = info.value
    assert err.signal == "SIGSEGV"
    assert err.block == (2, 0, 0) and err.thread == (17, 0, 0)
    assert "wild_write" in str(err) and "checked" in str(err)
    _check_recovery(mod, x, before)


def test_integer_division_by_zero(mod):
    out = wb.xp.zeros(32, np.int32)
    before = np.ones(4, np.float32)
    x = wb.to_device(before)
    with pytest.raises(wb.KernelFault) as info:
        mod["divide"](out, 9, grid=1, block=32)
    assert info.value.signal == "SIGFPE" and info.value.thread == (9, 0, 0)
    _check_recovery(mod, x, before)


def test_assert_reports_the_condition_and_line(mod):
    data = np.arange(100, dtype=np.int32)
    data[70] = -1
    with pytest.raises(wb.KernelFault) as info:
        mod["checks"](wb.to_device(data), 100, grid=4, block=32)
    err = info.value
    assert err.signal == "assert"
    assert err.block == (2, 0, 0) and err.thread == (6, 0, 0)
    assert err.line == 11 and "x[i] >= 0" in str(err)


def test_trap(mod):
    with pytest.raises(wb.KernelFault) as info:
        mod["trap_in"](1, grid=3, block=8)
    assert info.value.signal == "trap" and info.value.block == (1, 0, 0) and info.value.thread == (3, 0, 0)


def test_time_limit_reports_the_spinning_thread(mod):
    flag = wb.xp.zeros(1, np.int32)
    before = np.full(3, 5.0, np.float32)
    x = wb.to_device(before)
    with pytest.raises(wb.KernelFault) as info:
        mod["spin"](flag, grid=4, block=32)
    err = info.value
    assert err.signal == "timeout" and "time limit" in str(err)
    assert err.block == (2, 0, 0) and err.thread == (5, 0, 0)
    _check_recovery(mod, x, before)


def test_checked_mode_finds_the_out_of_bounds_line(sim):
    n = 100
    y = wb.xp.zeros(n, np.float32)
    guard = wb.xp.full(64, 7.0, np.float32)   # the neighbour an unchecked run would overwrite
    kernel = wb.compile(OOB, checked=True)["off_by_one"]
    with pytest.raises(wb.KernelFault) as info:
        kernel(y, n, grid=4, block=32)
    err = info.value
    assert err.line == 5 and "out-of-bounds" in str(err)
    assert err.block == (3, 0, 0) and err.thread == (4, 0, 0)   # i == 100
    np.testing.assert_array_equal(wb.to_host(guard), 7.0)


def test_checked_mode_runs_correct_kernels(sim):
    n = 1000
    x = wb.to_device(np.arange(n, dtype=np.float32))
    wb.compile(FAULTS, checked=True)["add_one"](x, n, grid=4, block=256)
    np.testing.assert_array_equal(wb.to_host(x), np.arange(n) + 1)
