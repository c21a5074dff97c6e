// Pitched, 3D, mapped and symbol memory through the runtime API, as the samples use it.
#include <cstdio>
#include <cstring>
#include <helper_check.h>

__constant__ float coefficients[4];
__device__ int hits;

__global__ void scaleRows(float* m, size_t pitch, int w, int h) {
    int x = threadIdx.x, y = blockIdx.x;
    if (x < w && y < h) {
        float* row = (float*)((char*)m + y * pitch);
        row[x] = row[x] * coefficients[y % 4] + y;
        atomicAdd(&hits, 1);
    }
}

__global__ void viaMapped(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 3;
}

int main() {
    pickDevice();
    const int w = 7, h = 5;
    float host[h][w];
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) host[y][x] = x + 0.5f * y;
    float* d;
    size_t pitch;
    checkCuda(cudaMallocPitch(&d, &pitch, w * sizeof(float), h));
    printf("pitch is a multiple of the texture alignment: %d\n", pitch % 512 == 0 || pitch % 256 == 0);
    checkCuda(cudaMemset2D(d, pitch, 0, w * sizeof(float), h));
    checkCuda(cudaMemcpy2D(d, pitch, host, w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice));
    const float c[4] = {2.f, -1.f, 0.5f, 3.f};
    checkCuda(cudaMemcpyToSymbol(coefficients, c, sizeof c));
    int zero = 0;
    checkCuda(cudaMemcpyToSymbol(hits, &zero, sizeof zero));
    scaleRows<<<h, 32>>>(d, pitch, w, h);
    checkCuda(cudaGetLastError());
    checkCuda(cudaMemcpy2D(host, w * sizeof(float), d, pitch, w * sizeof(float), h, cudaMemcpyDeviceToHost));
    int counted = 0;
    checkCuda(cudaMemcpyFromSymbol(&counted, hits, sizeof counted));
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) printf("%g ", host[y][x]);
        printf("\n");
    }
    printf("hits %d\n", counted);
    printf("too wide: %s\n", cudaGetErrorName(cudaMemcpy2D(host, w * sizeof(float), d, pitch, pitch + 4, h,
                                                           cudaMemcpyDeviceToHost)));
    cudaGetLastError();

    // 3D: a 4 x 3 x 2 block of ints through cudaMalloc3D and cudaMemcpy3D, both ways
    cudaExtent extent = make_cudaExtent(4 * sizeof(int), 3, 2);
    cudaPitchedPtr volume;
    checkCuda(cudaMalloc3D(&volume, extent));
    int cube[2][3][4], back[2][3][4];
    for (int i = 0; i < 24; ++i) (&cube[0][0][0])[i] = i * i;
    cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(cube, 4 * sizeof(int), 4, 3);
    p.dstPtr = volume;
    p.extent = extent;
    p.kind = cudaMemcpyHostToDevice;
    checkCuda(cudaMemcpy3D(&p));
    memset(&p, 0, sizeof p);
    p.srcPtr = volume;
    p.dstPtr = make_cudaPitchedPtr(back, 4 * sizeof(int), 4, 3);
    p.extent = extent;
    p.kind = cudaMemcpyDeviceToHost;
    checkCuda(cudaMemcpy3D(&p));
    printf("3D round trip: %d\n", memcmp(cube, back, sizeof cube) == 0);

    // mapped host memory, reached by the kernel through its device pointer
    int *in, *out, *din, *dout;
    const int n = 100;
    checkCuda(cudaHostAlloc(&in, n * sizeof(int), cudaHostAllocMapped));
    checkCuda(cudaHostAlloc(&out, n * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    for (int i = 0; i < n; ++i) in[i] = i - 7;
    checkCuda(cudaHostGetDevicePointer(&din, in, 0));
    checkCuda(cudaHostGetDevicePointer(&dout, out, 0));
    viaMapped<<<(n + 31) / 32, 32>>>(din, dout, n);
    checkCuda(cudaDeviceSynchronize());
    long sum = 0;
    for (int i = 0; i < n; ++i) sum += out[i];
    printf("mapped sum %ld\n", sum);
    unsigned flags = 0;
    checkCuda(cudaHostGetFlags(&flags, out));
    printf("flags mapped %d portable %d\n", (flags & cudaHostAllocMapped) != 0, (flags & cudaHostAllocPortable) != 0);

    size_t free_before, total, free_after;
    checkCuda(cudaMemGetInfo(&free_before, &total));
    void* big;
    checkCuda(cudaMalloc(&big, 64 << 20));
    checkCuda(cudaMemGetInfo(&free_after, &total));
    printf("64 MiB taken: %d, free <= total: %d\n", free_before - free_after >= (64u << 20), free_before <= total);
    checkCuda(cudaFree(big));
    checkCuda(cudaFreeHost(in));
    checkCuda(cudaFreeHost(out));
    checkCuda(cudaFree(d));
    checkCuda(cudaFree(volume.ptr));
    return 0;
}
