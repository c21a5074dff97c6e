/* The simulator's stand-in for CUDA's device_launch_parameters.h: everything lives in the prelude. */
#pragma once
#include "wbsim_prelude.h"
