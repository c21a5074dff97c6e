/* NVTX 2's header name: the same calls as nvtx3/nvToolsExt.h (no-ops on the simulator). */
#include "nvtx3/nvToolsExt.h"
