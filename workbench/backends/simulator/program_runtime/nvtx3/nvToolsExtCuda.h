/* NVTX names for CUDA objects (no-ops on the simulator, see nvToolsExt.h). */
#ifndef WBSIM_NVTOOLSEXTCUDA_H
#define WBSIM_NVTOOLSEXTCUDA_H
#include "nvToolsExt.h"
#include "wbsim_runtime_types.h"
static inline void nvtxNameCudaDeviceA(int, const char*) {}
static inline void nvtxNameCudaStreamA(cudaStream_t, const char*) {}
static inline void nvtxNameCudaEventA(cudaEvent_t, const char*) {}
#endif
