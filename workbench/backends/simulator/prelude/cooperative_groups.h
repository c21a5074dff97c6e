/* CUDA's cooperative groups on the CPU: thread blocks, tiles of up to 32
 * threads (tiled_partition), coalesced groups and the grid (without
 * grid-wide sync, which needs every block resident at once). */
#pragma once
#include "wbsim_prelude.h"

namespace cooperative_groups {
namespace details {
static inline unsigned block_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned block_size() { return blockDim.x * blockDim.y * blockDim.z; }
static inline unsigned lane() { return block_rank() & 31u; }
static inline unsigned nth_set_lane(unsigned mask, unsigned n) {
    for (unsigned l = 0; l < 32; ++l)
        if (mask >> l & 1u) { if (n == 0) return l; --n; }
    return 0;
}
}  // namespace details

class thread_block {
public:
    void sync() const { __syncthreads(); }
    unsigned thread_rank() const { return details::block_rank(); }
    unsigned size() const { return details::block_size(); }
    unsigned num_threads() const { return details::block_size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
    static bool is_valid() { return true; }
};

static inline thread_block this_thread_block() { return thread_block(); }

/* A partition of the block into tiles of `tile` threads (dynamic tiled_partition). */
class thread_group {
public:
    explicit thread_group(unsigned tile = 0) : tile_(tile) {}
    thread_group(const thread_block&) : tile_(0) {}
    void sync() const {
        if (tile_ == 0 || tile_ > 32) __syncthreads();
        else __syncwarp(mask());
    }
    unsigned size() const { return tile_ ? tile_ : details::block_size(); }
    unsigned num_threads() const { return size(); }
    unsigned thread_rank() const { return tile_ ? details::block_rank() % tile_ : details::block_rank(); }
    unsigned meta_group_rank() const { return tile_ ? details::block_rank() / tile_ : 0; }
protected:
    unsigned mask() const {
        if (tile_ >= 32) return 0xffffffffu;
        return ((1u << tile_) - 1u) << (details::lane() / tile_ * tile_);
    }
    unsigned tile_;
};

template <unsigned N, class Parent = void> class thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "the simulator supports tiles of 1, 2, 4, 8, 16 or 32 threads");
public:
    thread_block_tile() {}
    template <class P> thread_block_tile(const thread_block_tile<N, P>&) {}
    operator thread_group() const { return thread_group(N); }
    static unsigned mask() {
        return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (details::lane() & ~(N - 1));
    }
    void sync() const { __syncwarp(mask()); }
    static constexpr unsigned size() { return N; }
    static constexpr unsigned num_threads() { return N; }
    unsigned thread_rank() const { return details::block_rank() & (N - 1); }
    unsigned meta_group_rank() const { return details::block_rank() / N; }
    unsigned meta_group_size() const { return (details::block_size() + N - 1) / N; }
    template <class T> T shfl(T v, int src) const { return __shfl_sync(mask(), v, src, N); }
    template <class T> T shfl_up(T v, unsigned d) const { return __shfl_up_sync(mask(), v, d, N); }
    template <class T> T shfl_down(T v, unsigned d) const { return __shfl_down_sync(mask(), v, d, N); }
    template <class T> T shfl_xor(T v, int m) const { return __shfl_xor_sync(mask(), v, m, N); }
    int any(int p) const { return __any_sync(mask(), p); }
    int all(int p) const { return __all_sync(mask(), p); }
    unsigned ballot(int p) const {
        unsigned b = __ballot_sync(mask(), p);
        return N == 32 ? b : (b >> (details::lane() & ~(N - 1))) & ((1u << N) - 1u);
    }
    template <class T> unsigned match_any(T v) const {
        unsigned m = __match_any_sync(mask(), v);
        return N == 32 ? m : (m >> (details::lane() & ~(N - 1))) & ((1u << N) - 1u);
    }
    static bool is_valid() { return true; }
};

template <unsigned N, class Parent> static inline thread_block_tile<N, Parent> tiled_partition(const Parent&) {
    return thread_block_tile<N, Parent>();
}
static inline thread_group tiled_partition(const thread_block&, unsigned n) { return thread_group(n); }
static inline thread_group tiled_partition(const thread_group&, unsigned n) { return thread_group(n); }

class coalesced_group {
public:
    coalesced_group() : mask_(__activemask()) {}
    void sync() const { __syncwarp(mask_); }
    unsigned size() const { return (unsigned)__popc(mask_); }
    unsigned num_threads() const { return size(); }
    unsigned thread_rank() const { return (unsigned)__popc(mask_ & ((1u << details::lane()) - 1u)); }
    template <class T> T shfl(T v, unsigned rank) const {
        return __shfl_sync(mask_, v, (int)details::nth_set_lane(mask_, rank));
    }
    template <class T> T shfl_down(T v, unsigned d) const {
        unsigned r = thread_rank() + d;
        return __shfl_sync(mask_, v, (int)(r < size() ? details::nth_set_lane(mask_, r) : details::lane()));
    }
    template <class T> T shfl_up(T v, unsigned d) const {
        unsigned r = thread_rank();
        return __shfl_sync(mask_, v, (int)(r >= d ? details::nth_set_lane(mask_, r - d) : details::lane()));
    }
    int any(int p) const { return __any_sync(mask_, p); }
    int all(int p) const { return __all_sync(mask_, p); }
    unsigned ballot(int p) const { return __ballot_sync(mask_, p); }
private:
    unsigned mask_;
};
static inline coalesced_group coalesced_threads() { return coalesced_group(); }

class grid_group {
public:
    void sync() const {
        wbsim_trap("grid-wide synchronization (this_grid().sync()) is not supported by the CPU "
                   "simulator: it needs every block resident at once");
    }
    unsigned long long thread_rank() const {
        return block_rank() * (unsigned long long)details::block_size() + details::block_rank();
    }
    unsigned long long size() const { return num_blocks() * (unsigned long long)details::block_size(); }
    unsigned long long num_threads() const { return size(); }
    unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
    unsigned long long block_rank() const {
        return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    }
    dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 dim_blocks() const { return gridDim; }
    bool is_valid() const { return true; }
};
static inline grid_group this_grid() { return grid_group(); }

template <class G> static inline void sync(const G& g) { g.sync(); }
}  // namespace cooperative_groups
