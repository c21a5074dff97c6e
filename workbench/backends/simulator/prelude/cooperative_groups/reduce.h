/* cooperative_groups::reduce and its operators on the CPU (tiles of a power
 * of two threads, coalesced groups of any size). */
#pragma once
#include "../cooperative_groups.h"

namespace cooperative_groups {
template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

template <class Group, class T, class Op> static inline T reduce(const Group& g, T value, Op op) {
    for (unsigned offset = g.size() / 2; offset > 0; offset /= 2)
        value = op(value, g.shfl_xor(value, (int)offset));
    return value;
}
/* A coalesced group has any number of threads: fold the values in rank order. */
template <class T, class Op> static inline T reduce(const coalesced_group& g, T value, Op op) {
    T acc = g.shfl(value, 0u);
    for (unsigned r = 1; r < g.size(); ++r) acc = op(acc, g.shfl(value, r));
    return acc;
}
}  // namespace cooperative_groups
