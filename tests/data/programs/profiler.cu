// The profiler's API and NVTX ranges: with no profiler attached they do nothing and succeed.
#include <cstdio>
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#include <helper_check.h>

__global__ void twice(int* x) { x[threadIdx.x] *= 2; }

int main() {
    int* x;
    checkCuda(cudaMallocManaged(&x, 32 * sizeof(int)));
    for (int i = 0; i < 32; ++i) x[i] = i;
    checkCuda(cudaProfilerStart());
    nvtxRangePushA("twice");
    twice<<<1, 32>>>(x);
    nvtxRangePop();
    checkCuda(cudaProfilerStop());
    checkCuda(cudaDeviceSynchronize());
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += x[i];
    printf("sum %d\n", sum);
    return 0;
}
