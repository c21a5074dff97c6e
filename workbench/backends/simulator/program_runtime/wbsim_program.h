/* The CUDA runtime of whole programs on the CPU simulator: what cuda_runtime.h gives a
 * program compiled by nvcc. A program's every source file is compiled with the prelude
 * (the device API) and this header, then linked with the worker runtime's parts (grid,
 * fibers, warps, faults, printf; native/) and this folder's .cpp files, which implement
 * what is declared here.
 *
 * The toolkit's include guards and version macros are defined as cuda_runtime.h defines
 * them, so headers that test them (the CUDA samples' helper_cuda.h defines
 * checkCudaErrors and findCudaDevice only #ifdef __DRIVER_TYPES_H__ / __CUDA_RUNTIME_H__)
 * see the runtime API. */
#ifndef WBSIM_PROGRAM_H
#define WBSIM_PROGRAM_H
#include <cstddef>
#include <cstring>

#include "wbsim_abi.h"
#include "vector_types.h"
#include "wbsim_runtime_types.h"
#include "wbsim_runtime_api.h"
#include "wbsim_program_launch.h"
#include "wbsim_textures.h"

#include "wbsim_runtime_guards.h"
#define __NVCC__ 1  /* a program's .cu files are nvcc's */

/* Inline PTX that programs.py turns into calls (a special register read by mov). */
static inline unsigned __wbsim_ptx_laneid(void) {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32u;
}
static inline unsigned __wbsim_ptx_warpid(void) {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32u;
}
static inline unsigned __wbsim_ptx_lanemask_lt(void) { return (1u << __wbsim_ptx_laneid()) - 1u; }
static inline unsigned __wbsim_ptx_lanemask_le(void) { return (2u << __wbsim_ptx_laneid()) - 1u; }
static inline unsigned __wbsim_ptx_lanemask_eq(void) { return 1u << __wbsim_ptx_laneid(); }
static inline unsigned __wbsim_ptx_lanemask_gt(void) { return ~__wbsim_ptx_lanemask_le(); }
static inline unsigned __wbsim_ptx_lanemask_ge(void) { return ~__wbsim_ptx_lanemask_lt(); }
extern "C" unsigned __wbsim_ptx_smid(void);
static inline unsigned long long __wbsim_ptx_clock64(void) { return wbsim_clock64(); }
static inline unsigned __wbsim_ptx_clock(void) { return (unsigned)wbsim_clock64(); }
static inline unsigned long long __wbsim_ptx_globaltimer(void) { return wbsim_globaltimer(); }
#endif
