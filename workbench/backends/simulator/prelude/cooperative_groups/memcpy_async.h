/* cooperative_groups::memcpy_async / wait on the CPU: the copy is done at
 * once by the group's threads; wait() synchronises the group. */
#pragma once
#include "../cooperative_groups.h"

namespace cooperative_groups {
template <class Group> static inline void memcpy_async(const Group& g, void* dst, const void* src, size_t bytes) {
    unsigned r = g.thread_rank(), n = g.size();
    for (size_t i = r; i < bytes; i += n) static_cast<char*>(dst)[i] = static_cast<const char*>(src)[i];
}
template <class Group> static inline void wait(const Group& g) { g.sync(); }
template <class Group> static inline void wait_prior(const Group& g) { g.sync(); }
}  // namespace cooperative_groups
