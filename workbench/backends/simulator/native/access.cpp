// The hooks an instrumented kernel library calls (ThreadSanitizer's and
// SanitizerCoverage's entry points, defined here and never by libtsan), the
// per-warp event buffers and their delivery to the consumers: see access.h.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "access.h"
#include "runtime.h"

bool g_access_on = false;

static AccessConsumerFactory g_factories[32];
static unsigned g_needs[32];

void register_access_consumer(unsigned bit, AccessConsumerFactory make, unsigned needs) {
    if (bit < 32) {
        g_factories[bit] = make;
        g_needs[bit] = needs;
    }
}

// A warp's buffer past this many events is delivered early (its instructions
// are then split where it was cut): it bounds the memory of a block whose
// threads run long loops between barriers.
static const size_t kMaxWarpEvents = 1u << 22;

// A warp's events since its last delivery.
struct EventBuffer {
    AccessEvent* data = nullptr;
    size_t n = 0, cap = 0;
    ~EventBuffer() { free(data); }
    __attribute__((noinline, cold)) void grow() {
        size_t want = cap ? cap * 2 : 1024;
        AccessEvent* p = (AccessEvent*)realloc(data, want * sizeof(AccessEvent));
        if (!p) fault_now(WBSIM_FAULT_ERROR, "out of memory while counting accesses");
        data = p;
        cap = want;
    }
};

// A warp's basic blocks since its last delivery: site -> each lane's count,
// open addressing (allocated for the warps a block has), grown when 3/4 full
// (a delivery here would cut the lanes' runs: unrolled loops have many blocks).
struct BlockTable {
    BlockCount* slots = nullptr;     // site 0: free (sites are site + 1 here)
    unsigned bits = 9;               // 2^bits slots
    std::vector<uint32_t> used;
    ~BlockTable() { free(slots); }
    unsigned home(uint32_t key) const { return (key * 0x9E3779B1u) >> (32 - bits); }
    __attribute__((noinline, cold)) void allocate() {
        slots = (BlockCount*)calloc(1u << bits, sizeof(BlockCount));
        if (!slots) fault_now(WBSIM_FAULT_ERROR, "out of memory while counting accesses");
    }
    __attribute__((noinline, cold)) void grow() {
        BlockCount* old = slots;
        std::vector<uint32_t> was;
        was.swap(used);
        ++bits;
        allocate();
        for (uint32_t i : was) {
            unsigned j = home(old[i].site);
            while (slots[j].site) j = (j + 1) & ((1u << bits) - 1);
            slots[j] = old[i];
            used.push_back(j);
        }
        free(old);
    }
};

// -- one OS thread's recorder ----------------------------------------------------
struct Recorder {
    // address ranges: [lo, lo + span)
    uintptr_t global_lo = 0, global_span = 0;
    uintptr_t dynamic_lo = 0, dynamic_span = 0;
    uintptr_t static_lo = 0, static_span = 0;       // the hull of the static __shared__ variables
    uint64_t static_shift = 0;                       // address -> canonical (access.h)
    std::vector<std::pair<uintptr_t, uintptr_t>> static_vars;  // [lo, hi), sorted
    uintptr_t devvar_lo = 0, devvar_span = 0;
    std::vector<std::pair<uintptr_t, uintptr_t>> device_vars;
    uintptr_t base = 0;            // the kernel library's load address
    bool on = false;               // this block is recorded
    bool values = false;           // NEED_VALUES: shared stores that change nothing are marked
    bool order = false;            // NEED_ORDER: deliver at global atomics and fences
    bool blocks_on = false;        // NEED_BLOCKS: basic blocks counted
    bool iterations = false;       // NEED_ITERATIONS: loop header blocks are events too
    // The last shared store, until the next hook shows what it wrote (NEED_VALUES).
    EventBuffer* pending = nullptr;
    size_t pending_index = 0;
    uintptr_t pending_address = 0;
    unsigned pending_size = 0;
    unsigned char pending_before[16];
    unsigned last_warp = ~0u;      // direct mode: the warp whose lanes ran last
    unsigned tid = 0;              // the thread running (linear in the block)
    EventBuffer* buffer = nullptr; // its warp's
    BlockTable* table = nullptr;
    uint32_t stride = 1;
    BlockContext ctx{};
    EventBuffer warps[kMaxThreads / 32];
    BlockTable blocks[kMaxThreads / 32];
    std::vector<BlockCount> delivered;  // a warp's block counts, contiguous
    std::vector<AccessConsumer*> consumers;

    bool in_static(uintptr_t a) const {
        for (const auto& v : static_vars)
            if (a >= v.first && a < v.second) return true;
        return false;
    }
    bool in_device_var(uintptr_t a) const {
        for (const auto& v : device_vars)
            if (a >= v.first && a < v.second) return true;
        return false;
    }
};

static __thread Recorder* t_rec WBSIM_LE;
static std::atomic<uint64_t> g_cuts{0};

uint64_t access_cut_deliveries() { return g_cuts.load(); }

static std::mutex g_rec_mu;
static std::vector<Recorder*> g_recorders;  // of this launch, every OS thread's
static AccessSetup g_setup;
static AccessLaunch g_launch;
static uintptr_t g_base = 0;

// -- delivery ------------------------------------------------------------------
// The pending shared store has been made: mark its event when the bytes are
// as they were before it.
__attribute__((noinline)) static void resolve_store(Recorder* r) {
    EventBuffer* b = r->pending;
    r->pending = nullptr;
    if (r->pending_index < b->n &&
        memcmp((const void*)r->pending_address, r->pending_before, r->pending_size) == 0)
        b->data[r->pending_index].size |= kSizeUnchanged;
}

__attribute__((noinline)) static void deliver(Recorder* r, unsigned w) {
    if (r->pending) resolve_store(r);
    EventBuffer& v = r->warps[w];
    if (v.n) {
        for (AccessConsumer* c : r->consumers) c->warp_events(r->ctx, w, v.data, v.n);
        v.n = 0;
    }
    BlockTable& t = r->blocks[w];
    if (!t.used.empty()) {
        r->delivered.clear();
        for (uint32_t i : t.used) {
            BlockCount& c = t.slots[i];
            r->delivered.push_back(c);
            r->delivered.back().site = c.site - 1;
            memset(&c, 0, sizeof c);
        }
        t.used.clear();
        for (AccessConsumer* c : r->consumers)
            c->warp_blocks(r->ctx, w, r->delivered.data(), r->delivered.size());
    }
}

static void deliver_all(Recorder* r) {
    for (unsigned w = 0; w < r->ctx.nwarps; ++w) deliver(r, w);
}

static inline void runs(Recorder* r, unsigned tid) {
    if (r->pending) resolve_store(r);
    r->tid = tid;
    r->buffer = &r->warps[tid >> 5];
    r->table = &r->blocks[tid >> 5];
}

static inline __attribute__((always_inline)) void append(Recorder* r, unsigned tid, uint64_t addr,
                                                          unsigned size, unsigned kind,
                                                          unsigned space, uint32_t site,
                                                          unsigned piece) {
    unsigned w = tid >> 5;
    EventBuffer& v = r->warps[w];
    if (__builtin_expect(v.n == v.cap, 0)) v.grow();
    // whole words, not the fields one by one: the event is read back soon,
    // and narrow stores read as a wide load stall the CPU
    uint64_t* e = (uint64_t*)(v.data + v.n++);
    e[0] = addr;
    e[1] = site | (uint64_t)(tid | piece << 10) << 32 | (uint64_t)size << 48 |
           (uint64_t)(kind | space << 4) << 56;
    if (__builtin_expect(v.n >= kMaxWarpEvents, 0)) {
        g_cuts.fetch_add(1, std::memory_order_relaxed);
        deliver(r, w);
    }
}

// Out of line: the hooks' common path (an address outside every space) then
// saves no registers.
__attribute__((noinline)) static void remember_store(Recorder* r, uint64_t addr, unsigned size) {
    uintptr_t real = addr >= kSharedDynamic ? r->dynamic_lo + (uintptr_t)(addr - kSharedDynamic)
                                            : (uintptr_t)addr - r->static_shift;
    r->pending = r->buffer;
    r->pending_index = r->buffer->n - 1;
    r->pending_address = real;
    r->pending_size = size;
    memcpy(r->pending_before, (const void*)real, size);
}

__attribute__((noinline)) static void push(Recorder* r, uintptr_t addr, unsigned size,
                                           unsigned kind, unsigned space, void* pc,
                                           unsigned piece) {
    if (__builtin_expect(r->pending != nullptr, 0)) resolve_store(r);
    EventBuffer& v = *r->buffer;
    if (__builtin_expect(v.n == v.cap, 0)) v.grow();
    uint64_t* e = (uint64_t*)(v.data + v.n++);  // (two words: see append)
    e[0] = addr;
    e[1] = (uint32_t)((uintptr_t)pc - r->base) | (uint64_t)(r->tid | piece << 10) << 32 |
           (uint64_t)size << 48 | (uint64_t)(kind | space << 4) << 56;
    if (__builtin_expect(r->values, 0) && kind == ACCESS_STORE && space == SPACE_SHARED &&
        size <= 16)
        remember_store(r, addr, size);
    if (__builtin_expect(v.n >= kMaxWarpEvents, 0)) {
        g_cuts.fetch_add(1, std::memory_order_relaxed);
        deliver(r, r->tid >> 5);
    } else if (__builtin_expect(r->order, 0) && kind == ACCESS_ATOMIC && space == SPACE_GLOBAL) {
        deliver(r, r->tid >> 5);
    }
}

// 1 + the loop whose iterations the block at `site` counts, or 0.
static uint32_t loop_of_block(uint32_t site) {
    const auto& m = g_setup.loop_markers;
    auto at = std::lower_bound(m.begin(), m.end(), std::make_pair(site, 0u));
    return at != m.end() && at->first == site ? at->second + 1 : 0;
}

// A basic block entered: its count for this lane, in the warp's table (and
// an iteration event where the block counts a loop's iterations).
__attribute__((noinline)) static void count_block(Recorder* r, void* pc) {
    unsigned tid = r->tid;
    BlockTable& t = *r->table;
    if (__builtin_expect(!t.slots, 0)) t.allocate();
    uint32_t key = (uint32_t)((uintptr_t)pc - r->base) + 1;
    unsigned i = t.home(key);
    uint32_t loop;
    for (;;) {
        BlockCount& c = t.slots[i];
        if (c.site == key) {
            c.lanes[tid & 31]++;
            loop = c.loop;
            break;
        }
        if (c.site == 0) {
            if (__builtin_expect(t.used.size() >= (3u << t.bits) / 4, 0)) {
                t.grow();
                return count_block(r, pc);
            }
            c.site = key;
            c.loop = loop = loop_of_block(key - 1);
            c.lanes[tid & 31] = 1;
            t.used.push_back(i);
            break;
        }
        i = (i + 1) & ((1u << t.bits) - 1);
    }
    if (loop && r->iterations) push(r, loop - 1, 0, ACCESS_ITER, SPACE_NONE, pc, 0);
}

// The space `addr` lies in, or SPACE_NONE (not recorded).
static inline __attribute__((always_inline)) unsigned space_of(const Recorder* r, uintptr_t a) {
    if (a - r->global_lo < r->global_span) return SPACE_GLOBAL;
    if (a - r->dynamic_lo < r->dynamic_span) return SPACE_SHARED;
    if (a - r->static_lo < r->static_span && r->in_static(a)) return SPACE_SHARED;
    if (a - r->devvar_lo < r->devvar_span && r->in_device_var(a)) return SPACE_GLOBAL;
    return SPACE_NONE;
}

// A static __shared__ variable or a __device__ variable (their hulls hold
// other thread-locals and globals too).
__attribute__((noinline)) static void record_rare(Recorder* r, uintptr_t a, unsigned size,
                                                  unsigned kind, void* pc, unsigned piece) {
    if (a - r->static_lo < r->static_span && r->in_static(a))
        return push(r, a + r->static_shift, size, kind, SPACE_SHARED, pc, piece);
    if (a - r->devvar_lo < r->devvar_span && r->in_device_var(a))
        push(r, a, size, kind, SPACE_GLOBAL, pc, piece);
}

// The address an event carries: shared ones canonical (access.h).
static inline __attribute__((always_inline)) uint64_t canonical(const Recorder* r, uintptr_t a,
                                                                 unsigned space) {
    if (space != SPACE_SHARED) return a;
    if (a - r->dynamic_lo < r->dynamic_span) return kSharedDynamic + (a - r->dynamic_lo);
    return a + r->static_shift;
}

static inline __attribute__((always_inline)) void record(const volatile void* p, unsigned size,
                                                          unsigned kind, void* pc,
                                                          unsigned piece = 0) {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    uintptr_t a = (uintptr_t)p;
    if (a - r->global_lo < r->global_span) return push(r, a, size, kind, SPACE_GLOBAL, pc, piece);
    if (a - r->dynamic_lo < r->dynamic_span)
        return push(r, kSharedDynamic + (a - r->dynamic_lo), size, kind, SPACE_SHARED, pc, piece);
    if (a - r->static_lo < r->static_span || a - r->devvar_lo < r->devvar_span)
        return record_rare(r, a, size, kind, pc, piece);
}

// A wider access (a struct copied whole): pieces of the widest power of two up
// to 16 bytes that divides both its size and its address, as the GPU's
// compiler splits it into loads of the type's alignment.
static void record_range(const volatile void* p, size_t size, unsigned kind, void* pc) {
    Recorder* r = t_rec;
    if (!r || !r->on || size == 0) return;
    uintptr_t a = (uintptr_t)p;
    unsigned space = space_of(r, a);
    if (space == SPACE_NONE) return;
    size_t piece = 16;
    while (piece > 1 && ((size | a) & (piece - 1))) piece >>= 1;
    size_t n = size / piece;
    uint64_t c = canonical(r, a, space);
    for (size_t i = 0; i < n && i < 64; ++i)  // (a piece's index has 6 bits)
        push(r, c + i * piece, (unsigned)piece, kind, space, pc, (unsigned)i);
}

// -- launch and block bookkeeping (called by worker.cpp, grid.cpp, fibers.cpp, warp.cpp)
bool access_launch_begins(const AccessSetup& setup, const wbsim_launch* L, uintptr_t global_lo,
                          uintptr_t global_hi, std::string& error) {
    for (unsigned bit = 0; bit < 32; ++bit)
        if ((setup.consumers >> bit & 1u) && !g_factories[bit]) {
            error = "the worker has no consumer of kind " + std::to_string(bit);
            return false;
        }
    Dl_info info;
    if (!setup.entry || !dladdr(setup.entry, &info) || !info.dli_fbase) {
        error = "cannot find the kernel library's base address";
        return false;
    }
    g_base = (uintptr_t)info.dli_fbase;
    g_setup = setup;
    g_launch.launch = L;
    g_launch.global_lo = global_lo;
    g_launch.global_hi = global_hi;
    g_launch.blocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
    g_launch.serial++;
    g_launch.dynamic_bytes = L->shared_bytes;
    g_launch.static_lo = g_launch.static_hi = 0;
    for (const auto& v : g_setup.shared_vars) {
        uint64_t lo = kSharedStatic + g_setup.anchor_offset + (uint64_t)v.first;
        if (!g_launch.static_hi || lo < g_launch.static_lo) g_launch.static_lo = lo;
        if (lo + v.second > g_launch.static_hi) g_launch.static_hi = lo + v.second;
    }
    g_launch.data = g_setup.data.empty() ? nullptr : (const unsigned char*)g_setup.data.data();
    g_launch.data_size = g_setup.data.size();
    g_launch.loop_markers = g_setup.loop_markers.data();
    g_launch.nloop_markers = g_setup.loop_markers.size();
    g_launch.loop_parents = g_setup.loop_parents.data();
    g_launch.nloops = g_setup.loop_parents.size();
    g_launch.loop_sites = g_setup.loop_sites.data();
    g_launch.nloop_sites = g_setup.loop_sites.size();
    g_recorders.clear();
    g_cuts.store(0);
    g_access_on = true;
    return true;
}

void access_enter_grid(size_t shared_bytes) {
    Recorder* r = new Recorder();
    r->global_lo = g_launch.global_lo;
    r->global_span = g_launch.global_hi - g_launch.global_lo;
    r->dynamic_lo = (uintptr_t)__wbsim_dsmem;
    r->dynamic_span = shared_bytes;
    // The static __shared__ variables are this library's thread-locals: their
    // offsets from an anchor variable the instrumented build defines.
    void* anchor = g_setup.library ? dlsym(g_setup.library, "__wbsim_tls_anchor") : nullptr;
    if (anchor) {
        uintptr_t lo = ~(uintptr_t)0, hi = 0;
        for (const auto& v : g_setup.shared_vars) {
            uintptr_t a = (uintptr_t)anchor + (intptr_t)v.first;
            r->static_vars.emplace_back(a, a + v.second);
            lo = std::min(lo, a);
            hi = std::max(hi, (uintptr_t)(a + v.second));
        }
        std::sort(r->static_vars.begin(), r->static_vars.end());
        r->static_shift = kSharedStatic + g_setup.anchor_offset - (uintptr_t)anchor;
        if (hi > lo) { r->static_lo = lo; r->static_span = hi - lo; }
    }
    if (!g_setup.device_vars.empty()) {
        uintptr_t lo = ~(uintptr_t)0, hi = 0;
        for (const auto& v : g_setup.device_vars) {
            r->device_vars.emplace_back(v.first, v.first + v.second);
            lo = std::min(lo, (uintptr_t)v.first);
            hi = std::max(hi, (uintptr_t)(v.first + v.second));
        }
        if (hi > lo) { r->devvar_lo = lo; r->devvar_span = hi - lo; }
    }
    r->base = g_base;
    r->stride = g_setup.sample_stride ? g_setup.sample_stride : 1;
    unsigned needs = 0;
    for (unsigned bit = 0; bit < 32; ++bit)
        if (g_setup.consumers >> bit & 1u) needs |= g_needs[bit];
    if (!(needs & NEED_GLOBAL)) r->global_span = r->devvar_span = 0;
    if (!(needs & NEED_SHARED)) r->dynamic_span = r->static_span = 0;
    r->values = (needs & NEED_VALUES) != 0;
    r->order = (needs & NEED_ORDER) != 0;
    r->blocks_on = (needs & NEED_BLOCKS) != 0;
    r->iterations = r->blocks_on && (needs & NEED_ITERATIONS) != 0 && !g_setup.loop_markers.empty();
    for (unsigned bit = 0; bit < 32; ++bit)
        if (g_setup.consumers >> bit & 1u) r->consumers.push_back(g_factories[bit](g_launch));
    {
        std::lock_guard<std::mutex> lk(g_rec_mu);
        g_recorders.push_back(r);
    }
    t_rec = r;
}

void access_leave_grid() { t_rec = nullptr; }

// Direct mode runs a block's threads one after another: when a thread of
// another warp starts, the lanes of the previous warp are done.
extern "C" __attribute__((visibility("default"))) void wbsim_access_thread(unsigned tid) {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    unsigned w = tid >> 5;
    if (w != r->last_warp) {
        if (r->last_warp != ~0u) deliver(r, r->last_warp);
        r->last_warp = w;
    }
    runs(r, tid);
}

void access_thread_runs(unsigned tid) {
    Recorder* r = t_rec;
    if (r && r->on) runs(r, tid);
}

void access_block_begins() {
    Recorder* r = t_rec;
    if (!r) return;
    BlockContext& c = r->ctx;
    c.index = blockIdx;
    c.linear = blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
    c.nthreads = blockDim.x * blockDim.y * blockDim.z;
    c.nwarps = (c.nthreads + 31) / 32;
    c.barrier_epoch = 0;
    r->on = c.linear % r->stride == 0;
    r->last_warp = ~0u;
    runs(r, 0);
}

void access_block_ends() {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    deliver_all(r);
    for (AccessConsumer* c : r->consumers) c->block_end(r->ctx);
}

void access_barrier_released() {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    deliver_all(r);
    for (AccessConsumer* c : r->consumers) c->barrier(r->ctx);
    r->ctx.barrier_epoch++;
}

void access_warp_synced(unsigned warp, uint32_t lanes, int op) {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    if (r->pending) resolve_store(r);
    if (op == WBSIM_SYNCWARP)  // an event of each lane, in its place among its accesses
        for (uint32_t m = lanes; m; m &= m - 1)
            append(r, warp * 32 + __builtin_ctz(m), lanes, 0, ACCESS_SYNC, SPACE_NONE, 0, 0);
    for (AccessConsumer* c : r->consumers) c->warp_sync(r->ctx, warp, lanes, op);
}

void access_warp_misuse(unsigned tid, uint32_t mask, int op, const void* pc) {
    Recorder* r = t_rec;
    if (!r || !r->on) return;
    uint32_t site = (uint32_t)((uintptr_t)pc - r->base);
    for (AccessConsumer* c : r->consumers) c->warp_misuse(r->ctx, tid, mask, op, site);
}

void access_launch_ends(std::string& out) {
    g_access_on = false;
    // Every consumer kind: the first OS thread's takes the others' in.
    std::vector<AccessConsumer*> first;
    for (Recorder* r : g_recorders) {
        if (first.empty()) { first = r->consumers; continue; }
        for (size_t i = 0; i < r->consumers.size() && i < first.size(); ++i)
            first[i]->merge(*r->consumers[i]);
    }
    uint32_t count = (uint32_t)first.size();
    out.append((const char*)&count, 4);
    for (AccessConsumer* c : first) {
        std::string part;
        c->write(part);
        uint32_t n = (uint32_t)part.size();
        out.append((const char*)&n, 4);
        out += part;
    }
    for (Recorder* r : g_recorders) {
        for (AccessConsumer* c : r->consumers) delete c;
        delete r;
    }
    g_recorders.clear();
}

// A kernel's bulk copy from global memory (rowwise.cu's stand-in for the copy
// engine): the profiler counts its bytes in the footprint, not as loads. In
// both builds of the worker; a kernel library finds it by a weak reference.
void counts_bulk_read(uintptr_t p, size_t n);  // access_counts.cpp
extern "C" __attribute__((visibility("default"))) void wbsim_bulk_read(const void* p, unsigned long n) {
    Recorder* r = t_rec;
    if (r && r->on) counts_bulk_read((uintptr_t)p, n);
}

// -- the entry points of instrumented code ---------------------------------------
// (not in the AddressSanitizer build of the worker: instrumented launches run
// in the plain one, and libasan has sanitizer entry points of its own)
#ifndef WBSIM_CHECKED
#define WBSIM_HOOK extern "C" __attribute__((visibility("default")))
#define PC __builtin_return_address(0)

WBSIM_HOOK void __tsan_init(void) {}
WBSIM_HOOK void __tsan_func_entry(void*) {}
WBSIM_HOOK void __tsan_func_exit(void) {}
WBSIM_HOOK void __tsan_vptr_update(void**, void*) {}
WBSIM_HOOK void __tsan_vptr_read(void**) {}

#define WBSIM_PLAIN(N)                                                                              \
    WBSIM_HOOK void __tsan_read##N(void* p) { record(p, N, ACCESS_LOAD, PC); }                      \
    WBSIM_HOOK void __tsan_write##N(void* p) { record(p, N, ACCESS_STORE, PC); }                    \
    WBSIM_HOOK void __tsan_unaligned_read##N(void* p) { record(p, N, ACCESS_LOAD, PC); }            \
    WBSIM_HOOK void __tsan_unaligned_write##N(void* p) { record(p, N, ACCESS_STORE, PC); }          \
    WBSIM_HOOK void __tsan_volatile_read##N(void* p) { record(p, N, ACCESS_LOAD, PC); }             \
    WBSIM_HOOK void __tsan_volatile_write##N(void* p) { record(p, N, ACCESS_STORE, PC); }           \
    WBSIM_HOOK void __tsan_unaligned_volatile_read##N(void* p) { record(p, N, ACCESS_LOAD, PC); }   \
    WBSIM_HOOK void __tsan_unaligned_volatile_write##N(void* p) { record(p, N, ACCESS_STORE, PC); }
WBSIM_PLAIN(1)
WBSIM_PLAIN(2)
WBSIM_PLAIN(4)
WBSIM_PLAIN(8)
WBSIM_PLAIN(16)
#undef WBSIM_PLAIN

WBSIM_HOOK void __tsan_read_range(void* p, unsigned long n) { record_range(p, n, ACCESS_LOAD, PC); }
WBSIM_HOOK void __tsan_write_range(void* p, unsigned long n) { record_range(p, n, ACCESS_STORE, PC); }

// Basic blocks (-fsanitize-coverage=trace-pc): the divergence estimate.
WBSIM_HOOK void __sanitizer_cov_trace_pc(void) {
    Recorder* r = t_rec;
    if (!r || !r->blocks_on || !r->on) return;
    count_block(r, PC);
}

// Atomics do what they say and count once: read-modify-writes, exchanges and
// strong compare-and-swaps (CUDA's atomicCAS) are one operation each; the
// prelude's loops (atomicAdd on float, atomicMin, atomicInc...) start with
// an atomic load, which counts, and retry with weak compare-and-swaps, which
// do not.
#define WBSIM_ATOMICS(N, T)                                                                         \
    WBSIM_HOOK T __tsan_atomic##N##_load(const volatile T* p, int) {                                 \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                \
    WBSIM_HOOK void __tsan_atomic##N##_store(volatile T* p, T v, int) {                              \
        record(p, N / 8, ACCESS_ATOMIC, PC, kPieceAtomicWrite);                                      \
        __atomic_store_n(p, v, __ATOMIC_SEQ_CST);                                                    \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_exchange(volatile T* p, T v, int) {                              \
        record(p, N / 8, ACCESS_ATOMIC, PC, kPieceAtomicWrite);                                      \
        return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_add(volatile T* p, T v, int) {                             \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_sub(volatile T* p, T v, int) {                             \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_and(volatile T* p, T v, int) {                             \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_or(volatile T* p, T v, int) {                              \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_xor(volatile T* p, T v, int) {                             \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_fetch_nand(volatile T* p, T v, int) {                            \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_fetch_nand(p, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                                \
    WBSIM_HOOK int __tsan_atomic##N##_compare_exchange_strong(volatile T* p, T* expected, T v, int,  \
                                                             int) {                                  \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        return __atomic_compare_exchange_n(p, expected, v, false, __ATOMIC_SEQ_CST,                  \
                                           __ATOMIC_SEQ_CST);                                        \
    }                                                                                                \
    WBSIM_HOOK int __tsan_atomic##N##_compare_exchange_weak(volatile T* p, T* expected, T v, int,    \
                                                           int) {                                    \
        return __atomic_compare_exchange_n(p, expected, v, true, __ATOMIC_SEQ_CST,                   \
                                           __ATOMIC_SEQ_CST);                                        \
    }                                                                                                \
    WBSIM_HOOK T __tsan_atomic##N##_compare_exchange_val(volatile T* p, T expected, T v, int, int) { \
        record(p, N / 8, ACCESS_ATOMIC, PC);                                                         \
        __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        return expected;                                                                             \
    }
WBSIM_ATOMICS(8, uint8_t)
WBSIM_ATOMICS(16, uint16_t)
WBSIM_ATOMICS(32, uint32_t)
WBSIM_ATOMICS(64, uint64_t)
#undef WBSIM_ATOMICS

WBSIM_HOOK void __tsan_atomic_thread_fence(int) {
    Recorder* r = t_rec;  // (NEED_ORDER: what this warp wrote is seen before what follows)
    if (r && r->on && r->order) deliver(r, r->tid >> 5);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
WBSIM_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#endif  // WBSIM_CHECKED
