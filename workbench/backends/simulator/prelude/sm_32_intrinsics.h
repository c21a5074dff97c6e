/* The simulator's stand-in for CUDA's sm_32_intrinsics.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
