"""The launches ``profile_vs_ncu.py`` compares: kernels written to show one
access pattern each, and every kernel of the kernel library at its benchmark
size (``kernel_library.py``). Each case is set up the same way in every
process that runs it (seeded inputs), on whichever backend is active, and
returns a callable that makes its launches.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import workbench as wb
from workbench.kernels.baselines import device_args

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_library  # noqa: E402  (its sizes and softmax shapes)

PROBES = r"""
extern "C" __global__ void coalesced(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void strided(const float* x, float* y, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[(long long)i * stride % n];
}
extern "C" __global__ void misaligned(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1];
}
extern "C" __global__ void scattered(const float* x, const int* index, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[index[i]];
}
extern "C" __global__ void vector4(const float4* x, float4* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void uniform(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[blockIdx.x];
}
extern "C" __global__ void shared_stride(float* y, int stride) {
    __shared__ float s[32 * 33];
    int t = threadIdx.x;
    s[(t * stride) % (32 * 33)] = (float)t;
    __syncthreads();
    y[blockIdx.x * blockDim.x + t] = s[(t * stride) % (32 * 33)];
}
extern "C" __global__ void shared_broadcast(float* y) {
    __shared__ float s[32];
    if (threadIdx.x < 32) s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    y[blockIdx.x * blockDim.x + threadIdx.x] = s[0];
}
extern "C" __global__ void shared_wide(const double* x, const float4* v, double* y, float4* w) {
    __shared__ double d[256];
    __shared__ float4 f[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    d[t] = x[i];
    f[t] = v[i];
    __syncthreads();
    y[i] = d[t ^ 1];
    w[i] = f[t ^ 1];
}
extern "C" __global__ void divergent(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (threadIdx.x & 1) y[i] = x[i] * 2.0f;
    else y[i] = x[i] + 1.0f;
}
extern "C" __global__ void quarter(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && threadIdx.x % 32 < 8) y[i] = x[i];
}
extern "C" __global__ void atomics(int* bins, int* slots, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&bins[i & 255], 1);
    out[i] = atomicAdd(&slots[(i >> 5) & 255], 1);
}
extern "C" __global__ void atomics_one_word(int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[n & 255], 1);   // a warp's lanes on one word, provably
}
extern "C" __global__ void transpose_naive(const float* in, float* out, int n) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    out[x * n + y] = in[y * n + x];
}
extern "C" __global__ void transpose_tiled(const float* in, float* out, int n) {
    __shared__ float tile[32][32];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" __global__ void transpose_padded(const float* in, float* out, int n) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
"""

def _probes(quick: bool) -> list:
    n = 1 << (20 if quick else 24)
    side = 1024 if quick else 4096
    m = wb.compile(PROBES, name="profile_probes")
    rng = np.random.default_rng(0)
    grid = n // 256

    def floats(count=n):
        return wb.to_device(rng.random(count, dtype=np.float32))

    def case(name, kernel, *args, **launch):
        launch = launch or dict(grid=grid, block=256)
        return name, lambda: kernel(*args, **launch)

    def make():
        x, y = floats(n + 1), wb.allocate(n)
        index = wb.to_device(rng.permutation(n).astype(np.int32))
        d, v = wb.to_device(rng.random(n)), wb.to_device(rng.random((n, 4), dtype=np.float32))
        dy, vy = wb.allocate(n, np.float64), wb.allocate((n, 4), np.float32)
        bins, slots = wb.to_device(np.zeros(256, np.int32)), wb.to_device(np.zeros(256, np.int32))
        out = wb.allocate(n, np.int32)
        a, t = floats(side * side), wb.allocate(side * side)
        tgrid = dict(grid=(side // 32, side // 32), block=(32, 32))
        return [
            case("coalesced", m["coalesced"], x, y, n),
            case("stride 2", m["strided"], x, y, n, 2),
            case("stride 8", m["strided"], x, y, n, 8),
            case("stride 32", m["strided"], x, y, n, 32),
            case("misaligned by 4 bytes", m["misaligned"], x, y, n),
            case("scattered (gather)", m["scattered"], x, index, y, n),
            case("float4 copy", m["vector4"], v, vy, n, grid=n // 256, block=256),
            case("uniform address", m["uniform"], x, y, n),
            case("shared stride 1", m["shared_stride"], y, 1),
            case("shared stride 2", m["shared_stride"], y, 2),
            case("shared 32-way", m["shared_stride"], y, 32),
            case("shared padded (33)", m["shared_stride"], y, 33),
            case("shared broadcast", m["shared_broadcast"], y),
            case("shared 64/128-bit", m["shared_wide"], d, v, dy, vy),
            case("divergent if/else", m["divergent"], x, y, n),
            case("8 of 32 lanes", m["quarter"], x, y, n),
            case("atomics (red, atom)", m["atomics"], bins, slots, out, n),
            case("atomics on one word (red)", m["atomics_one_word"], bins, n),
            case("transpose naive", m["transpose_naive"], a, t, side, **tgrid),
            case("transpose tiled 32x32", m["transpose_tiled"], a, t, side, **tgrid),
            case("transpose tiled 32x33", m["transpose_padded"], a, t, side, **tgrid),
        ]
    return make


def _library(quick: bool, only: set) -> list:
    """``(name, setup)`` of every kernel library benchmark row (setup makes
    the inputs and returns the call)."""
    sizes = kernel_library._sizes(quick)
    specs = wb.kernels.specs()
    out = []

    def spec_case(spec, dtype, elements):
        def setup():
            args, _ = spec.example(elements, dtype, np.random.default_rng(0))
            dev = device_args(args)
            return lambda: spec.function(*dev)
        return setup

    for name, spec in specs.items():
        if spec.family in ("matmul", "conv") or (only and name not in only):
            continue
        out.append((name, spec_case(spec, spec.dtypes[0], sizes["elements"])))
    if "softmax" in specs and (not only or "softmax" in only):
        for cols in kernel_library.SOFTMAX_COLUMNS:
            rows = max(1, sizes["softmax_elements"] // cols)

            def setup(rows=rows, cols=cols):
                x = wb.to_device(np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
                return lambda: specs["softmax"].function(x)
            out.append((f"softmax {rows}x{cols}", setup))
    n = sizes["gemm"]
    for name, dtype in (("sgemm", np.float32), ("hgemm", np.float16)):
        if name in specs and (not only or name in only):
            def setup(name=name, dtype=dtype):
                rng = np.random.default_rng(1)
                a = wb.to_device(rng.standard_normal((n, n)).astype(dtype))
                b = wb.to_device(rng.standard_normal((n, n)).astype(dtype))
                return lambda: specs[name].function(a, b)
            out.append((f"{name} {n}^3", setup))
    N, C, H, W, K = sizes["conv"]
    for name in ("conv2d", "conv2d_im2col"):
        if name in specs and (not only or name in only):
            def setup(name=name):
                rng = np.random.default_rng(2)
                x = wb.to_device(rng.standard_normal((N, C, H, W)).astype(np.float32))
                w = wb.to_device(rng.standard_normal((K, C, 3, 3)).astype(np.float32))
                return lambda: specs[name].function(x, w, 1, 1)
            out.append((f"{name} {N}x{C}x{H}x{W} K={K}", setup))
    return out


def cases(quick: bool = False, only=()):
    """``(group, name, call)`` of every case in a fixed order, set up one after
    another (a case's inputs go when the next one is set up). ``only``: names
    of library kernels, or ``probes``."""
    only = set(only)
    if not only or "probes" in only:
        for name, call in _probes(quick)():
            yield "probes", name, call
    if only == {"probes"}:
        return
    for name, setup in _library(quick, only - {"probes"}):
        yield "library", name, setup()
