// A failed device assert, as the samples' simpleAssert checks it: the next synchronising
// call returns cudaErrorAssert, every runtime call after it too (the error is sticky) while
// cudaGetLastError reads and resets it as any other error, and the program goes on.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void testKernel(int n, int* out) {
    int gtid = blockIdx.x * blockDim.x + threadIdx.x;
    assert(gtid < n);
    out[gtid] = gtid;
}

int main() {
    int* out;
    cudaMalloc(&out, 64 * sizeof(int));
    printf("launch: %s\n", cudaGetErrorName(cudaSuccess));
    testKernel<<<2, 32>>>(61, out);
    printf("-- begin assert output\n");
    cudaError_t e = cudaDeviceSynchronize();
    printf("-- end assert output\n");
    printf("synchronize: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    void* more = nullptr;
    printf("cudaMalloc after: %s\n", cudaGetErrorName(cudaMalloc(&more, 16)));
    printf("cudaGetLastError: %s\n", cudaGetErrorName(cudaGetLastError()));
    printf("cudaGetLastError again: %s\n", cudaGetErrorName(cudaGetLastError()));
    printf("the program goes on\n");
    return e == cudaErrorAssert ? 0 : 1;
}
