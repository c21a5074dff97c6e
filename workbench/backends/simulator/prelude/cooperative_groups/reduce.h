/* cooperative_groups::reduce and its operators on the CPU (tiles of a power
 * of two threads). */
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
}  // namespace cooperative_groups
