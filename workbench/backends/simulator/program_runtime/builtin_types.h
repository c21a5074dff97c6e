/* The simulator's stand-in for CUDA's builtin_types.h (whole programs): see wbsim_runtime_types.h. */
#pragma once
#ifdef __WBSIM_HOST_UNIT
#include "wbsim_host_runtime.h"
#else
#include "wbsim_runtime_types.h"
#endif
