/* The simulator's stand-in for CUDA's cuda_runtime.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
