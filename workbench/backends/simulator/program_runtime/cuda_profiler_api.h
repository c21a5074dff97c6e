/* CUDA's cuda_profiler_api.h for whole programs on the simulator: cudaProfilerStart and
 * cudaProfilerStop mark the range a profiler collects; with no profiler they do nothing
 * and return cudaSuccess, as on a GPU. */
#ifndef __CUDA_PROFILER_API_H__
#define __CUDA_PROFILER_API_H__
#include "wbsim_runtime_types.h"
extern "C" {
cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
}
#endif
