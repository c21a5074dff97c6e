/* The simulator's stand-in for CUDA's device_functions.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
