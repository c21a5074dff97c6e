"""What counting costs on the simulator: a counted launch (``wb.profile``'s
instrumented build) against a plain one, for kernels of a million threads;
prints a table.

    python benchmarks/simulator_profile.py          # about a minute on 2 cores
    python benchmarks/simulator_profile.py --threads 1

Targets: a counted launch of a 1M-thread kernel under 10 s, and at most 30x
the plain launch. Times are the worker's own (the launch without the round
trip), the best of a few runs: the machine may be shared. The first counted
launch of a module also builds its instrumented library (cached on disk);
that build is not timed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import workbench as wb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402

KERNELS = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
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
extern "C" __global__ void transpose_tiled(const float* in, float* out, int n) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
extern "C" __global__ void fma_loop(float* out, int iterations) {
    float v = threadIdx.x * 1e-3f;
    for (int i = 0; i < iterations; ++i) v = v * 0.999f + 0.5f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
"""

TARGET_SECONDS = 10.0
TARGET_RATIO = 30.0


def launches(module) -> list[tuple]:
    """``(name, kernel, arguments, launch options)`` of the four kernels of
    ``module`` (KERNELS compiled) over 2^20 floats: what both benchmarks time."""
    n, side = 1 << 20, 1 << 10
    rng = np.random.default_rng(0)
    x = wb.to_device(rng.random(n, dtype=np.float32))
    y = wb.to_device(rng.random(n, dtype=np.float32))
    out = wb.allocate(n)
    return [
        ("saxpy", module["saxpy"], (np.float32(2.0), x, y, n), dict(grid=n // 256, block=256)),
        ("block_sum (8 barriers)", module["block_sum"], (x, out, n), dict(grid=n // 256, block=256)),
        ("transpose 1024x1024 tiled", module["transpose_tiled"], (x, out, side),
         dict(grid=(side // 32, side // 32), block=(32, 8))),
        ("fma_loop (64 iterations)", module["fma_loop"], (out, 64), dict(grid=n // 256, block=256)),
    ]


def _best(fn, runs: int) -> float:
    """The best of ``runs`` of ``fn()`` (the worker's time of the launch, s)."""
    return min(fn() for _ in range(runs))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=0, help="OS threads running blocks (0: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the best counts")
    args = parser.parse_args(argv)
    b = wb.backend("simulator", threads=args.threads)
    cases = launches(wb.compile(KERNELS, name="simulator_profile"))
    rows = []
    for name, kernel, kargs, launch in cases:
        def plain():
            kernel(*kargs, **launch)
            return b.last_launch_ns / 1e9

        def counted():
            with b.count_launches() as launches:
                kernel(*kargs, **launch)
            return launches[0].cpu_seconds

        plain(), counted()  # build, load, warm up
        t_plain = _best(plain, args.runs * 3)
        start = time.perf_counter()
        t_counted = _best(counted, args.runs)
        wall = (time.perf_counter() - start) / args.runs
        threads = np.prod(launch["grid"]) * np.prod(launch["block"])
        ratio = t_counted / t_plain
        verdict = "PASS" if t_counted < TARGET_SECONDS and ratio <= TARGET_RATIO else "above"
        rows.append([name, int(threads), t_plain * 1e3, t_counted * 1e3, wall * 1e3, ratio, verdict])
    print_table(f"counting on the simulator ({b.describe()})",
                ["kernel", "threads", "plain ms", "counted ms", "wb.profile-like call ms", "ratio",
                 "target (<10 s, <=30x)"], rows)
    print("\nplain / counted: the worker's time of the launch, best of the runs; the call adds "
          "the request, the reply and reading the counts back.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
