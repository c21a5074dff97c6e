"""Regressions found in review: warp operations that meet at different calls,
shuffle and conversion corner cases (checked on every backend: the values are
the GPU's), and the simulator's worker protocol (interrupts, faults outside
kernels, big dynamic shared memory, printf overflow, the protocol module against the C
headers)."""
import ctypes
import os
import re
import signal
import subprocess
import threading

import numpy as np
import pytest

import workbench as wb
from workbench.backends.contract import CompileOptions
from workbench.backends.simulator import SimulatorBackend
from workbench.backends.simulator import build, kernels as kernels_mod, protocol
from workbench.errors import KernelFault

rng = np.random.default_rng(20261121)


# -- warp operations group by operation, not only by mask ------------------------------

DIVERGENT_ACTIVEMASK = r'''
extern "C" __global__ void k(int* out) {
    int lane = threadIdx.x % 32;
    int v = lane + 100;
    unsigned m = 0;
    if (lane < 4) m = __activemask();
    int got = __shfl_sync(0xffffffffu, v, (lane + 1) % 32);
    out[threadIdx.x] = got;
    out[blockDim.x + threadIdx.x] = (int)m;
}
'''


def test_divergent_activemask_then_full_warp_shuffle(backend):
    block = 64
    out = wb.xp.zeros(2 * block, np.int32)
    wb.compile(DIVERGENT_ACTIVEMASK)["k"](out, grid=1, block=block)
    res = wb.to_host(out)
    lane = np.arange(block) % 32
    np.testing.assert_array_equal(res[:block], (lane + 1) % 32 + 100)
    np.testing.assert_array_equal(res[block:], np.where(lane < 4, 0xF, 0))


WARP_AGGREGATED = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int atomicAggInc(int* ctr) {
    cg::coalesced_group g = cg::coalesced_threads();
    int r = 0;
    if (g.thread_rank() == 0) r = atomicAdd(ctr, (int)g.size());
    return g.shfl(r, 0) + g.thread_rank();
}
extern "C" __global__ void filter(int* dst, int* nres, const int* src, int n, int* warp_totals) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n && src[i] > 0) dst[atomicAggInc(nres)] = src[i];
    int t = __reduce_add_sync(0xffffffffu, (i < n && src[i] > 0) ? 1 : 0);
    if ((threadIdx.x & 31) == 0) warp_totals[i / 32] = t;
}
'''


def test_warp_aggregated_atomic_filter(backend):
    n = 1024
    src = rng.integers(-5, 5, n).astype(np.int32)
    dst = wb.xp.zeros(n, np.int32)
    nres = wb.xp.zeros(1, np.int32)
    totals = wb.xp.zeros(n // 32, np.int32)
    wb.compile(WARP_AGGREGATED)["filter"](dst, nres, wb.to_device(src), n, totals,
                                          grid=n // 256, block=256)
    keep = src[src > 0]
    assert int(wb.to_host(nres)[0]) == len(keep)
    np.testing.assert_array_equal(wb.to_host(totals), (src > 0).reshape(-1, 32).sum(1))
    np.testing.assert_array_equal(np.sort(wb.to_host(dst)[:len(keep)]), np.sort(keep))


SHFL_XOR_WIDTH = r'''
extern "C" __global__ void k(const int* x, int* out, int lane_mask) {
    int t = threadIdx.x;
    out[t] = __shfl_xor_sync(0xffffffffu, x[t], lane_mask, 8);
}
'''


@pytest.mark.parametrize("lane_mask", [3, 8, 20])
def test_shfl_xor_with_width_reads_earlier_segments(backend, lane_mask):
    # CUDA: a sub-warp xor may read an earlier segment; a later one gives the lane's own value
    x = rng.integers(-1000, 1000, 32).astype(np.int32)
    out = wb.xp.zeros(32, np.int32)
    wb.compile(SHFL_XOR_WIDTH)["k"](wb.to_device(x), out, lane_mask, grid=1, block=32)
    lane = np.arange(32)
    t = lane ^ lane_mask
    src = np.where(t < (lane // 8) * 8 + 8, t, lane)
    np.testing.assert_array_equal(wb.to_host(out), x[src])


# -- conversions -------------------------------------------------------------------------

CONVERSIONS = r'''
#include <cuda_fp16.h>
extern "C" __global__ void to_half_rz(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __half2float(__float2half_rz(x[i]));
}
extern "C" __global__ void saturate(const float* f, int* i32, unsigned* u32, long long* i64, short* i16) {
    for (int k = 0; k < 4; ++k) {
        i32[k] = __float2int_rz(f[k]);
        i32[4 + k] = __float2int_rn(f[k]);
        i32[8 + k] = __double2int_rn((double)f[k] * 1e10);
        i32[12 + k] = __half2int_rz(__float2half(f[k]));
        u32[k] = __float2uint_rn(f[k]);
        i64[k] = __float2ll_rz(f[k] * 1e20f);
        i16[k] = __half2short_rn(__float2half(f[k] * 1e-5f));
    }
}
'''


def test_float2half_rz_rounds_toward_zero(backend):
    n = 4096
    x = (rng.uniform(1e-3, 6e4, n) * rng.choice([-1, 1], n)).astype(np.float32)
    x[:2] = [1.9999, -1.9999]
    out = wb.xp.zeros(n, np.float32)
    wb.compile(CONVERSIONS)["to_half_rz"](wb.to_device(x), out, n, grid=n // 256, block=256)
    # in half's normal range, toward zero = dropping the 13 low mantissa bits of the float
    expected = (x.view(np.uint32) & np.uint32(~0x1FFF & 0xFFFFFFFF)).view(np.float32)
    np.testing.assert_array_equal(wb.to_host(out), expected)
    assert wb.to_host(out)[0] == np.float32(1.9990234375)


def test_float_to_integer_conversions_saturate(backend):
    f = np.array([5e9, -3e9, np.inf, 7.6], np.float32)
    i32 = wb.xp.zeros(16, np.int32)
    u32 = wb.xp.zeros(4, np.uint32)
    i64 = wb.xp.zeros(4, np.int64)
    i16 = wb.xp.zeros(4, np.int16)
    wb.compile(CONVERSIONS)["saturate"](wb.to_device(f), i32, u32, i64, i16, grid=1, block=1)
    big, small = 2**31 - 1, -2**31
    np.testing.assert_array_equal(wb.to_host(i32).reshape(4, 4), [
        [big, small, big, 7],          # rz
        [big, small, big, 8],          # rn
        [big, small, big, big],        # double, scaled by 1e10
        [big, small, big, 7],          # half -> int rz (5e9, -3e9 are +-inf in half)
    ])
    np.testing.assert_array_equal(wb.to_host(u32), [2**32 - 1, 0, 2**32 - 1, 8])
    np.testing.assert_array_equal(wb.to_host(i64), [2**63 - 1, -2**63, 2**63 - 1, 2**63 - 1])
    np.testing.assert_array_equal(wb.to_host(i16), [32767, -30000, 32767, 0])


NAN_TO_INT = r'''
extern "C" __global__ void k(const float* f, int* out) {
    out[0] = __float2int_rn(f[0]); out[1] = __float2int_rz(f[0]); out[2] = (int)__float2uint_rn(f[0]);
}
'''


def test_nan_converts_to_zero(backend):
    out = wb.xp.full(3, 5, np.int32)
    wb.compile(NAN_TO_INT)["k"](wb.to_device(np.array([np.nan], np.float32)), out, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(out), [0, 0, 0])


# -- the simulator's worker ------------------------------------------------------------------

@pytest.fixture
def sim(private_simulator):
    return private_simulator(timeout_s=5.0)


INTERRUPTIBLE = r'''
extern "C" __global__ void spin(volatile int* flag, int* out) {
    while (flag[0] == 0) { }
    out[0] = 1;
}
extern "C" __global__ void put(int* out, int v) { out[1] = v; }
'''


def test_an_interrupted_launch_does_not_leave_its_reply_to_the_next(sim):
    mod = wb.compile(INTERRUPTIBLE)
    flag = wb.xp.zeros(1, np.int32)
    out = wb.xp.zeros(2, np.int32)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            mod["spin"](flag, out, grid=1, block=1)
    finally:
        timer.cancel()
    flag[0] = 1   # were the interrupted kernel still running, it would now finish
    mod["put"](out, 42, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(out), [0, 42])
    mod["put"](out, 43, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(out), [0, 43])


BIG_SHARED = r'''
extern "C" __global__ void reverse_in_shared(const unsigned* x, unsigned* out, int words) {
    extern __shared__ unsigned buf[];
    const unsigned* xb = x + (size_t)blockIdx.x * words;
    for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = xb[i];
    __syncthreads();
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        out[(size_t)blockIdx.x * words + i] = buf[words - 1 - i];
}
'''


def test_dynamic_shared_memory_beyond_256_kib():
    # a virtual device with more opt-in shared memory than any GPU has today
    b = SimulatorBackend(device={"shared_memory_per_block_optin": 1 << 20}, memory_bytes=64 << 20)
    try:
        mod = b.compile(BIG_SHARED, CompileOptions(), ["reverse_in_shared"])
        words, blocks = (600 << 10) // 4, 3
        x = rng.integers(0, 2**32, blocks * words, dtype=np.uint64).astype(np.uint32)
        xd, out = b.to_device(x), b.allocate(blocks * words, np.uint32)
        b.launch(mod.get_function("reverse_in_shared"), (blocks, 1, 1), (128, 1, 1),
                 (xd, out, np.int32(words)), shared_mem=words * 4)
        np.testing.assert_array_equal(b.to_host(out), x.reshape(blocks, words)[:, ::-1].ravel())
    finally:
        b.close()


def test_a_worker_crash_while_loading_a_cell_is_a_kernel_fault(sim, monkeypatch):
    monkeypatch.setattr(kernels_mod, "_use_nvrtc", lambda: False)   # NVRTC refuses host globals
    crash = 'struct Boom { Boom() { *(volatile int*)16 = 1; } };\nstatic Boom boom;\n' \
            'extern "C" __global__ void k(int* o) { o[0] = 1; }\n'
    with pytest.raises(KernelFault, match="while loading the compiled cell.*SIGSEGV"):
        wb.compile(crash)
    out = wb.xp.zeros(2, np.int32)
    wb.compile(INTERRUPTIBLE)["put"](out, 7, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(out), [0, 7])


PRINTF_FLOOD = r'''
extern "C" __global__ void flood(int width) {
    printf("line %04d %0*d\n", threadIdx.x + blockIdx.x * blockDim.x, width, 0);
}
'''


def test_printf_beyond_the_buffer_prints_whole_lines_only(sim, capsys):
    width, threads = 1000, 1200   # 1200 lines of 1011 bytes: more than the 1 MiB buffer
    wb.compile(PRINTF_FLOOD)["flood"](width, grid=4, block=threads // 4)
    out = capsys.readouterr().out
    lines = out.split("\n")
    printed = [line for line in lines if line.startswith("line ")]
    assert printed and all(line[10:] == "0" * width for line in printed)
    note = [line for line in lines if "did not fit" in line]
    assert len(note) == 1
    dropped = int(note[0].split()[1])
    assert len(printed) * (width + 11) + dropped == threads * (width + 11)
    assert "\0" not in out


# -- the protocol module mirrors the C headers --------------------------------------------

LAYOUT_PROBE = r'''
#include <cstddef>
#include <cstdio>
#include "wbsim_abi.h"
#include "wbsim_control.h"
#define FIELD(s, f) printf("%s %s %zu %zu\n", #s, #f, offsetof(s, f), sizeof(((s*)0)->f));
#define VALUE(v) printf("value %s %lld\n", #v, (long long)(v));
int main() {
    FIELD(wbsim_fault, kind) FIELD(wbsim_fault, signo) FIELD(wbsim_fault, has_block)
    FIELD(wbsim_fault, has_thread) FIELD(wbsim_fault, block) FIELD(wbsim_fault, thread)
    FIELD(wbsim_fault, address) FIELD(wbsim_fault, line) FIELD(wbsim_fault, reserved)
    FIELD(wbsim_fault, kernel) FIELD(wbsim_fault, message)
    FIELD(wbsim_control, magic) FIELD(wbsim_control, printf_len) FIELD(wbsim_control, printf_dropped)
    FIELD(wbsim_control, printf_capacity) FIELD(wbsim_control, printf_committed)
    FIELD(wbsim_control, reserved) FIELD(wbsim_control, fault)
    printf("size wbsim_fault %zu\nsize wbsim_control %zu\n", sizeof(wbsim_fault), sizeof(wbsim_control));
    VALUE(WBSIM_ABI_VERSION) VALUE(WBSIM_CONTROL_MAGIC) VALUE(WBSIM_PRINTF_OFFSET)
    VALUE(WBSIM_PRINTF_BYTES) VALUE(WBSIM_ARENA_RESERVED)
    VALUE(WBSIM_OP_LOAD) VALUE(WBSIM_OP_LAUNCH) VALUE(WBSIM_OP_SYMBOL_WRITE) VALUE(WBSIM_OP_SYMBOL_READ)
    VALUE(WBSIM_OP_INSTRUMENTED_LAUNCH)
    VALUE(WBSIM_FAULT_NONE) VALUE(WBSIM_FAULT_SIGNAL) VALUE(WBSIM_FAULT_TRAP) VALUE(WBSIM_FAULT_ASSERT)
    VALUE(WBSIM_FAULT_DEADLOCK) VALUE(WBSIM_FAULT_TIMEOUT) VALUE(WBSIM_FAULT_ASAN)
    VALUE(WBSIM_FAULT_ERROR) VALUE(WBSIM_FAULT_UNSUPPORTED)
}
'''


def test_protocol_mirrors_the_c_headers(tmp_path):
    """protocol.py's enums, constants and structures are the headers' ones,
    name by name and byte by byte (compiled and measured with g++)."""
    src = tmp_path / "probe.cpp"
    src.write_text(LAYOUT_PROBE)
    exe = tmp_path / "probe"
    subprocess.run([build.compiler(), "-std=c++17", "-iquote", str(build.PRELUDE_DIR), str(src),
                    "-o", str(exe)], check=True, capture_output=True, timeout=120)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    values = {w[1]: int(w[2]) for w in map(str.split, lines) if w and w[0] == "value"}
    fields = {(w[0], w[1]): (int(w[2]), int(w[3])) for w in map(str.split, lines)
              if len(w) == 4 and w[0] != "value"}
    sizes = {w[1]: int(w[2]) for w in map(str.split, lines) if w and w[0] == "size"}

    assert values.pop("WBSIM_ABI_VERSION") == protocol.ABI_VERSION
    for name in ("CONTROL_MAGIC", "PRINTF_OFFSET", "PRINTF_BYTES", "ARENA_RESERVED"):
        assert values.pop(f"WBSIM_{name}") == getattr(protocol, name), name
    ops = {k[len("WBSIM_OP_"):]: v for k, v in values.items() if k.startswith("WBSIM_OP_")}
    kinds = {k[len("WBSIM_FAULT_"):]: v for k, v in values.items() if k.startswith("WBSIM_FAULT_")}
    assert ops == {op.name: op.value for op in protocol.Op}
    assert kinds == {kind.name: kind.value for kind in protocol.FaultKind}
    for struct_name, cls in (("wbsim_fault", protocol.FaultRecord),
                             ("wbsim_control", protocol.ControlPage)):
        assert ctypes.sizeof(cls) == sizes[struct_name]
        c_fields = [(f, off_size) for (s, f), off_size in fields.items() if s == struct_name]
        assert [f for f, _ in c_fields] == [f for f, _ in cls._fields_]
        for name, (offset, size) in c_fields:
            assert (getattr(cls, name).offset, getattr(cls, name).size) == (offset, size), name
    # every enumerator of the headers is in the probe (nothing new left unmirrored)
    header = (build.PRELUDE_DIR / "wbsim_control.h").read_text()
    declared = set(re.findall(r"\b(WBSIM_(?:OP|FAULT)_[A-Z_]+)\b", header))
    assert declared == {k for k in values if k.startswith(("WBSIM_OP_", "WBSIM_FAULT_"))}
