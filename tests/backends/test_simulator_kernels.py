"""The simulator's kernel suite, through the public API, on every backend
(the ``backend`` fixture: the simulator everywhere, the GPU where there is
one). Every result is compared with NumPy on random inputs."""
import numpy as np
import pytest

import workbench as wb

rng = np.random.default_rng(20240603)


def _dev(a):
    return wb.to_device(np.ascontiguousarray(a))


VECTOR_OPS = r'''
extern "C" __global__ void vec_fma(const float* a, const float* b, const float* c, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = fmaf(a[i], b[i], c[i]) + sqrtf(fabsf(a[i])) - fminf(b[i], c[i]);
}
extern "C" __global__ void vec_scale_double(double* x, double s, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = s * x[i] + exp(-x[i]);
}
'''


def test_vector_operations_match_numpy(backend):
    n = 50_001
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    mod = wb.compile(VECTOR_OPS)
    out = wb.allocate(n, np.float32)
    # a grid smaller than the data: the grid-stride loop covers the rest
    mod["vec_fma"](_dev(a), _dev(b), _dev(c), out, n, grid=37, block=128)
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    expected = a64 * b64 + c64 + np.sqrt(np.abs(a64)) - np.minimum(b64, c64)
    np.testing.assert_allclose(wb.to_host(out), expected, rtol=1e-5, atol=1e-5)

    x = rng.random(1000)
    xd = _dev(x)
    mod["vec_scale_double"](xd, 3.5, len(x), grid=4, block=256)
    np.testing.assert_allclose(wb.to_host(xd), 3.5 * x + np.exp(-x), rtol=1e-13)


MATMUL = r'''
#define TILE 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
'''


def test_tiled_matmul_with_shared_memory(backend):
    M, K, N = 70, 45, 83  # not multiples of the tile: the edges are exercised
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = wb.allocate((M, N), np.float32)
    wb.compile(MATMUL)["matmul"](_dev(A), _dev(B), C, M, N, K,
                                 grid=((N + 15) // 16, (M + 15) // 16), block=(16, 16))
    np.testing.assert_allclose(wb.to_host(C), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


BLOCK_REDUCE = r'''
extern "C" __global__ void block_reduce(const float* x, double* total, int n) {
    __shared__ float s[512];
    unsigned t = threadIdx.x;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[t] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) atomicAdd(total, (double)s[0]);
}
'''


@pytest.mark.parametrize("block", [64, 512])
def test_block_reduction_with_syncthreads(backend, block):
    n = 123_457
    x = rng.standard_normal(n).astype(np.float32)
    total = wb.xp.zeros(1, np.float64)
    wb.compile(BLOCK_REDUCE)["block_reduce"](_dev(x), total, n, grid=40, block=block)
    np.testing.assert_allclose(wb.to_host(total)[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


WARP_REDUCE = r'''
extern "C" __global__ void warp_reduce(const int* x, int* per_warp, int* per_group8, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? x[i] : 0;
    int g = v;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    for (int o = 4; o > 0; o >>= 1) g += __shfl_xor_sync(0xffffffffu, g, o, 8);  // groups of 8 lanes
    int warp = i / 32;
    if ((threadIdx.x & 31) == 0) per_warp[warp] = v;
    if ((threadIdx.x & 7) == 0) per_group8[i / 8] = g;
}
'''


def test_warp_shuffle_reduction_with_width(backend):
    n = 4096
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    per_warp = wb.xp.zeros(n // 32, np.int32)
    per8 = wb.xp.zeros(n // 8, np.int32)
    wb.compile(WARP_REDUCE)["warp_reduce"](_dev(x), per_warp, per8, n, grid=n // 256, block=256)
    np.testing.assert_array_equal(wb.to_host(per_warp), x.reshape(-1, 32).sum(axis=1))
    np.testing.assert_array_equal(wb.to_host(per8), x.reshape(-1, 8).sum(axis=1))


HISTOGRAM = r'''
extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b]) atomicAdd(&bins[b], local[b]);
}
'''


def test_histogram_with_shared_memory_atomics(backend):
    n = 200_000
    data = rng.integers(0, 256, n).astype(np.uint8)
    bins = wb.xp.zeros(256, np.uint32)
    wb.compile(HISTOGRAM)["histogram"](_dev(data), bins, n, grid=24, block=192)
    np.testing.assert_array_equal(wb.to_host(bins), np.bincount(data, minlength=256))


SCAN = r'''
extern "C" __global__ void block_scan(const int* x, int* out, int n) {
    extern __shared__ int buf[];          // 2 * blockDim.x ints: double buffer
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int pin = 1, pout = 0;
    buf[t] = i < n ? x[i] : 0;     // region pout = 0
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset *= 2) {
        pout = 1 - pout; pin = 1 - pout;
        int v = buf[pin * blockDim.x + t];
        if (t >= offset) v += buf[pin * blockDim.x + t - offset];
        buf[pout * blockDim.x + t] = v;
        __syncthreads();
    }
    if (i < n) out[i] = buf[pout * blockDim.x + t];
}
'''


def test_inclusive_scan_per_block(backend):
    n, block = 10_000, 256
    x = rng.integers(-50, 50, n).astype(np.int32)
    out = wb.xp.zeros(n, np.int32)
    wb.compile(SCAN)["block_scan"](_dev(x), out, n, grid=(n + block - 1) // block, block=block,
                                   shared_mem=2 * block * 4)
    padded = np.concatenate([x, np.zeros(-n % block, np.int32)]).reshape(-1, block)
    np.testing.assert_array_equal(wb.to_host(out), np.cumsum(padded, axis=1).ravel()[:n])


STENCIL = r'''
#define B 16
extern "C" __global__ void laplacian(const float* in, float* out, int nx, int ny) {
    __shared__ float tile[B + 2][B + 2];
    int x = blockIdx.x * B + threadIdx.x, y = blockIdx.y * B + threadIdx.y;
    int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    auto at = [&](int xx, int yy) {           // clamped reads: the halo at the edges
        xx = min(max(xx, 0), nx - 1); yy = min(max(yy, 0), ny - 1);
        return in[yy * nx + xx];
    };
    tile[ly][lx] = at(x, y);
    if (threadIdx.x == 0) tile[ly][0] = at(x - 1, y);
    if (threadIdx.x == B - 1) tile[ly][B + 1] = at(x + 1, y);
    if (threadIdx.y == 0) tile[0][lx] = at(x, y - 1);
    if (threadIdx.y == B - 1) tile[B + 1][lx] = at(x, y + 1);
    __syncthreads();
    if (x < nx && y < ny)
        out[y * nx + x] = tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx]
                          - 4.0f * tile[ly][lx];
}
'''


def test_2d_stencil_with_halo(backend):
    ny, nx = 45, 61
    a = rng.standard_normal((ny, nx)).astype(np.float32)
    out = wb.allocate((ny, nx), np.float32)
    wb.compile(STENCIL)["laplacian"](_dev(a), out, nx, ny, grid=((nx + 15) // 16, (ny + 15) // 16),
                                     block=(16, 16))
    p = np.pad(a.astype(np.float64), 1, mode="edge")
    expected = p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] - 4 * p[1:-1, 1:-1]
    np.testing.assert_allclose(wb.to_host(out), expected, rtol=1e-5, atol=1e-5)


TEMPLATE = r'''
template <typename T, int UNROLL>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
    #pragma unroll
    for (int k = 0; k < UNROLL; ++k)
        if (base + k < n) y[base + k] = a * x[base + k] + y[base + k];
}
'''


def test_template_kernel_instantiations(backend):
    mod = wb.compile(TEMPLATE, instantiate=["axpy<float, 2>", "axpy<double, 4>"])
    n = 3001
    for dtype, key, unroll in [(np.float32, "float, 2", 2), (np.float64, "double, 4", 4)]:
        x, y = rng.random(n).astype(dtype), rng.random(n).astype(dtype)
        yd = _dev(y)
        threads = (n + unroll - 1) // unroll
        mod.templates["axpy"][key](dtype(1.5), _dev(x), yd, n, grid=(threads + 127) // 128, block=128)
        np.testing.assert_allclose(wb.to_host(yd), 1.5 * x.astype(np.float64) + y,
                                   rtol=1e-6 if dtype == np.float32 else 1e-14)


DYNAMIC_SHARED = r'''
extern "C" __global__ void reverse_blocks(const float4* in, float4* out, int n) {
    extern __shared__ __align__(16) unsigned char smem[];
    float4* s = reinterpret_cast<float4*>(smem);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[threadIdx.x] = in[i];
    __syncthreads();
    int j = blockDim.x - 1 - threadIdx.x;
    int src = blockIdx.x * blockDim.x + j;
    if (i < n && src < n) out[i] = s[j];
}
'''


def test_dynamic_shared_memory_sized_at_launch(backend):
    block, blocks = 128, 6
    n = block * blocks
    x = rng.standard_normal((n, 4)).astype(np.float32)
    out = wb.allocate((n, 4), np.float32)
    xd = _dev(x)
    # float4 pointers take arrays of 4 floats
    wb.compile(DYNAMIC_SHARED)["reverse_blocks"](xd, out, n, grid=blocks, block=block,
                                                 shared_mem=block * 16)
    expected = x.reshape(blocks, block, 4)[:, ::-1].reshape(n, 4)
    np.testing.assert_array_equal(wb.to_host(out), expected)


COOP = r'''
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void tile_reduce(const float* x, float* per_tile32, float* per_tile8, float* total, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    auto tile8 = cg::tiled_partition<8>(block);
    int i = block.group_index().x * block.size() + block.thread_rank();
    float v = i < n ? x[i] : 0.0f;
    float s32 = cg::reduce(warp, v, cg::plus<float>());
    float s8 = cg::reduce(tile8, v, cg::plus<float>());
    if (warp.thread_rank() == 0) per_tile32[i / 32] = s32;
    if (tile8.thread_rank() == 0) per_tile8[i / 8] = s8;
    // a shuffle-down reduction on the tile object itself
    float w = v;
    for (int o = warp.size() / 2; o > 0; o /= 2) w += warp.shfl_down(w, o);
    block.sync();
    if (warp.thread_rank() == 0) atomicAdd(total, w);
}
'''


def test_cooperative_groups_tiled_reduce(backend):
    n = 2048
    x = rng.standard_normal(n).astype(np.float32)
    t32, t8 = wb.xp.zeros(n // 32, np.float32), wb.xp.zeros(n // 8, np.float32)
    total = wb.xp.zeros(1, np.float32)
    wb.compile(COOP)["tile_reduce"](_dev(x), t32, t8, total, n, grid=n // 256, block=256)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(wb.to_host(t32), x64.reshape(-1, 32).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wb.to_host(t8), x64.reshape(-1, 8).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wb.to_host(total)[0], x64.sum(), rtol=1e-4, atol=1e-3)


PRINTF = r'''
extern "C" __global__ void hello(int tag) {
    if (threadIdx.x < 2)
        printf("tag %d block %d thread %d value %.2f\n", tag, blockIdx.x, threadIdx.x, 0.5f * threadIdx.x);
}
'''


def test_device_printf_appears_in_the_output(backend, capfd):
    # capfd: on a GPU the CUDA runtime writes device printf to file descriptor 1
    hello = wb.compile(PRINTF)["hello"]
    hello(7, grid=3, block=32)
    wb.synchronize()
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if line.startswith("tag"))
    assert lines == sorted(f"tag 7 block {b} thread {t} value {0.5 * t:.2f}"
                           for b in range(3) for t in range(2))


CONSTANT = r'''
__constant__ float coeffs[4] = {1.5f, -2.0f, 0.25f, 3.0f};
extern "C" __global__ void poly(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coeffs[0] + v * (coeffs[1] + v * (coeffs[2] + v * coeffs[3]));
    }
}
'''


def test_constant_memory(backend):
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = wb.allocate(n, np.float32)
    wb.compile(CONSTANT)["poly"](_dev(x), y, n, grid=4, block=256)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(wb.to_host(y), 1.5 + x64 * (-2 + x64 * (0.25 + 3 * x64)), rtol=1e-5, atol=1e-5)


BLOCK_VOTES = r'''
extern "C" __global__ void votes(const int* x, int* out) {
    int t = threadIdx.x;
    int p = x[blockIdx.x * blockDim.x + t] > 0;
    int count = __syncthreads_count(p);
    int all = __syncthreads_and(p);
    int any = __syncthreads_or(p);
    unsigned ballot = __ballot_sync(0xffffffffu, p);
    int wall = __all_sync(0xffffffffu, p), wany = __any_sync(0xffffffffu, p);
    if (t == 0) { out[blockIdx.x * 3 + 0] = count; out[blockIdx.x * 3 + 1] = all; out[blockIdx.x * 3 + 2] = any; }
    if ((t & 31) == 0) {
        int w = (blockIdx.x * blockDim.x + t) / 32;
        out[300 + w * 3] = (int)ballot; out[300 + w * 3 + 1] = wall; out[300 + w * 3 + 2] = wany;
    }
}
'''


def test_block_and_warp_votes(backend):
    blocks, block = 4, 64
    x = rng.integers(-3, 3, blocks * block).astype(np.int32)
    x[:block] = 1          # block 0: all true
    x[block:2 * block] = 0  # block 1: all false
    out = wb.xp.zeros(300 + 3 * blocks * block // 32, np.int32)
    wb.compile(BLOCK_VOTES)["votes"](_dev(x), out, grid=blocks, block=block)
    res = wb.to_host(out)
    p = (x > 0).reshape(blocks, block)
    np.testing.assert_array_equal(res[:3 * blocks].reshape(blocks, 3),
                                  np.stack([p.sum(1), p.all(1), p.any(1)], 1).astype(np.int32))
    warps = (x > 0).reshape(-1, 32)
    ballots = (warps.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)
    got = res[300:].reshape(-1, 3)
    np.testing.assert_array_equal(got[:, 0].view(np.uint32), ballots)
    np.testing.assert_array_equal(got[:, 1], warps.all(1))
    np.testing.assert_array_equal(got[:, 2], warps.any(1))
