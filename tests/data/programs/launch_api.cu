// Streams and events with flags, function attributes, the occupancy API, cudaLaunchKernel
// and a cooperative launch, as the samples use them.
#include <cstdio>
#include <cooperative_groups.h>
#include <helper_check.h>

namespace cg = cooperative_groups;

__global__ void axpy(float a, const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];
}

// Every block adds its part, then (after the grid barrier) block 0 adds the parts up.
__global__ void gridSum(const int* in, int* parts, int* total, int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ int s;
    if (threadIdx.x == 0) s = 0;
    __syncthreads();
    for (int i = grid.thread_rank(); i < n; i += grid.size()) atomicAdd(&s, in[i]);
    __syncthreads();
    if (threadIdx.x == 0) parts[blockIdx.x] = s;
    grid.sync();
    if (grid.thread_rank() == 0) {
        int t = 0;
        for (unsigned b = 0; b < gridDim.x; ++b) t += parts[b];
        *total = t;
    }
}

int main() {
    pickDevice();
    const int n = 1 << 12;
    float *x, *y;
    checkCuda(cudaMallocManaged(&x, n * sizeof(float)));
    checkCuda(cudaMallocManaged(&y, n * sizeof(float)));
    for (int i = 0; i < n; ++i) { x[i] = i % 10; y[i] = 1; }

    cudaStream_t stream;
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned flags = 99;
    checkCuda(cudaStreamGetFlags(stream, &flags));
    cudaEvent_t start, stop, untimed;
    checkCuda(cudaEventCreate(&start));
    checkCuda(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
    checkCuda(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    checkCuda(cudaEventRecord(start, stream));

    int minGrid = 0, block = 0;
    checkCuda(cudaOccupancyMaxPotentialBlockSize(&minGrid, &block, axpy, 0, 0));
    int perSM = 0;
    checkCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, axpy, 128, 0));
    printf("occupancy answers: %d %d %d\n", minGrid > 0, block > 0 && block % 32 == 0, perSM > 0);

    float a = 2.0f;
    int count = n;
    void* args[] = {&a, &x, &y, &count};
    checkCuda(cudaLaunchKernel((void*)axpy, dim3(8), dim3(128), args, 0, stream));
    checkCuda(cudaEventRecord(stop, stream));
    checkCuda(cudaEventRecord(untimed, stream));
    checkCuda(cudaEventSynchronize(stop));
    float ms = -1;
    checkCuda(cudaEventElapsedTime(&ms, start, stop));
    printf("stream flags %u, elapsed >= 0: %d, untimed: %s\n", flags, ms >= 0,
           cudaGetErrorName(cudaEventElapsedTime(&ms, start, untimed)));
    cudaGetLastError();
    double total = 0;
    for (int i = 0; i < n; ++i) total += y[i];
    printf("axpy total %.1f\n", total);

    cudaFuncAttributes attr;
    checkCuda(cudaFuncGetAttributes(&attr, axpy));
    printf("function: max threads %d, registers reported: %d\n", attr.maxThreadsPerBlock, attr.numRegs > 0);

    int coop = 0;
    checkCuda(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    int *in, *parts, *sum;
    const int m = 10000;
    checkCuda(cudaMallocManaged(&in, m * sizeof(int)));
    checkCuda(cudaMalloc(&parts, 64 * sizeof(int)));
    checkCuda(cudaMallocManaged(&sum, sizeof(int)));
    for (int i = 0; i < m; ++i) in[i] = i % 7;
    int blocksPerSM = 0;
    checkCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSM, gridSum, 64, 0));
    int items = m;
    void* coopArgs[] = {&in, &parts, &sum, &items};
    checkCuda(cudaLaunchCooperativeKernel((void*)gridSum, dim3(4), dim3(64), coopArgs, 0, 0));
    checkCuda(cudaDeviceSynchronize());
    long expected = 0;
    for (int i = 0; i < m; ++i) expected += i % 7;
    printf("cooperative %d: sum %d expected %ld\n", coop, *sum, expected);

    checkCuda(cudaStreamDestroy(stream));
    checkCuda(cudaEventDestroy(start));
    checkCuda(cudaEventDestroy(stop));
    checkCuda(cudaEventDestroy(untimed));
    return 0;
}
