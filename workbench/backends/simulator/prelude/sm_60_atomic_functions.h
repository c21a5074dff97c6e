/* The simulator's stand-in for CUDA's sm_60_atomic_functions.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
