// Error checking and device selection in the style of the CUDA samples' helper_cuda.h,
// written for the workbench's tests: like that header, it defines its runtime helpers
// only when the toolkit's runtime headers have defined their include guards.
#ifndef HELPER_CHECK_H
#define HELPER_CHECK_H
#include <cstdio>
#include <cstdlib>

#ifndef EXIT_WAIVED
#define EXIT_WAIVED 2
#endif

#ifdef __DRIVER_TYPES_H__
template <typename T>
void check(T result, const char* what, const char* file, int line) {
    if (result) {
        fprintf(stderr, "CUDA error at %s:%d code=%d(%s) \"%s\"\n", file, line, (int)result,
                cudaGetErrorName(result), what);
        exit(EXIT_FAILURE);
    }
}
#define checkCuda(val) check((val), #val, __FILE__, __LINE__)
#endif

#ifdef __CUDA_RUNTIME_H__
// The device with the most multiprocessors x clock, as the samples' findCudaDevice picks.
inline int pickDevice() {
    int count = 0, best = 0;
    long long best_score = -1;
    checkCuda(cudaGetDeviceCount(&count));
    for (int d = 0; d < count; ++d) {
        int mode, sms, clock, integrated, major, minor;
        checkCuda(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d));
        checkCuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
        checkCuda(cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, d));
        checkCuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d));
        checkCuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d));
        if (cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, d) != cudaSuccess) clock = 1;
        if (mode == cudaComputeModeProhibited) continue;
        long long score = (long long)sms * clock;
        if (score > best_score) { best_score = score; best = d; }
    }
    checkCuda(cudaSetDevice(best));
    int major, minor;
    checkCuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, best));
    checkCuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, best));
    printf("GPU Device %d: compute capability %d.%d\n", best, major, minor);
    return best;
}
#endif
#endif
