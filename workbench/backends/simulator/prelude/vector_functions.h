/* The simulator's stand-in for CUDA's vector_functions.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
