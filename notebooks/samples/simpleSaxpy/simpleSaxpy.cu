// A program in the style of NVIDIA's CUDA samples, written for notebook 09: it leaves
// error checking and device selection to the samples' helper header (helper_cuda.h, from
// their Common/ folder) and builds unchanged against it.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <helper_cuda.h>

__global__ void saxpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main(int argc, char** argv)
{
    printf("[simpleSaxpy] - Starting...\n");
    findCudaDevice(argc, (const char**)argv);

    const int n = 1 << 16;
    size_t bytes = n * sizeof(float);
    float *x, *y;
    checkCudaErrors(cudaMallocHost(&x, bytes));
    checkCudaErrors(cudaMallocHost(&y, bytes));
    for (int i = 0; i < n; ++i) { x[i] = (float)(i % 100); y[i] = 1.0f; }

    float *d_x, *d_y;
    checkCudaErrors(cudaMalloc(&d_x, bytes));
    checkCudaErrors(cudaMalloc(&d_y, bytes));
    checkCudaErrors(cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice));
    checkCudaErrors(cudaMemcpy(d_y, y, bytes, cudaMemcpyHostToDevice));

    saxpy<<<(n + 255) / 256, 256>>>(2.0f, d_x, d_y, n);
    getLastCudaError("saxpy kernel failed");
    checkCudaErrors(cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost));

    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += y[i] != 2.0f * (float)(i % 100) + 1.0f;
    printf("%d elements, %d wrong\n", n, wrong);

    checkCudaErrors(cudaFree(d_x));
    checkCudaErrors(cudaFree(d_y));
    checkCudaErrors(cudaFreeHost(x));
    checkCudaErrors(cudaFreeHost(y));
    printf("Test %s\n", wrong == 0 ? "PASSED" : "FAILED");
    exit(wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
