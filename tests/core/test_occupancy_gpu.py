"""The occupancy calculator equals the CUDA driver's
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` on the GPU, for kernels with
different register and shared-memory use, at every block size 32..1024 in
steps of 32, with and without dynamic shared memory (the full check with more
kernels and a table is ``benchmarks/occupancy_check.py``)."""
from __future__ import annotations

import pytest

import workbench as wb

pytestmark = pytest.mark.gpu

KERNELS = {
    "light": (r"""
extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}""", ()),
    # many live accumulators: a high register count
    "registers": (r"""
extern "C" __global__ void k(const float* x, float* y, int n) {
    float acc[96];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int j = 0; j < 96; ++j) acc[j] = x[(i + 31 * j) % n];
    #pragma unroll
    for (int r = 0; r < 6; ++r) {
        #pragma unroll
        for (int j = 0; j < 96; ++j) acc[j] = acc[j] * acc[(j + 5) % 96] + 1.0f;
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < 96; ++j) s += acc[j];
    if (i < n) y[i] = s;
}""", ()),
    # the same, capped at 40 registers (spills to local memory)
    "capped": (r"""
extern "C" __global__ void k(const float* x, float* y, int n) {
    float acc[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = x[(i + 7 * j) % n];
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        #pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 3) % 64] + 1.0f;
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    if (i < n) y[i] = s;
}""", ("--maxrregcount=40",)),
    # 24 KiB of static shared memory
    "shared": (r"""
extern "C" __global__ void k(const float* x, float* y, int n) {
    __shared__ float tile[6144];
    extern __shared__ float extra[];
    for (int j = threadIdx.x; j < 6144; j += blockDim.x) tile[j] = x[j % n];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tile[(threadIdx.x * 5) % 6144] + extra[0];
}""", ()),
    # __launch_bounds__(512): at most 512 threads per block
    "bounded": (r"""
extern "C" __global__ void __launch_bounds__(512) k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}""", ()),
}


@pytest.mark.parametrize("label", list(KERNELS))
def test_occupancy_equals_the_cuda_api(gpu, label):
    from cupy.cuda import driver
    source, options = KERNELS[label]
    kernel = wb.compile(source, name=f"test-occupancy-{label}", options=options)["k"]
    static = kernel.resources.shared_bytes
    dynamics = (0, 1000, 12 * 1024, gpu.device_properties().shared_memory_per_block - static)
    mismatches = []
    for block in range(32, min(1024, kernel.resources.max_threads_per_block) + 1, 32):
        for dynamic in dynamics:
            ours = wb.occupancy(kernel, block=block, shared_mem=dynamic).active_blocks
            theirs = driver.occupancyMaxActiveBlocksPerMultiprocessor(
                kernel.function.kernel.ptr, block, dynamic)
            if ours != theirs:
                mismatches.append((block, dynamic, ours, theirs))
    assert mismatches == [], f"{label} ({kernel.resources.registers} registers): " \
                             f"(block, dynamic, ours, CUDA) {mismatches[:10]}"
