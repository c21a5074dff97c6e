/* The CUDA runtime of a whole program's host-only source files (.cpp, .c) on the
 * simulator. nvcc hands those to the host compiler, where cuda_runtime.h declares the
 * runtime API, the vector types and the execution-space keywords (as empty attributes),
 * and no device function: a host file may define its own umin or min. The prelude's
 * cuda_runtime.h and friends include this header instead of the device prelude when the
 * unit defines __WBSIM_HOST_UNIT (programs.py does, for host files). */
#ifndef WBSIM_HOST_RUNTIME_H
#define WBSIM_HOST_RUNTIME_H
#include <cstddef>
#include <cstdint>
#include <cstring>

#define __host__
#define __device__
#define __global__
#define __constant__
#define __shared__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__
#define __inline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
#define __launch_bounds__(...)

#include "vector_types.h"
#include "wbsim_runtime_types.h"
#include "wbsim_runtime_api.h"
#include "wbsim_runtime_guards.h"
#endif
