"""The simulator backend used directly (compile / launch with NumPy scalars):
arrays, memory, compile errors, the device API's semantics."""
import threading
import time

import numpy as np
import pytest

from workbench.backends.contract import CompileFailed, CompileOptions
from workbench.backends.simulator import SimulatorBackend
from workbench.backends.simulator import kernels as kernels_mod
from workbench.errors import KernelArgumentError, LaunchConfigError, OutOfMemoryError

rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def sim():
    b = SimulatorBackend(timeout_s=10)
    yield b
    b.close()


def build(sim, src, names, **opts):
    return sim.compile(src, CompileOptions(**opts), names)


# -- arrays and memory -------------------------------------------------------------

def test_xp_creates_device_arrays_and_keeps_them_on_device(sim):
    xp = sim.xp
    host = rng.random(10).astype(np.float32)
    x = xp.asarray(host)
    assert sim.is_device_array(x) and not sim.is_device_array(host)
    for derived in (xp.zeros_like(x), x * 2, x + x, np.sqrt(x), x.astype(np.float64), x.copy(), x[2:8]):
        assert sim.is_device_array(derived)
    np.testing.assert_array_equal(sim.to_host(x * 2 + 1), host * 2 + 1)
    back = sim.to_host(x)
    assert type(back) is np.ndarray and not sim.is_device_array(back)
    back[0] = -1
    assert x[0] == host[0]          # to_host copies
    assert sim.is_device_array(xp.random.random(5, dtype=np.float32))


def test_memory_accounting_listeners_and_out_of_memory():
    b = SimulatorBackend(memory_bytes=8 << 20)
    events = []
    remove = b.add_allocation_listener(lambda p, n: events.append(("alloc", n)),
                                       lambda p, n: events.append(("free", n)))
    free0, total = b.memory_info()
    assert total == 8 << 20 and free0 == total
    a = b.allocate((1000,), np.float64)
    assert b.memory_info()[0] == total - b.arena.reserved_bytes() <= total - 8000
    assert b.pool_stats()["used_bytes"] == 8000
    del a
    assert events == [("alloc", 8000), ("free", 8000)]
    assert b.memory_info()[0] == total - b.arena.reserved_bytes()  # the freed block stays cached
    b.empty_cache()
    assert b.memory_info()[0] == total
    with pytest.raises(OutOfMemoryError) as info:
        b.allocate((9 << 20,), np.uint8)
    assert info.value.requested == 9 << 20 and "out of memory" in str(info.value)
    remove()
    b.allocate(10, np.float32)
    assert len(events) == 2
    props = b.device_properties()
    assert props.simulated and props.multiprocessors == 132 and props.compute_capability == (9, 0)


def test_host_arrays_are_refused(sim):
    m = build(sim, 'extern "C" __global__ void k(float* x) { x[0] = 1; }', ["k"])
    with pytest.raises(KernelArgumentError, match="to_device"):
        sim.launch(m.get_function("k"), (1, 1, 1), (1, 1, 1), (np.zeros(4, np.float32),))
    with pytest.raises(LaunchConfigError):
        sim.launch(m.get_function("k"), (1, 1, 1), (2048, 1, 1), (sim.xp.zeros(4, np.float32),))


# -- compiling ------------------------------------------------------------------------

@pytest.mark.parametrize("line, code, words", [
    (3, '    asm volatile("membar.gl;");', "inline PTX"),
    (3, "    float v = tex1Dfetch<float>(t, 0);", "textures"),
    (3, "    wmma::fill_fragment(f, 0.0f);", "tensor-core"),
    (3, "    child<<<1, 1>>>();", "dynamic parallelism"),
])
def test_unsupported_features_fail_at_their_line(sim, monkeypatch, line, code, words):
    monkeypatch.setattr(kernels_mod, "_use_nvrtc", lambda: False)   # the simulator's own check
    src = 'extern "C" __global__ void k(float* x) {\n    // a comment: asm( is fine here\n' + code + "\n}\n"
    with pytest.raises(CompileFailed) as info:
        build(sim, src, ["k"])
    assert f"cell.cu:{line}:" in info.value.log and words in info.value.log


def test_gxx_errors_carry_the_users_line(sim, monkeypatch):
    monkeypatch.setattr(kernels_mod, "_use_nvrtc", lambda: False)
    src = 'extern "C" __global__ void k(float* x) {\n    int i = threadIdx.x;\n    x[i] = undefined_name;\n}\n'
    with pytest.raises(CompileFailed) as info:
        build(sim, src, ["k"])
    assert info.value.compiler == "g++" and "cell.cu:3:" in info.value.log


def test_compiled_libraries_are_cached(sim):
    src = f'extern "C" __global__ void k(int* x) {{ x[0] = {time.time_ns() % (1 << 30)}; }}'
    assert not build(sim, src, ["k"]).cache_hit
    assert build(sim, src, ["k"]).cache_hit


def test_events_measure_the_kernels_between_them(sim):
    src = r'''extern "C" __global__ void busy(float* x, int reps) {
        float v = x[threadIdx.x];
        for (int r = 0; r < reps; ++r) v = v * 0.999f + 0.001f;
        x[threadIdx.x] = v; }'''
    k = build(sim, src, ["busy"]).get_function("busy")
    x = sim.xp.ones(64, np.float32)
    start, end = sim.create_event(), sim.create_event()
    sim.record_event(start)
    sim.launch(k, (1, 1, 1), (64, 1, 1), (x, np.int32(200_000)))
    sim.record_event(end)
    assert sim.event_done(end)
    ms = sim.elapsed_ms(start, end)
    assert 0 < ms == pytest.approx(sim.last_launch_ns / 1e6)


def test_the_module_keeps_nvrtcs_result(sim, monkeypatch):
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }'
    m = build(sim, src, ["k"])
    if kernels_mod.nvrtc_available():
        assert m.nvrtc is not None and m.compiler == "NVRTC" and "k" in m.nvrtc.resources
    monkeypatch.setattr(kernels_mod, "_use_nvrtc", lambda: False)
    assert build(sim, src, ["k"]).nvrtc is None


STREAMS = r'''
extern "C" __global__ void fill(float* x, float v) { x[threadIdx.x] = v + threadIdx.x; }
extern "C" __global__ void twice(const float* x, float* y) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }
'''


def test_streams_and_events_order_work(sim):
    m = build(sim, STREAMS, ["fill", "twice"])
    fill, twice = m.get_function("fill"), m.get_function("twice")
    x, y = sim.xp.zeros(32, np.float32), sim.xp.zeros(32, np.float32)
    default = sim.current_stream()
    s1, s2 = sim.create_stream(), sim.create_stream(priority=-1, non_blocking=True)
    with sim.use_stream(s1) as used:
        assert used is s1 and sim.current_stream() is s1
        sim.launch(fill, (1, 1, 1), (32, 1, 1), (x, np.float32(1.0)))
        done = sim.create_event()
        sim.record_event(done)
        seen_elsewhere = []
        other = threading.Thread(target=lambda: seen_elsewhere.append(sim.current_stream()))
        other.start()
        other.join()
        assert seen_elsewhere == [default]      # the current stream is per thread
    assert sim.current_stream() is default
    sim.stream_wait_event(s2, done)             # s2's work runs after s1's fill
    sim.launch(twice, (1, 1, 1), (32, 1, 1), (x, y), stream=s2)
    sim.stream_synchronize(s2)
    sim.event_synchronize(done)
    assert sim.event_done(done)
    np.testing.assert_array_equal(sim.to_host(y), 2.0 * (1.0 + np.arange(32, dtype=np.float32)))
    assert sim.device_pointer(y) == y.__array_interface__["data"][0]


def test_constant_memory_set_from_python_survives_a_restart(sim):
    src = r'''__constant__ float c[3];
    extern "C" __global__ void k(float* out) { out[threadIdx.x] = c[threadIdx.x]; }'''
    m = build(sim, src, ["k"])
    m.set_global("c", np.array([1.5, 2.5, 3.5], np.float32))
    out = sim.xp.zeros(3, np.float32)
    sim.launch(m.get_function("k"), (1, 1, 1), (3, 1, 1), (out,))
    np.testing.assert_array_equal(out, [1.5, 2.5, 3.5])
    sim.close()                                   # a new worker reloads the module
    out[:] = 0
    sim.launch(m.get_function("k"), (1, 1, 1), (3, 1, 1), (out,))
    np.testing.assert_array_equal(out, [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(m.get_global("c", np.float32, 3), [1.5, 2.5, 3.5])


# -- device API semantics ---------------------------------------------------------------

SEMANTICS = r'''
#include <cuda_fp16.h>
extern "C" __global__ void early_exit(const int* x, int* out, int live) {
    __shared__ int s[256];
    int t = threadIdx.x;
    if (t >= live) return;                 // returned threads do not block the barrier
    s[t] = x[t];
    __syncthreads();
    out[t] = s[live - 1 - t];
}
extern "C" __global__ void shuffles(const int* x, int* out) {
    int t = threadIdx.x, v = x[t];
    out[0 * 64 + t] = __shfl_sync(0xffffffffu, v, 3);          // broadcast lane 3
    out[1 * 64 + t] = __shfl_up_sync(0xffffffffu, v, 2, 16);   // within 16-lane groups
    out[2 * 64 + t] = __shfl_idx_check(v);
    out[3 * 64 + t] = (int)__match_any_sync(0xffffffffu, v & 3);
    out[4 * 64 + t] = __reduce_add_sync(0xffffffffu, v);
    out[5 * 64 + t] = (int)__activemask();
}
extern "C" __global__ void partial_warp(int* out) {
    int t = threadIdx.x;
    if (t < 16) {                            // half a warp takes part
        unsigned m = __activemask();
        int v = t;
        for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0x0000ffffu, v, o);
        if (t == 0) { out[0] = v; out[1] = (int)m; }
    }
}
extern "C" __global__ void atomics(int* i, unsigned* u, unsigned long long* ull, float* f, double* d) {
    atomicAdd(&i[0], 2); atomicSub(&i[1], 3); atomicMax(&i[2], (int)threadIdx.x); atomicMin(&i[3], -(int)threadIdx.x);
    atomicOr(&u[0], 1u << (threadIdx.x % 32)); atomicAnd(&u[1], ~(1u << (threadIdx.x % 8)));
    atomicXor(&u[2], 1u); atomicInc(&u[3], 9u); atomicDec(&u[4], 9u);
    atomicAdd(&ull[0], 1ull << 33);
    unsigned long long old = ull[1];
    while (true) { unsigned long long seen = atomicCAS(&ull[1], old, old + 5); if (seen == old) break; old = seen; }
    atomicExch(&ull[2], 42ull);
    atomicAdd(&f[0], 0.5f); atomicAdd(&d[0], 0.25); atomicExch(&f[1], 3.0f);
}
extern "C" __global__ void by_value(float4 v, int3 w, __half h, float* out) {
    out[0] = v.x + v.y + v.z + v.w; out[1] = (float)(w.x * w.y * w.z);
    out[2] = __half2float(h) * 2.0f; out[3] = __half2float(__float2half(1.0f / 3.0f));
}
extern "C" __global__ void indices3d(int* out) {
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[b * blockDim.x * blockDim.y * blockDim.z + t] = b * 1000 + t;
}
extern "C" __global__ void intrinsics(const float* x, float* out, unsigned* bits) {
    int t = threadIdx.x; float v = x[t];
    out[0 * 32 + t] = __expf(v); out[1 * 32 + t] = rsqrtf(v + 2.0f);
    out[2 * 32 + t] = __fdividef(v, 3.0f); out[3 * 32 + t] = __saturatef(v);
    out[4 * 32 + t] = __sinf(v) + __cosf(v);
    unsigned u = __float_as_uint(v);
    bits[0 * 32 + t] = __popc(u); bits[1 * 32 + t] = __clz((int)u); bits[2 * 32 + t] = __brev(u);
    bits[3 * 32 + t] = __mul24(t, 1000); bits[4 * 32 + t] = max(t, 7) + min(t, 7u);
}
'''
SEMANTICS = SEMANTICS.replace("__shfl_idx_check(v)", "__shfl_xor_sync(0xffffffffu, v, 5, 8)")


@pytest.fixture(scope="module")
def sem(sim):
    return build(sim, SEMANTICS, ["early_exit", "shuffles", "partial_warp", "atomics", "by_value",
                                  "indices3d", "intrinsics"])


def launch(sim, m, name, grid, block, *args):
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    sim.launch(m.get_function(name), g, b, args)


def test_returned_threads_do_not_block_barriers(sim, sem):
    x = sim.to_device(rng.integers(0, 100, 256).astype(np.int32))
    out = sim.xp.full(256, -1, np.int32)
    launch(sim, sem, "early_exit", (1,), (256,), x, out, np.int32(100))
    np.testing.assert_array_equal(out[:100], x[:100][::-1])
    assert (out[100:] == -1).all()


def test_shuffle_vote_and_match_semantics(sim, sem):
    xh = rng.integers(0, 50, 64).astype(np.int32)
    out = sim.xp.zeros(6 * 64, np.int32)
    launch(sim, sem, "shuffles", (1,), (64,), sim.to_device(xh), out)
    res = sim.to_host(out).reshape(6, 64)
    lane = np.arange(64)
    warp = xh.reshape(2, 32)
    np.testing.assert_array_equal(res[0], np.repeat(warp[:, 3], 32))
    up = np.where(lane % 16 >= 2, xh[lane - 2], xh)
    np.testing.assert_array_equal(res[1], up)
    np.testing.assert_array_equal(res[2], xh[(lane // 8) * 8 + ((lane % 8) ^ 5)])
    for t in range(64):
        w = t // 32 * 32
        same = [(l - w) for l in range(w, w + 32) if (xh[l] & 3) == (xh[t] & 3)]
        assert res[3][t] == np.int64(sum(1 << s for s in same)).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(res[4], np.repeat(warp.sum(1), 32))
    assert (res[5] == -1).all()


def test_warp_operations_wait_only_for_their_lanes(sim, sem):
    out = sim.xp.zeros(2, np.int32)
    launch(sim, sem, "partial_warp", (1,), (32,), out)
    assert out[0] == sum(range(16))
    assert out[1] & 0xFFFF == 0xFFFF


def test_atomics_on_every_type(sim, sem):
    n = 96
    i = sim.to_device(np.array([0, 0, -5, 5], np.int32))
    u = sim.to_device(np.array([0, 0xFFFFFFFF, 0, 0, 0], np.uint32))
    ull = sim.xp.zeros(3, np.uint64)
    f = sim.xp.zeros(2, np.float32)
    d = sim.xp.zeros(1, np.float64)
    launch(sim, sem, "atomics", (2,), (n // 2,), i, u, ull, f, d)
    np.testing.assert_array_equal(i, [2 * n, -3 * n, n // 2 - 1, -(n // 2 - 1)])
    inc = 0
    dec = 0
    for _ in range(n):
        inc = 0 if inc >= 9 else inc + 1
        dec = 9 if (dec == 0 or dec > 9) else dec - 1
    np.testing.assert_array_equal(u, [0xFFFFFFFF, 0xFFFFFF00, 0, inc, dec])
    np.testing.assert_array_equal(ull, [n << 33, 5 * n, 42])
    assert f[0] == 0.5 * n and f[1] == 3.0 and d[0] == 0.25 * n


def test_vector_and_half_arguments_by_value(sim, sem):
    out = sim.xp.zeros(4, np.float32)
    float4 = np.array([(1.0, 2.0, 3.0, 4.5)], dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("w", "<f4")])[0]
    int3 = np.array([(2, 3, 4)], dtype=[("x", "<i4"), ("y", "<i4"), ("z", "<i4")])[0]
    launch(sim, sem, "by_value", (1,), (1,), float4, int3, np.float16(1.25), out)
    np.testing.assert_allclose(out, [10.5, 24.0, 2.5, float(np.float16(1 / 3))], rtol=1e-6)


def test_three_dimensional_grids_and_blocks(sim, sem):
    grid, block = (3, 2, 2), (4, 2, 3)
    nb, nt = 12, 24
    out = sim.xp.full(nb * nt, -1, np.int32)
    launch(sim, sem, "indices3d", grid, block, out)
    expected = (np.arange(nb)[:, None] * 1000 + np.arange(nt)[None, :]).ravel()
    np.testing.assert_array_equal(out, expected)


def test_math_and_integer_intrinsics(sim, sem):
    x = rng.uniform(-1.5, 1.5, 32).astype(np.float32)
    out = sim.xp.zeros(5 * 32, np.float32)
    bits = sim.xp.zeros(5 * 32, np.uint32)
    launch(sim, sem, "intrinsics", (1,), (32,), sim.to_device(x), out, bits)
    o = sim.to_host(out).reshape(5, 32)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(o[0], np.exp(x64), rtol=1e-5)
    np.testing.assert_allclose(o[1], 1 / np.sqrt(x64 + 2), rtol=1e-5)
    np.testing.assert_allclose(o[2], x64 / 3, rtol=1e-6)
    np.testing.assert_allclose(o[3], np.clip(x64, 0, 1), rtol=1e-6)
    np.testing.assert_allclose(o[4], np.sin(x64) + np.cos(x64), rtol=1e-5, atol=1e-6)
    u = x.view(np.uint32)
    b = sim.to_host(bits).reshape(5, 32)
    np.testing.assert_array_equal(b[0], [bin(v).count("1") for v in u])
    np.testing.assert_array_equal(b[1], [32 - int(v).bit_length() for v in u])
    np.testing.assert_array_equal(b[2], [int(f"{v:032b}"[::-1], 2) for v in u])
    t = np.arange(32)
    np.testing.assert_array_equal(b[3], t * 1000)
    np.testing.assert_array_equal(b[4], np.maximum(t, 7) + np.minimum(t, 7))
