/* The simulator's stand-in for CUDA's cuda_runtime_api.h: everything lives in the prelude. */
#pragma once
#ifdef __WBSIM_HOST_UNIT  /* a whole program's host-only file (.cpp): the runtime API only */
#include "wbsim_host_runtime.h"
#else
#include "wbsim_prelude.h"
#endif
