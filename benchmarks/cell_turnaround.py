"""Cell turnaround for a small kernel: cold compile, warm (cached) re-run,
and compiling + running the same kernel as a program with nvcc (what
nvcc4jupyter does for every cell).

Target: a warm re-run costs under 1 ms of compile time.
Run: ``python benchmarks/cell_turnaround.py``.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import print_table  # noqa: E402

KERNEL = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

PROGRAM = KERNEL + r'''
#include <cstdio>
int main() {
    int n = 1 << 20; float *x, *y;
    cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
    saxpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
'''


def run_cell(source: str) -> tuple[float, float, bool]:
    """Compile + one launch through the workbench: (total s, compile s, cache hit)."""
    import workbench as wb
    start = time.perf_counter()
    module = wb.compile(source)
    x = wb.to_device(np.ones(1 << 20, np.float32))
    y = wb.xp.zeros_like(x)
    module["saxpy"](2.0, x, y, x.size, n=x.size)
    wb.synchronize()
    return time.perf_counter() - start, module.seconds, module.cache_hit


def main() -> None:
    cache = tempfile.mkdtemp(prefix="wb-bench-cache-")
    os.environ["CUPY_CACHE_DIR"] = cache       # a cold CuPy disk cache
    os.environ["WORKBENCH_CACHE_DIR"] = cache  # and a cold simulator/NVRTC cache
    import workbench as wb
    b = wb.backend()
    rows = []
    source = KERNEL + f"// {uuid.uuid4()}\n"
    total, compile_s, hit = run_cell(source)
    rows.append(["cold compile + launch", total * 1e3, compile_s * 1e3, hit])
    warm = [run_cell(source) for _ in range(20)]
    rows.append(["warm re-run (median of 20)", statistics.median(w[0] for w in warm) * 1e3,
                 statistics.median(w[1] for w in warm) * 1e3, all(w[2] for w in warm)])
    nvcc = shutil.which("nvcc")
    if nvcc and not b.simulated:
        with tempfile.TemporaryDirectory() as tmp:
            src = pathlib.Path(tmp, "cell.cu")
            src.write_text(PROGRAM)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                subprocess.run([nvcc, "-o", str(src.with_suffix("")), str(src)], check=True)
                subprocess.run([str(src.with_suffix(""))], check=True, capture_output=True)
                times.append(time.perf_counter() - start)
            rows.append(["nvcc compile + run program (median of 3)", statistics.median(times) * 1e3, "", ""])
    shutil.rmtree(cache, ignore_errors=True)
    title = f"Cell turnaround on {b.describe()}" + (" (simulated)" if b.simulated else "")
    print_table(title, ["what", "total ms", "compile ms", "cache hit"], rows)
    print("target: warm re-run compile time < 1 ms")


if __name__ == "__main__":
    main()
