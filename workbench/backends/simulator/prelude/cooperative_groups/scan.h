/* cooperative_groups::inclusive_scan / exclusive_scan on the CPU (tiles). */
#pragma once
#include "reduce.h"

namespace cooperative_groups {
template <class Group, class T, class Op> static inline T inclusive_scan(const Group& g, T value, Op op) {
    for (unsigned offset = 1; offset < g.size(); offset *= 2) {
        T other = g.shfl_up(value, offset);
        if (g.thread_rank() >= offset) value = op(value, other);
    }
    return value;
}
template <class Group, class T> static inline T inclusive_scan(const Group& g, T value) {
    return inclusive_scan(g, value, plus<T>());
}
template <class Group, class T, class Op> static inline T exclusive_scan(const Group& g, T value, Op op) {
    T inc = inclusive_scan(g, value, op);
    T prev = g.shfl_up(inc, 1);
    return g.thread_rank() == 0 ? T() : prev;
}
template <class Group, class T> static inline T exclusive_scan(const Group& g, T value) {
    return exclusive_scan(g, value, plus<T>());
}
}  // namespace cooperative_groups
