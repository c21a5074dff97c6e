// The device through the runtime API, as the samples' deviceQuery asks for it.
#include <helper_check.h>

int main() {
    printf("runtime headers: %s %s, CUDART_VERSION set: %d, nvcc %d\n",
#ifdef __CUDA_RUNTIME_H__
           "runtime",
#else
           "none",
#endif
#ifdef __DRIVER_TYPES_H__
           "driver_types",
#else
           "none",
#endif
           CUDART_VERSION >= 11000, __CUDACC_VER_MAJOR__ >= 11);
    int dev = pickDevice();
    cudaDeviceProp prop;
    checkCuda(cudaGetDeviceProperties(&prop, dev));
    static const cudaDeviceAttr attrs[] = {
        cudaDevAttrMaxThreadsPerBlock, cudaDevAttrMaxBlockDimX, cudaDevAttrMaxBlockDimZ,
        cudaDevAttrMaxGridDimX, cudaDevAttrMaxGridDimY, cudaDevAttrWarpSize, cudaDevAttrMultiProcessorCount,
        cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor,
        cudaDevAttrMaxSharedMemoryPerBlock, cudaDevAttrMaxSharedMemoryPerBlockOptin,
        cudaDevAttrMaxThreadsPerMultiProcessor, cudaDevAttrMaxRegistersPerBlock,
        cudaDevAttrIntegrated, cudaDevAttrCanMapHostMemory, cudaDevAttrConcurrentKernels,
        cudaDevAttrUnifiedAddressing, cudaDevAttrManagedMemory, cudaDevAttrCooperativeLaunch,
        cudaDevAttrMemoryPoolsSupported, cudaDevAttrMaxBlocksPerMultiprocessor, cudaDevAttrTotalConstantMemory,
    };
    for (cudaDeviceAttr a : attrs) {
        int v = -1;
        checkCuda(cudaDeviceGetAttribute(&v, a, dev));
        printf("attribute %d = %d\n", (int)a, v);
    }
    printf("props agree: %d %d %d\n", prop.multiProcessorCount, prop.warpSize, prop.maxThreadsPerBlock);
    int bad;
    printf("bad attribute: %s\n", cudaGetErrorName(cudaDeviceGetAttribute(&bad, (cudaDeviceAttr)100000, dev)));
    printf("bad device: %s\n", cudaGetErrorName(cudaDeviceGetAttribute(&bad, cudaDevAttrWarpSize, 1000)));
    return 0;
}
