/* CUDA's cooperative groups on the CPU: thread blocks, tiles (static
 * thread_block_tile<N> and dynamic tiled_partition(g, n); tiles above 32
 * threads with block_tile_memory), coalesced groups, labeled_partition and
 * binary_partition, meta_group_rank/size, invoke_one, and the grid (its
 * sync() under a cooperative launch, where every block has an OS thread).
 *
 * Every group is a set of lanes of one warp (tiles of up to 32 threads,
 * coalesced groups) or a run of the block's threads (larger tiles, the
 * block); warp groups use the warp operations of the prelude with their
 * lane mask. Tiles are aligned: a tile of N threads holds block ranks
 * k*N .. k*N+N-1, as on the GPU. */
#pragma once
#include "wbsim_prelude.h"

namespace cooperative_groups {
namespace details {
static inline unsigned block_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned block_size() { return blockDim.x * blockDim.y * blockDim.z; }
static inline unsigned lane() { return block_rank() & 31u; }
static inline unsigned lanemask_lt() { return (1u << lane()) - 1u; }
static inline unsigned nth_set_lane(unsigned mask, unsigned n) {
    for (unsigned l = 0; l < 32; ++l)
        if (mask >> l & 1u) { if (n == 0) return l; --n; }
    return 0;
}
// The lanes of this thread's aligned tile of n (<= 32) threads, within the warp.
static inline unsigned tile_mask(unsigned n) {
    if (n >= 32) return 0xffffffffu;
    return ((1u << n) - 1u) << (lane() / n * n);
}
}  // namespace details

/* What every group answers; derived groups set size and meta ranks. */
class thread_group {
public:
    void sync() const {
        if (kind_ == 1) __syncwarp(mask_);
        else __syncthreads();  // the block, or a tile of more than 32 threads
    }
    unsigned size() const { return size_; }
    unsigned num_threads() const { return size_; }
    unsigned thread_rank() const {
        if (kind_ == 1 && coalesced_) return (unsigned)__popc(mask_ & details::lanemask_lt());
        return size_ ? details::block_rank() % size_ : 0;
    }
    unsigned meta_group_rank() const { return meta_rank_; }
    unsigned meta_group_size() const { return meta_size_; }
    bool is_valid() const { return size_ != 0; }
    unsigned long long get_type() const { return kind_; }

protected:
    // kind 0: block-wide (the block, tiles of more than 32); 1: lanes of one warp
    thread_group(int kind, unsigned size, unsigned mask, unsigned meta_rank, unsigned meta_size,
                 bool coalesced = false)
        : kind_(kind), size_(size), mask_(mask), meta_rank_(meta_rank), meta_size_(meta_size),
          coalesced_(coalesced) {}
    int kind_;
    unsigned size_;
    unsigned mask_;
    unsigned meta_rank_, meta_size_;
    bool coalesced_;
    friend thread_group tiled_partition(const thread_group& parent, unsigned tilesz);
};

class thread_block : public thread_group {
public:
    thread_block() : thread_group(0, details::block_size(), 0xffffffffu, 0, 1) {}
    void sync() const { __syncthreads(); }
    unsigned size() const { return details::block_size(); }
    unsigned num_threads() const { return details::block_size(); }
    unsigned thread_rank() const { return details::block_rank(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
    static bool is_valid() { return true; }
};

/* Room for tiles of more than 32 threads (CUDA 11.x experimental, 12 stable):
 * the simulator needs none, so both spellings are accepted and empty. */
template <unsigned int A = 1024, unsigned int B = 0> struct block_tile_memory {};
namespace experimental {
template <unsigned int A = 8, unsigned int B = 1024> struct block_tile_memory {};
}

static inline thread_block this_thread_block() { return thread_block(); }
template <unsigned A, unsigned B>
static inline thread_block this_thread_block(block_tile_memory<A, B>&) { return thread_block(); }
template <unsigned A, unsigned B>
static inline thread_block this_thread_block(experimental::block_tile_memory<A, B>&) {
    return thread_block();
}

/* A group of some lanes of one warp (coalesced_threads, labeled_partition,
 * binary_partition): ranks follow the lane order. */
class coalesced_group : public thread_group {
public:
    coalesced_group() : coalesced_group(__activemask(), 0, 1) {}
    explicit coalesced_group(unsigned mask, unsigned meta_rank = 0, unsigned meta_size = 1)
        : thread_group(1, (unsigned)__popc(mask), mask, meta_rank, meta_size, true) {}
    void sync() const { __syncwarp(mask_); }
    unsigned size() const { return size_; }
    unsigned num_threads() const { return size_; }
    unsigned thread_rank() const { return (unsigned)__popc(mask_ & details::lanemask_lt()); }
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
    // The bits of the group's ranks (rank r is bit r), as CUDA gives them.
    unsigned ballot(int p) const { return compact(__ballot_sync(mask_, p)); }
    template <class T> unsigned match_any(T v) const { return compact(__match_any_sync(mask_, v)); }
    template <class T> unsigned match_all(T v, int& pred) const {
        return compact(__match_all_sync(mask_, v, &pred));
    }
    unsigned mask() const { return mask_; }

private:
    unsigned compact(unsigned lanes) const {
        unsigned out = 0, r = 0;
        for (unsigned l = 0; l < 32; ++l)
            if (mask_ >> l & 1u) { if (lanes >> l & 1u) out |= 1u << r; ++r; }
        return out;
    }
};
static inline coalesced_group coalesced_threads() { return coalesced_group(); }

namespace details {
// How many threads the parent of a tile has, and this thread's rank in it.
template <class P> struct parent_of {
    static unsigned size() { return block_size(); }
    static unsigned rank() { return block_rank(); }
};
}  // namespace details

template <unsigned N, class Parent = void> class thread_block_tile;

namespace details {
template <unsigned M, class PP> struct parent_of<thread_block_tile<M, PP>> {
    static unsigned size() { return M; }
    static unsigned rank() { return block_rank() % M; }
};

/* A tile of N threads, N a power of two: up to 32 threads are lanes of one
 * warp; more need block_tile_memory on the GPU and synchronise the block here. */
template <unsigned N> class tile_base : public thread_group {
    static_assert(N >= 1 && N <= 1024 && (N & (N - 1)) == 0,
                  "a thread_block_tile has a power of two threads, at most 1024");
public:
    tile_base(unsigned meta_rank, unsigned meta_size)
        : thread_group(N <= 32 ? 1 : 0, N, details::tile_mask(N <= 32 ? N : 32), meta_rank, meta_size) {}
    void sync() const {
        if (N <= 32) __syncwarp(mask());
        else __syncthreads();
    }
    static constexpr unsigned size() { return N; }
    static constexpr unsigned num_threads() { return N; }
    unsigned thread_rank() const { return details::block_rank() & (N - 1); }
    unsigned meta_group_rank() const { return meta_rank_; }
    unsigned meta_group_size() const { return meta_size_; }
    static constexpr bool is_valid() { return true; }
    static unsigned mask() { return details::tile_mask(N <= 32 ? N : 32); }
};

/* The warp operations of a tile of at most 32 threads. */
template <unsigned N, bool Warp = (N <= 32)> class tile_ops : public tile_base<N> {
public:
    using tile_base<N>::tile_base;
};
template <unsigned N> class tile_ops<N, true> : public tile_base<N> {
public:
    using tile_base<N>::tile_base;
    using tile_base<N>::mask;
    template <class T> T shfl(T v, int src) const { return __shfl_sync(mask(), v, src, N); }
    template <class T> T shfl_up(T v, unsigned d) const { return __shfl_up_sync(mask(), v, d, N); }
    template <class T> T shfl_down(T v, unsigned d) const { return __shfl_down_sync(mask(), v, d, N); }
    template <class T> T shfl_xor(T v, int m) const { return __shfl_xor_sync(mask(), v, m, N); }
    int any(int p) const { return __any_sync(mask(), p); }
    int all(int p) const { return __all_sync(mask(), p); }
    unsigned ballot(int p) const { return local(__ballot_sync(mask(), p)); }
    template <class T> unsigned match_any(T v) const { return local(__match_any_sync(mask(), v)); }
    template <class T> unsigned match_all(T v, int& pred) const {
        return local(__match_all_sync(mask(), v, &pred));
    }

private:
    static unsigned local(unsigned lanes) {
        return N == 32 ? lanes : (lanes >> (details::lane() & ~(N - 1))) & ((1u << N) - 1u);
    }
};
}  // namespace details

template <unsigned N, class Parent> class thread_block_tile : public details::tile_ops<N> {
public:
    thread_block_tile()
        : details::tile_ops<N>(details::parent_of<Parent>::rank() / N,
                               (details::parent_of<Parent>::size() + N - 1) / N) {}
    // A tile keeps its meta group when its type forgets the parent.
    template <class P>
    thread_block_tile(const thread_block_tile<N, P>& other)
        : details::tile_ops<N>(other.meta_group_rank(), other.meta_group_size()) {}
};

template <unsigned N, class Parent>
static inline thread_block_tile<N, Parent> tiled_partition(const Parent&) {
    return thread_block_tile<N, Parent>();
}

/* tiled_partition(parent, n): a dynamic tile of n threads (a power of two). */
inline thread_group tiled_partition(const thread_group& parent, unsigned tilesz) {
    unsigned parent_size = parent.size();
    unsigned parent_rank = parent.thread_rank();
    if (tilesz == 0 || (tilesz & (tilesz - 1)) != 0 || tilesz > parent_size)
        wbsim_trap("tiled_partition: the tile size must be a power of two no larger than "
                   "the parent group");
    return thread_group(tilesz <= 32 ? 1 : 0, tilesz, details::tile_mask(tilesz <= 32 ? tilesz : 32),
                        parent_rank / tilesz, (parent_size + tilesz - 1) / tilesz);
}

/* labeled_partition(g, label): the threads of g with the same label. */
template <class Label>
static inline coalesced_group labeled_partition(const coalesced_group& g, Label label) {
    return coalesced_group(__match_any_sync(g.mask(), label), 0, 1);
}
template <unsigned N, class P, class Label>
static inline coalesced_group labeled_partition(const thread_block_tile<N, P>& g, Label label) {
    static_assert(N <= 32, "labeled_partition takes a tile of at most 32 threads");
    return coalesced_group(__match_any_sync(g.mask(), label), 0, 1);
}
/* binary_partition(g, pred): the threads of g whose pred is the same as this one's. */
inline coalesced_group binary_partition(const coalesced_group& g, bool pred) {
    unsigned yes = __ballot_sync(g.mask(), pred);
    return coalesced_group(pred ? yes : g.mask() & ~yes, pred ? 1u : 0u, 2);
}
template <unsigned N, class P>
static inline coalesced_group binary_partition(const thread_block_tile<N, P>& g, bool pred) {
    static_assert(N <= 32, "binary_partition takes a tile of at most 32 threads");
    unsigned yes = __ballot_sync(g.mask(), pred);
    return coalesced_group(pred ? yes : g.mask() & ~yes, pred ? 1u : 0u, 2);
}

class grid_group {
public:
    // every block of a cooperative launch (kernel(..., cooperative=True)) runs at once
    void sync() const { wbsim_grid_sync(); }
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
    dim3 group_dim() const { return gridDim; }
    dim3 dim_blocks() const { return gridDim; }
    dim3 dim_threads() const {
        return dim3(gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z);
    }
    bool is_valid() const { return wbsim_grid_cooperative() != 0; }  // a cooperative launch
};
static inline grid_group this_grid() { return grid_group(); }

template <class G> static inline void sync(const G& g) { g.sync(); }
template <class G> static inline unsigned long long thread_rank(const G& g) { return g.thread_rank(); }
template <class G> static inline unsigned long long group_size(const G& g) { return g.size(); }
template <class G> static inline unsigned long long num_threads(const G& g) { return g.num_threads(); }

/* invoke_one: one thread of the group (rank 0) calls fn; invoke_one_broadcast
 * also gives its result to every thread of the group. */
template <class G, class Fn, class... Args>
static inline void invoke_one(const G& g, Fn&& fn, Args&&... args) {
    if (g.thread_rank() == 0) fn(static_cast<Args&&>(args)...);
    g.sync();
}
template <class G, class Fn, class... Args>
static inline auto invoke_one_broadcast(const G& g, Fn&& fn, Args&&... args)
    -> decltype(fn(static_cast<Args&&>(args)...)) {
    decltype(fn(static_cast<Args&&>(args)...)) value{};
    if (g.thread_rank() == 0) value = fn(static_cast<Args&&>(args)...);
    return g.shfl(value, 0);
}
}  // namespace cooperative_groups
