"""Speed of the CPU simulator against its targets; prints a table.

    python benchmarks/simulator.py            # about a minute on 2 cores
    python benchmarks/simulator.py --quick    # smaller numba comparison

Targets: saxpy over 16M elements within 3x of NumPy; at most 50 ns per
thread per __syncthreads and per warp shuffle; the launch round trip of an
empty kernel (grid 1, block 32) at most 20 µs, measured as
``SimulatorBackend.launch`` plus ``synchronize`` (the request to the worker
process and its reply included), and shown beside the same through a
``wb.Kernel`` call with the timing log on plus ``wb.synchronize()`` (argument
checks and the log's two events added); block reduction and tiled matmul at
least 100x faster than numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, run in
a subprocess).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time

import numpy as np

import workbench as wb
from workbench.backends.contract import CompileOptions
from workbench.backends.simulator import SimulatorBackend

KERNELS = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void barriers(float* out, int reps) {
    __shared__ float s[1024];
    float v = threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        s[threadIdx.x] = v;
        __syncthreads();
        v = s[(threadIdx.x + 1) % blockDim.x];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
extern "C" __global__ void shuffles(float* out, int reps) {
    float v = threadIdx.x;
    for (int r = 0; r < reps; ++r) v += __shfl_xor_sync(0xffffffffu, v, r & 31);
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
extern "C" __global__ void empty() {}
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
#define TILE 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
'''

NUMBA_SCRIPT = textwrap.dedent(r'''
    import os, sys, time, json
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numpy as np
    from numba import cuda, float32
    n_red, n_mm = int(sys.argv[1]), int(sys.argv[2])

    @cuda.jit
    def block_sum(x, out, n):
        s = cuda.shared.array(256, float32)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        s[t] = x[i] if i < n else 0.0
        cuda.syncthreads()
        k = cuda.blockDim.x // 2
        while k > 0:
            if t < k:
                s[t] += s[t + k]
            cuda.syncthreads()
            k //= 2
        if t == 0:
            out[cuda.blockIdx.x] = s[0]

    @cuda.jit
    def matmul(A, B, C, n):
        As = cuda.shared.array((16, 16), float32)
        Bs = cuda.shared.array((16, 16), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * 16 + ty
        col = cuda.blockIdx.x * 16 + tx
        acc = 0.0
        for t in range(n // 16):
            As[ty, tx] = A[row, t * 16 + tx]
            Bs[ty, tx] = B[t * 16 + ty, col]
            cuda.syncthreads()
            for k in range(16):
                acc += As[ty, k] * Bs[k, tx]
            cuda.syncthreads()
        C[row, col] = acc

    x = np.random.rand(n_red).astype(np.float32)
    out = np.zeros(n_red // 256, np.float32)
    t = time.perf_counter(); block_sum[n_red // 256, 256](x, out, n_red); red = time.perf_counter() - t
    A = np.random.rand(n_mm, n_mm).astype(np.float32); B = np.random.rand(n_mm, n_mm).astype(np.float32)
    C = np.zeros((n_mm, n_mm), np.float32)
    t = time.perf_counter(); matmul[(n_mm // 16, n_mm // 16), (16, 16)](A, B, C, n_mm); mm = time.perf_counter() - t
    assert np.allclose(C, A @ B, rtol=1e-3, atol=1e-3)
    print(json.dumps({"reduction_s": red, "matmul_s": mm}))
''')


EMPTY = 'extern "C" __global__ void empty() {}'


def median_call_us(call, calls: int) -> float:
    """Median wall-clock time of one ``call()``, in µs."""
    clock = time.perf_counter_ns
    times = []
    for _ in range(calls):
        t = clock()
        call()
        times.append(clock() - t)
    return float(np.median(times)) / 1e3


def round_trip_rows(sim, empty, rounds: int = 7, calls: int = 2000) -> list:
    """The empty kernel's launch round trip through the backend and through a
    ``wb.Kernel`` (timing log on), measured in alternating rounds: the median
    of the rounds' medians, their range, and the ratio of the two."""
    from workbench.runtime.session import session
    wb.backend(sim)
    kernel = wb.compile(EMPTY)["empty"]
    log = session().timing_log
    assert log.enabled, "the timing log should be on"

    def through_backend():
        sim.launch(empty, (1, 1, 1), (32, 1, 1), ())
        sim.synchronize()

    def through_kernel():
        kernel(grid=1, block=32)
        wb.synchronize()

    for _ in range(200):
        through_backend()
        through_kernel()
    backend_us, kernel_us = [], []
    for _ in range(rounds):
        backend_us.append(median_call_us(through_backend, calls))
        kernel_us.append(median_call_us(through_kernel, calls))
        wb.timings()  # read the log now and then, as a notebook does
    b, k = float(np.median(backend_us)), float(np.median(kernel_us))
    ratio = float(np.median([y / x for x, y in zip(backend_us, kernel_us)]))
    spread = lambda v: f"{min(v):.1f}-{max(v):.1f} over {rounds} rounds"  # noqa: E731
    return [
        ("launch round trip, empty kernel (median): backend.launch + synchronize()",
         f"{b:.1f} µs ({spread(backend_us)})", "", "<= 20 µs", b <= 20),
        ("  same through wb.Kernel, timing log on, + wb.synchronize()",
         f"{k:.1f} µs ({spread(kernel_us)})", f"{ratio:.2f}x backend", "", True),
    ]


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller numba comparison")
    args = ap.parse_args(argv)
    sim = SimulatorBackend(timeout_s=600)
    start = time.perf_counter()
    mod = sim.compile(KERNELS, CompileOptions(), ["saxpy", "barriers", "shuffles", "empty",
                                                  "block_sum", "matmul"])
    first_compile = time.perf_counter() - start
    fn = mod.get_function
    rows = []

    def kernel_s(name, grid, block, *a):
        sim.launch(fn(name), grid, block, a)
        return sim.last_launch_ns / 1e9

    # saxpy, 16M elements
    n = 1 << 24
    xh = np.random.rand(n).astype(np.float32)
    yh = np.random.rand(n).astype(np.float32)
    x, y = sim.to_device(xh), sim.to_device(yh)
    a = np.float32(2.0)
    grid = ((n + 255) // 256, 1, 1)
    sim_s = best_of(lambda: sim.launch(fn("saxpy"), grid, (256, 1, 1), (a, x, y, np.int32(n))))
    np_s = best_of(lambda: np.add(a * xh, yh, out=yh))
    rows.append(("saxpy 16M: simulator / NumPy (a*x+y)", f"{sim_s * 1e3:.1f} ms / {np_s * 1e3:.1f} ms",
                 f"{sim_s / np_s:.2f}x", "<= 3x", sim_s / np_s <= 3))

    out = sim.xp.zeros(64 * 1024, np.float32)
    reps = 200
    for block in (256, 1024):
        kernel_s("barriers", (64, 1, 1), (block, 1, 1), out, np.int32(2))  # warm the fiber stacks
        t = min(kernel_s("barriers", (64, 1, 1), (block, 1, 1), out, np.int32(reps)) for _ in range(3))
        t0 = min(kernel_s("barriers", (64, 1, 1), (block, 1, 1), out, np.int32(0)) for _ in range(3))
        ns = (t - t0) / (64 * block * reps) * 1e9
        rows.append((f"__syncthreads, 64 blocks x {block} threads", f"{ns:.1f} ns/thread/barrier", "",
                     "<= 50 ns", ns <= 50))
        t = min(kernel_s("shuffles", (64, 1, 1), (block, 1, 1), out, np.int32(reps)) for _ in range(3))
        t0 = min(kernel_s("shuffles", (64, 1, 1), (block, 1, 1), out, np.int32(0)) for _ in range(3))
        ns = (t - t0) / (64 * block * reps) * 1e9
        rows.append((f"__shfl_xor_sync, 64 blocks x {block} threads", f"{ns:.1f} ns/thread/shuffle", "",
                     "<= 50 ns", ns <= 50))

    rows += round_trip_rows(sim, fn("empty"))

    # against numba's CUDA simulator (in a subprocess: it needs its environment variable first)
    n_red, n_mm = (1 << 13, 32) if args.quick else (1 << 15, 64)
    proc = subprocess.run([sys.executable, "-c", NUMBA_SCRIPT, str(n_red), str(n_mm)],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        rows.append(("numba CUDA simulator", "failed: " + proc.stderr.strip()[-200:], "", "", False))
    else:
        numba = json.loads(proc.stdout.strip().splitlines()[-1])
        xr = sim.to_device(np.random.rand(n_red).astype(np.float32))
        partial = sim.xp.zeros(n_red // 256, np.float32)
        red = min(kernel_s("block_sum", (n_red // 256, 1, 1), (256, 1, 1), xr, partial, np.int32(n_red))
                  for _ in range(3))
        A = sim.to_device(np.random.rand(n_mm, n_mm).astype(np.float32))
        B = sim.to_device(np.random.rand(n_mm, n_mm).astype(np.float32))
        C = sim.xp.zeros((n_mm, n_mm), np.float32)
        mm = min(kernel_s("matmul", (n_mm // 16, n_mm // 16, 1), (16, 16, 1), A, B, C, np.int32(n_mm))
                 for _ in range(3))
        assert np.allclose(sim.to_host(C), sim.to_host(A) @ sim.to_host(B), rtol=1e-3, atol=1e-3)
        for what, ours, theirs in ((f"block reduction, {n_red} elements", red, numba["reduction_s"]),
                                   (f"tiled matmul {n_mm}x{n_mm}", mm, numba["matmul_s"])):
            ratio = theirs / ours
            rows.append((f"{what}: simulator / numba cudasim", f"{ours * 1e3:.2f} ms / {theirs * 1e3:.0f} ms",
                         f"{ratio:,.0f}x faster", ">= 100x", ratio >= 100))

    print(f"\nCPU simulator benchmark: {sim.describe()}")
    print(f"first compile (NVRTC check + g++, or cache): {first_compile:.2f} s\n")
    w = max(len(r[0]) for r in rows)
    v = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w}}  {'result':<{v}}  {'ratio':<14} {'target':<9} ok")
    for name, result, ratio, target, ok in rows:
        verdict = ("PASS" if ok else "over") if target else ""
        print(f"{name:<{w}}  {result:<{v}}  {ratio:<14} {target:<9} {verdict}")
    sim.close()
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
