"""The simulator's CUDA runtime for whole programs behaves as a GPU's does
where programs rely on it: allocation limits, the dynamic shared memory opt-in."""
import pytest

import workbench as wb


def sim(source, **kw):
    kw.setdefault("echo", False)
    return wb.program(source, backend="simulator", **kw)


HUGE_MALLOC = r"""
#include <cstdio>
#include <cstdint>
int main() {
    void* huge = nullptr;
    cudaError_t e = cudaMalloc(&huge, (size_t)-1024);
    printf("huge: %s %d\n", cudaGetErrorString(e), huge == nullptr);
    cudaGetLastError();
    char *a = nullptr, *b = nullptr;
    cudaMalloc(&a, 1 << 20);
    cudaMalloc(&b, 1 << 20);
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    printf("overlap: %d\n", (int)(x < y + (1 << 20) && y < x + (1 << 20)));
    printf("past end: %s\n", cudaGetErrorString(cudaMemset(a + 16, 0, (size_t)-8)));
    return 0;
}
"""


def test_a_huge_cuda_malloc_fails_and_later_allocations_do_not_overlap():
    lines = sim(HUGE_MALLOC).stdout.splitlines()
    assert lines[0] == "huge: out of memory 1"
    assert lines[1] == "overlap: 0"
    assert lines[2] == "past end: invalid argument"


DYNAMIC_SHARED = r"""
#include <cstdio>
template <typename T>
__global__ void fill(T* out) {
    extern __shared__ unsigned char smem[];
    smem[threadIdx.x] = 1;
    __syncthreads();
    out[threadIdx.x] = smem[threadIdx.x];
}
int main() {
    float* d;
    cudaMalloc(&d, 64 * sizeof(float));
    const int bytes = 64 << 10;
    fill<<<1, 64, bytes>>>(d);
    printf("without opt-in: %s\n", cudaGetErrorString(cudaGetLastError()));
    printf("attribute: %s\n", cudaGetErrorString(cudaFuncSetAttribute(
        fill<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)));
    fill<<<1, 64, bytes>>>(d);
    printf("with opt-in: %s\n", cudaGetErrorString(cudaGetLastError()));
    fill<<<1, 64, bytes + 1024>>>(d);
    printf("above the opt-in: %s\n", cudaGetErrorString(cudaGetLastError()));
    printf("too much: %s\n", cudaGetErrorString(cudaFuncSetAttribute(
        fill<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 30)));
    cudaGetLastError();
    fill<<<1, 64, 48 << 10>>>(d);
    printf("48 KiB: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
"""


def test_dynamic_shared_memory_above_48_kib_needs_the_opt_in():
    lines = sim(DYNAMIC_SHARED).stdout.splitlines()
    assert lines == ["without opt-in: invalid argument", "attribute: no error",
                     "with opt-in: no error", "above the opt-in: invalid argument",
                     "too much: invalid argument", "48 KiB: no error"]


MACRO_LAUNCH = r"""
#define LAUNCH(kern, threads) kern<<<1, threads>>>(out)
#define LAUNCH_ON(kern, threads) \
    kern<<<1, threads>>>(out)
__global__ void checked(int* out) { if (threadIdx.x >= 2) __trap(); out[threadIdx.x] = 1; }
int main(int argc, char** argv) {
    int* out;
    cudaMalloc(&out, 64 * sizeof(int));
    if (argc > 1) { LAUNCH_ON(checked, 8); } else { LAUNCH(checked, 8); }
    cudaDeviceSynchronize();
    return 0;
}
"""


def test_a_launch_inside_a_macro_is_named_after_the_kernel():
    for args in ((), ("continued",)):
        with pytest.raises(wb.ProgramError) as info:
            sim(MACRO_LAUNCH, args=args)
        assert "kernel 'checked'" in info.value.fault, info.value.fault
