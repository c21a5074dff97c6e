/* The prelude and every header of the simulator's CUDA, included before a
 * cell's own -D macros are defined (source.generate): a user macro such as
 * -D T=1 must not rewrite the prelude's templates. A cell's own #include of
 * any of these afterwards is then a no-op. */
#pragma once
#include "wbsim_prelude.h"
#include "cuda_fp16.h"
#include "math_constants.h"
#include "cooperative_groups.h"
#include "cooperative_groups/reduce.h"
#include "cooperative_groups/scan.h"
#include "cooperative_groups/memcpy_async.h"
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
