/* assert() in kernels: a failed assertion ends the launch with a KernelFault
 * that names the block, the thread and the line (like CUDA's device assert).
 * Like the C header, this one may be included many times and follows NDEBUG. */
#include "wbsim_abi.h"
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : wbsim_assert_fail(#e, __FILE__, __LINE__, __PRETTY_FUNCTION__))
#endif
