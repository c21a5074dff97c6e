// The simulator's worker: a small executable that maps the "device" arena
// shared with the notebook process, loads kernel libraries and runs grids.
//
// Execution model (see docs/simulator.md):
//  * blocks are handed out to a pool of OS threads; a block runs to
//    completion on one OS thread, so __shared__ variables are thread_local;
//  * a block starts in "direct mode", a plain loop over its threads; the
//    first barrier or warp operation promotes it to fibers (one per CUDA
//    thread, switched by a hand-written context switch);
//  * a barrier releases when every live thread arrived (threads that
//    returned do not block it); a warp operation waits for the live lanes of
//    its mask; when no fiber can run, the block is deadlocked;
//  * faults (signals, assert, __trap, deadlock, time limit) write a record
//    to the control page of the arena and end the process; the notebook side
//    reads the record, raises KernelFault and starts a new worker.
//
// Protocol on two pipes (request fd, reply fd), little-endian:
//   request: u32 op, u32 length, payload;  reply: i32 status, u32 length, payload.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wbsim_abi.h"
#include "wbsim_control.h"

#ifdef WBSIM_CHECKED
#include <sanitizer/asan_interface.h>
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

// ---------------------------------------------------------------------------
// Built-in variables (exported to kernel libraries).
extern "C" {
__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;
__thread int __wbsim_fiber_mode;
__thread unsigned char* __wbsim_dsmem;
}

static wbsim_control* g_ctl = nullptr;
static std::atomic<int> g_faulted{0};
// The launch running now and the one the watchdog is stopping: a late SIGUSR1
// meant for a launch that has finished is ignored.
static std::atomic<uint64_t> g_current_launch{0};
static std::atomic<uint64_t> g_killed_launch{~0ull};
static __thread const wbsim_kernel* t_kernel;  // kernel running on this OS thread
static __thread int t_in_kernel;

// Dynamic shared memory per OS thread: this much at first, grown (never
// shrunk) when a launch asks for more.
static const size_t kDynamicSharedBytes = 256 * 1024;
static __thread size_t t_dsmem_bytes;
static size_t g_stack_bytes = 128 * 1024;
static const size_t kGuardBytes = 4096;
static const unsigned kMaxThreads = 1024;
// Warp opcodes run 1..WBSIM_REDUCE_XOR; __activemask takes slot 0.
static const int kOpSlots = WBSIM_REDUCE_XOR + 1;
static inline int op_slot(int op) { return op > 0 && op < kOpSlots ? op : 0; }

// ---------------------------------------------------------------------------
// Fault reporting: fill the control record and end the process.
static void copy_text(char* dst, size_t cap, const char* src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; ++i) dst[i] = src[i];
    dst[i] = 0;
}

static void record_location(wbsim_fault* f) {
    f->has_block = t_in_kernel;
    f->has_thread = t_in_kernel;
    f->block[0] = blockIdx.x; f->block[1] = blockIdx.y; f->block[2] = blockIdx.z;
    f->thread[0] = threadIdx.x; f->thread[1] = threadIdx.y; f->thread[2] = threadIdx.z;
    if (t_kernel) copy_text(f->kernel, sizeof f->kernel, t_kernel->name);
}

// Returns false when another thread already reported a fault.
static bool begin_fault() {
    int expected = 0;
    return g_faulted.compare_exchange_strong(expected, 1);
}

[[noreturn]] static void end_fault(int kind) {
    __atomic_store_n(&g_ctl->fault.kind, kind, __ATOMIC_SEQ_CST);
    _exit(86);
}

[[noreturn]] static void park_forever() {
    for (;;) pause();
}

[[noreturn]] static void fault_now(int kind, const char* msg) {
    if (!begin_fault()) park_forever();
    wbsim_fault* f = &g_ctl->fault;
    record_location(f);
    copy_text(f->message, sizeof f->message, msg);
    end_fault(kind);
}

// ---------------------------------------------------------------------------
// Context switch.
#if defined(__x86_64__)
extern "C" void wbsim_ctx_switch(void** save_sp, void* new_sp);
asm(R"(
    .text
    .globl wbsim_ctx_switch
    .type wbsim_ctx_switch,@function
wbsim_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size wbsim_ctx_switch, .-wbsim_ctx_switch
)");
#elif defined(__aarch64__)
extern "C" void wbsim_ctx_switch(void** save_sp, void* new_sp);
asm(R"(
    .text
    .globl wbsim_ctx_switch
    .type wbsim_ctx_switch,%function
wbsim_ctx_switch:
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
    .size wbsim_ctx_switch, .-wbsim_ctx_switch
)");
#else
#error "the simulator's context switch supports x86-64 and aarch64"
#endif

// ---------------------------------------------------------------------------
// Per-OS-thread block state.
enum FiberState : uint8_t { NOT_STARTED, READY, AT_BARRIER, AT_WARP, DEAD };

struct Fiber {
    void* sp;
    FiberState state;
    uint8_t bar_op;
    int result;
    uint3 tid;
    wbsim_warp_req* req;
    const void* site;  // where the current warp operation was called (for __activemask)
};

struct Stack {
    char* base;   // lowest usable address (above the guard page)
    size_t size;
};

struct BlockState {
    const wbsim_kernel* kernel = nullptr;
    unsigned nthreads = 0;
    unsigned nwarps = 0;
    Fiber fibers[kMaxThreads];
    Stack stacks[kMaxThreads] = {};
    int cur = 0;
    int live = 0;
    int bar_arrived = 0;
    int bar_true = 0;
    uint32_t warp_live[kMaxThreads / 32];
    uint32_t warp_arrived[kMaxThreads / 32];
    uint32_t warp_at_barrier[kMaxThreads / 32];
    // Lanes waiting at each kind of warp operation (index: op_slot()).
    uint32_t warp_at_op[kMaxThreads / 32][kOpSlots];
    void* main_sp = nullptr;
    void* dead_sp = nullptr;
};

static __thread BlockState* t_block;

static BlockState* block_state() {
    if (!t_block) t_block = new BlockState();
    return t_block;
}

static inline unsigned linear_tid(const uint3& t) {
    return t.x + blockDim.x * (t.y + blockDim.y * t.z);
}

static inline uint3 tid_of(unsigned linear) {
    uint3 t;
    t.x = linear % blockDim.x;
    t.y = (linear / blockDim.x) % blockDim.y;
    t.z = linear / (blockDim.x * blockDim.y);
    return t;
}

static void ensure_stack(BlockState* b, unsigned i) {
    if (b->stacks[i].base) return;
    size_t total = g_stack_bytes + kGuardBytes;
    char* mem = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) fault_now(WBSIM_FAULT_ERROR, "cannot allocate a fiber stack");
    mprotect(mem, kGuardBytes, PROT_NONE);
    b->stacks[i].base = mem + kGuardBytes;
    b->stacks[i].size = g_stack_bytes;
}

[[noreturn]] static void fiber_exit();

static void fiber_entry() {
    BlockState* b = t_block;
    b->kernel->run_thread(b->kernel->args);
    fiber_exit();
}

static void init_fiber_stack(BlockState* b, unsigned i) {
    ensure_stack(b, i);
    // Stagger the stack tops so that the fibers' saved registers do not all
    // fall into the same cache sets (the stacks are page aligned).
    uintptr_t top = (uintptr_t)(b->stacks[i].base + b->stacks[i].size - (i % 61) * 64) & ~(uintptr_t)15;
#if defined(__x86_64__)
    uint64_t* sp = (uint64_t*)top;
    *--sp = 0;                          // fake return address of fiber_entry
    *--sp = (uint64_t)&fiber_entry;     // where "ret" goes
    for (int r = 0; r < 6; ++r) *--sp = 0;
    b->fibers[i].sp = sp;
#else
    uint64_t* sp = (uint64_t*)(top - 176);
    memset(sp, 0, 176);
    sp[11] = (uint64_t)&fiber_entry;    // x30 (link register)
    b->fibers[i].sp = sp;
#endif
}

static inline void switch_to(BlockState* b, void** save, int next) {
    Fiber& f = b->fibers[next];
    b->cur = next;
    threadIdx = f.tid;
    if (f.state == NOT_STARTED) {
        init_fiber_stack(b, next);
        f.state = READY;
    }
    wbsim_ctx_switch(save, f.sp);
}

// Next runnable fiber after `from`, or -1.
static int find_runnable(BlockState* b, int from) {
    int n = (int)b->nthreads;
    for (int k = 1; k <= n; ++k) {
        int i = from + k;
        if (i >= n) i -= n;
        FiberState s = b->fibers[i].state;
        if (s == READY || s == NOT_STARTED) return i;
    }
    return -1;
}

static void complete_warp_group(BlockState* b, unsigned w, uint32_t group);
static bool try_complete_warp(BlockState* b, unsigned w, bool ignore_barrier);
static bool resolve_activemask(BlockState* b, unsigned w);
[[noreturn]] static void report_deadlock(BlockState* b);

static void release_barrier(BlockState* b) {
    int count = b->bar_true, arrived = b->bar_arrived;
    for (unsigned i = 0; i < b->nthreads; ++i) {
        Fiber& f = b->fibers[i];
        if (f.state != AT_BARRIER) continue;
        f.state = READY;
        switch (f.bar_op) {
            case WBSIM_BAR_COUNT: f.result = count; break;
            case WBSIM_BAR_AND: f.result = count == arrived; break;
            case WBSIM_BAR_OR: f.result = count != 0; break;
            default: f.result = 0;
        }
    }
    for (unsigned w = 0; w < b->nwarps; ++w) b->warp_at_barrier[w] = 0;
    b->bar_arrived = 0;
    b->bar_true = 0;
}

// Leave the current fiber (already marked blocked or dead) for the next one.
static void switch_away(BlockState* b, void** save) {
    int next = find_runnable(b, b->cur);
    if (next < 0) {
        if (b->live == 0) {
            b->cur = -1;
            wbsim_ctx_switch(save, b->main_sp);
            return;
        }
        // Lanes waiting at a barrier cannot take part in a warp operation:
        // let warp groups that wait only for them go ahead.
        bool progressed = false;
        for (unsigned w = 0; w < b->nwarps; ++w)
            if (b->warp_arrived[w]) progressed |= try_complete_warp(b, w, true);
        for (unsigned w = 0; w < b->nwarps; ++w)
            if (b->warp_at_op[w][0]) progressed |= resolve_activemask(b, w);
        if (progressed) next = find_runnable(b, b->cur);
        if (next < 0) report_deadlock(b);
    }
    if (next == b->cur) {  // the current fiber itself was released
        threadIdx = b->fibers[next].tid;
        return;
    }
    switch_to(b, save, next);
}

static void mark_dead(BlockState* b, int i) {
    b->fibers[i].state = DEAD;
    b->live--;
    unsigned w = (unsigned)i / 32;
    b->warp_live[w] &= ~(1u << (i % 32));
    if (b->bar_arrived > 0 && b->bar_arrived == b->live) release_barrier(b);
    if (b->warp_arrived[w]) {
        try_complete_warp(b, w, false);
        resolve_activemask(b, w);
    }
}

[[noreturn]] static void fiber_exit() {
    BlockState* b = t_block;
    mark_dead(b, b->cur);
    switch_away(b, &b->dead_sp);
    __builtin_unreachable();
}

// The first barrier or warp operation of a block in direct mode: threads
// before the current one have returned, the current one goes on on this
// stack, the others become fibers that start at the kernel's entry.
static void promote(BlockState* b) {
    unsigned k = linear_tid(threadIdx);
    unsigned n = b->nthreads;
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = b->fibers[i];
        f.state = i < k ? DEAD : (i == k ? READY : NOT_STARTED);
        f.tid = tid_of(i);
        f.req = nullptr;
        f.result = 0;
    }
    for (unsigned w = 0; w < b->nwarps; ++w) {
        uint32_t m = 0;
        for (unsigned l = 0; l < 32; ++l) {
            unsigned i = w * 32 + l;
            if (i < n && i >= k) m |= 1u << l;
        }
        b->warp_live[w] = m;
        b->warp_arrived[w] = 0;
        b->warp_at_barrier[w] = 0;
        memset(b->warp_at_op[w], 0, sizeof b->warp_at_op[w]);
    }
    b->live = (int)(n - k);
    b->cur = (int)k;
    b->bar_arrived = 0;
    b->bar_true = 0;
    __wbsim_fiber_mode = 1;
}

extern "C" void wbsim_finish_block(void) {
    BlockState* b = t_block;
    mark_dead(b, b->cur);
    if (b->live > 0) switch_away(b, &b->main_sp);
    __wbsim_fiber_mode = 0;
}

extern "C" int wbsim_barrier(int op, int predicate) {
    BlockState* b = t_block;
    if (!__wbsim_fiber_mode) {
        if (b->nthreads == 1) {
            if (op == WBSIM_BAR_COUNT) return predicate != 0;
            return op == WBSIM_BAR_SYNC ? 0 : predicate != 0;
        }
        promote(b);
    }
    int me = b->cur;
    Fiber& f = b->fibers[me];
    f.state = AT_BARRIER;
    f.bar_op = (uint8_t)op;
    b->bar_arrived++;
    b->bar_true += predicate != 0;
    b->warp_at_barrier[me / 32] |= 1u << (me % 32);
    if (b->bar_arrived == b->live) {
        release_barrier(b);
    } else {
        if (b->warp_at_op[me / 32][0]) resolve_activemask(b, me / 32);
        // A lane of a warp now at the barrier may complete a warp group of
        // other lanes: that is only resolved when nothing else can run.
        switch_away(b, &f.sp);
    }
    return f.result;
}

// ---------------------------------------------------------------------------
// Warp operations: the last lane of a group to arrive computes every lane's result.
static inline uint64_t load_u(const unsigned char* p, unsigned size) {
    uint64_t v = 0;
    memcpy(&v, p, size > 8 ? 8 : size);
    return v;
}

static inline int64_t load_i(const unsigned char* p, unsigned size) {
    if (size == 4) { int32_t v; memcpy(&v, p, 4); return v; }
    int64_t v = 0; memcpy(&v, p, size > 8 ? 8 : size); return v;
}

static void complete_warp_group(BlockState* b, unsigned w, uint32_t group) {
    unsigned base = w * 32;
    // The first arrived lane's request says what the operation is.
    int first = __builtin_ctz(group);
    wbsim_warp_req* q = b->fibers[base + first].req;
    int op = q->op;
    uint32_t ballot = 0;
    bool vote = op >= WBSIM_BALLOT && op <= WBSIM_ALL;
    for (uint32_t m = vote ? group : 0; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        wbsim_warp_req* r = b->fibers[base + l].req;
        if (load_u(r->val, r->size ? r->size : 4)) ballot |= 1u << l;
    }
    uint64_t red_u = 0; int64_t red_i = 0;
    if (op >= WBSIM_REDUCE_ADD && op <= WBSIM_REDUCE_XOR) {
        bool firstv = true;
        for (uint32_t m = group; m; m &= m - 1) {
            wbsim_warp_req* r = b->fibers[base + __builtin_ctz(m)].req;
            uint64_t u = load_u(r->val, 4) & 0xffffffffu;
            int64_t s = load_i(r->val, 4);
            if (firstv) { red_u = u; red_i = s; firstv = false; continue; }
            switch (op) {
                case WBSIM_REDUCE_ADD: red_u += u; break;
                case WBSIM_REDUCE_MIN_U: red_u = u < red_u ? u : red_u; break;
                case WBSIM_REDUCE_MAX_U: red_u = u > red_u ? u : red_u; break;
                case WBSIM_REDUCE_MIN_I: red_i = s < red_i ? s : red_i; break;
                case WBSIM_REDUCE_MAX_I: red_i = s > red_i ? s : red_i; break;
                case WBSIM_REDUCE_AND: red_u &= u; break;
                case WBSIM_REDUCE_OR: red_u |= u; break;
                case WBSIM_REDUCE_XOR: red_u ^= u; break;
            }
        }
        if (op == WBSIM_REDUCE_MIN_I || op == WBSIM_REDUCE_MAX_I) red_u = (uint64_t)red_i;
    }
    for (uint32_t m = group; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        Fiber& f = b->fibers[base + l];
        wbsim_warp_req* r = f.req;
        int width = r->width;
        if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
        int seg = l & ~(width - 1);
        int src = l;
        // PTX shfl.sync: the lane operand is taken modulo 32; a lane outside
        // the caller's segment reads its own value, except that xor may read
        // an earlier segment (lanes up to the end of the caller's one).
        int arg = r->arg & 31;
        switch (r->op) {
            case WBSIM_SHFL_IDX: src = seg + (arg & (width - 1)); break;
            case WBSIM_SHFL_UP: src = (l - arg >= seg) ? l - arg : l; break;
            case WBSIM_SHFL_DOWN: src = (l + arg < seg + width) ? l + arg : l; break;
            case WBSIM_SHFL_XOR: {
                int t = l ^ arg;
                src = t < seg + width ? t : l;
                break;
            }
            default: break;
        }
        switch (r->op) {
            case WBSIM_SHFL_IDX: case WBSIM_SHFL_UP: case WBSIM_SHFL_DOWN: case WBSIM_SHFL_XOR: {
                const wbsim_warp_req* s = (group >> src & 1u) ? b->fibers[base + src].req : r;
                memcpy(r->out, s->val, r->size);
                break;
            }
            case WBSIM_BALLOT: memcpy(r->out, &ballot, 4); break;
            case WBSIM_ANY: { unsigned v = ballot != 0; memcpy(r->out, &v, 4); break; }
            case WBSIM_ALL: { unsigned v = ballot == group; memcpy(r->out, &v, 4); break; }
            case WBSIM_MATCH_ANY: case WBSIM_MATCH_ALL: {
                uint32_t same = 0;
                for (uint32_t mm = group; mm; mm &= mm - 1) {
                    int o = __builtin_ctz(mm);
                    if (memcmp(b->fibers[base + o].req->val, r->val, r->size) == 0) same |= 1u << o;
                }
                unsigned v = same;
                if (r->op == WBSIM_MATCH_ALL) { r->pred = same == group; v = same == group ? group : 0; }
                memcpy(r->out, &v, 4);
                break;
            }
            case WBSIM_SYNCWARP: break;
            case WBSIM_ACTIVEMASK: memcpy(r->out, &group, 4); break;
            default:
                if (r->op >= WBSIM_REDUCE_ADD && r->op <= WBSIM_REDUCE_XOR) { uint32_t v = (uint32_t)red_u; memcpy(r->out, &v, 4); }
        }
        f.state = READY;
    }
    b->warp_arrived[w] &= ~group;
    b->warp_at_op[w][op_slot(op)] &= ~group;
}

// The lanes lane l of warp w waits for; complete when they all wait at the same
// kind of warp operation (PTX: same qualifiers and mask, not the same instruction).
static inline uint32_t warp_need(BlockState* b, unsigned w, int l, bool ignore_barrier) {
    uint32_t need = b->fibers[w * 32 + l].req->mask & b->warp_live[w];
    if (ignore_barrier) need &= ~b->warp_at_barrier[w];
    return need | (1u << l);
}

// Complete every group of warp w whose lanes are all there.
static bool try_complete_warp(BlockState* b, unsigned w, bool ignore_barrier) {
    bool any = false;
    for (;;) {
        uint32_t arrived = b->warp_arrived[w] & ~b->warp_at_op[w][0];
        if (!arrived) return any;
        bool done = false;
        for (uint32_t m = arrived; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            uint32_t need = warp_need(b, w, l, ignore_barrier);
            uint32_t same = b->warp_at_op[w][op_slot(b->fibers[w * 32 + l].req->op)];
            if ((same & need) == need) {
                complete_warp_group(b, w, need);
                any = done = true;
                break;
            }
        }
        if (!done) return any;
    }
}

// __activemask: the lanes that reach the same __activemask call together. A
// lane waits there until every other live lane of its warp is blocked (at a
// barrier, at a warp operation) or returned; then each call site's waiting
// lanes form one group.
static bool resolve_activemask(BlockState* b, unsigned w) {
    uint32_t waiting = b->warp_at_op[w][0];
    if (!waiting) return false;
    uint32_t blocked = b->warp_arrived[w] | b->warp_at_barrier[w];
    if (b->warp_live[w] & ~blocked) return false;  // a lane can still run
    unsigned base = w * 32;
    while (waiting) {
        const void* site = b->fibers[base + __builtin_ctz(waiting)].site;
        uint32_t group = 0;
        for (uint32_t m = waiting; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            if (b->fibers[base + l].site == site) group |= 1u << l;
        }
        for (uint32_t m = group; m; m &= m - 1) {
            Fiber& f = b->fibers[base + __builtin_ctz(m)];
            memcpy(f.req->out, &group, 4);
            f.state = READY;
        }
        waiting &= ~group;
        b->warp_arrived[w] &= ~group;
        b->warp_at_op[w][0] &= ~group;
    }
    return true;
}

extern "C" __attribute__((noinline)) void wbsim_warp(wbsim_warp_req* req) {
    BlockState* b = t_block;
    if (!__wbsim_fiber_mode) promote(b);
    int me = b->cur;
    unsigned w = (unsigned)me / 32;
    uint32_t bit = 1u << (me % 32);
    Fiber& f = b->fibers[me];
    f.state = AT_WARP;
    f.req = req;
    f.site = __builtin_return_address(0);
    b->warp_arrived[w] |= bit;
    int slot = op_slot(req->op);
    b->warp_at_op[w][slot] |= bit;
    if (slot != 0) {
        uint32_t need = (req->mask & b->warp_live[w]) | bit;
        if ((b->warp_at_op[w][slot] & need) == need) {
            complete_warp_group(b, w, need);
            return;
        }
    }
    if (b->warp_at_op[w][0]) resolve_activemask(b, w);
    if (f.state == READY) {
        threadIdx = f.tid;
        return;
    }
    switch_away(b, &f.sp);
}

extern "C" unsigned wbsim_activemask(void) {
    BlockState* b = t_block;
    unsigned me = linear_tid(threadIdx);
    unsigned w = me / 32;
    if (__wbsim_fiber_mode) return b->warp_live[w];
    uint32_t m = 0;  // direct mode: lanes before this one have returned
    for (unsigned l = me % 32; l < 32 && w * 32 + l < b->nthreads; ++l) m |= 1u << l;
    return m;
}

[[noreturn]] static void report_deadlock(BlockState* b) {
    int at_bar = 0, at_warp = 0, culprit = -1;
    for (unsigned i = 0; i < b->nthreads; ++i) {
        if (b->fibers[i].state == AT_BARRIER) { at_bar++; if (culprit < 0) culprit = (int)i; }
        if (b->fibers[i].state == AT_WARP) { at_warp++; culprit = culprit >= 0 && b->fibers[culprit].state == AT_WARP ? culprit : (int)i; }
    }
    if (culprit >= 0) threadIdx = b->fibers[culprit].tid;
    char msg[512];
    snprintf(msg, sizeof msg,
             "deadlock: no thread of the block can go on (%d waiting at __syncthreads, "
             "%d at warp operations, %u returned); a barrier or warp operation is not "
             "reached by every thread it waits for",
             at_bar, at_warp, b->nthreads - (unsigned)(at_bar + at_warp));
    fault_now(WBSIM_FAULT_DEADLOCK, msg);
}

extern "C" void wbsim_yield(void) {
    BlockState* b = t_block;
    if (!__wbsim_fiber_mode) return;
    // A fiber that spins on a flag lets the others run.
    int me = b->cur;
    int next = find_runnable(b, me);
    if (next < 0 || next == me) return;
    switch_to(b, &b->fibers[me].sp, next);
}

// ---------------------------------------------------------------------------
// printf, assert, trap, clocks.
extern "C" int wbsim_printf(const char* fmt, ...) {
    char local[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(local, sizeof local, fmt, ap);
    va_end(ap);
    if (n < 0) return n;
    std::string big;
    const char* text = local;
    if ((size_t)n >= sizeof local) {
        big.resize((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(&big[0], big.size(), fmt, ap);
        va_end(ap);
        text = big.c_str();
    }
    uint64_t at = __atomic_fetch_add(&g_ctl->printf_len, (uint64_t)n, __ATOMIC_RELAXED);
    if (at + (uint64_t)n > g_ctl->printf_capacity) {
        __atomic_fetch_add(&g_ctl->printf_dropped, (uint64_t)n, __ATOMIC_RELAXED);
        return n;
    }
    memcpy((char*)g_ctl + WBSIM_PRINTF_OFFSET + at, text, (size_t)n);
    // Messages that fit form a prefix of the buffer (claims only grow).
    __atomic_fetch_add(&g_ctl->printf_committed, (uint64_t)n, __ATOMIC_RELEASE);
    return n;
}

extern "C" void wbsim_assert_fail(const char* expr, const char* file, int line, const char* func) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s:%d: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.",
             file, line, func, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
             threadIdx.z, expr);
    if (!begin_fault()) park_forever();
    record_location(&g_ctl->fault);
    g_ctl->fault.line = line;
    copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, msg);
    end_fault(WBSIM_FAULT_ASSERT);
}

extern "C" void wbsim_trap(const char* what) {
    fault_now(WBSIM_FAULT_TRAP, what ? what : "__trap() called");
}

extern "C" unsigned long long wbsim_clock64(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
#endif
}

extern "C" unsigned long long wbsim_globaltimer(void) {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------
// Signals.
static void on_signal(int sig, siginfo_t* info, void*) {
    if (sig == SIGUSR1) {  // the watchdog: the time limit passed
        if (!t_in_kernel) return;  // an idle pool thread
        if (g_killed_launch.load() != g_current_launch.load()) return;  // too late
        if (!begin_fault()) park_forever();
        record_location(&g_ctl->fault);
        copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, "time limit exceeded");
        end_fault(WBSIM_FAULT_TIMEOUT);
    }
    if (!begin_fault()) park_forever();
    wbsim_fault* f = &g_ctl->fault;
    record_location(f);
    f->signo = sig;
    f->address = (uint64_t)(uintptr_t)(info ? info->si_addr : nullptr);
    const char* what = "signal";
    BlockState* b = t_block;
    if ((sig == SIGSEGV || sig == SIGBUS) && b && __wbsim_fiber_mode && b->cur >= 0) {
        const Stack& s = b->stacks[b->cur];
        uintptr_t a = (uintptr_t)f->address;
        if (s.base && a >= (uintptr_t)s.base - kGuardBytes - 65536 && a < (uintptr_t)s.base)
            what = "stack overflow: the thread used more than the simulator's fiber stack";
    }
    copy_text(f->message, sizeof f->message, what);
    end_fault(WBSIM_FAULT_SIGNAL);
}

static void setup_thread_signals() {
    stack_t ss;
    ss.ss_size = 64 * 1024;
    ss.ss_sp = malloc(ss.ss_size);
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
}

static void install_handlers() {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
#ifdef WBSIM_CHECKED
    // AddressSanitizer reports bad addresses itself, with the source line.
    int sigs[] = {SIGILL, SIGABRT, SIGUSR1};
#else
    int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGUSR1};
#endif
    for (int s : sigs) sigaction(s, &sa, nullptr);
}

#ifdef WBSIM_CHECKED
extern "C" void __asan_on_error() {
    if (!begin_fault()) return;
    record_location(&g_ctl->fault);
    copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, "AddressSanitizer");
    __atomic_store_n(&g_ctl->fault.kind, WBSIM_FAULT_ASAN, __ATOMIC_SEQ_CST);
}
#endif

// ---------------------------------------------------------------------------
// Grid execution on a pool of OS threads.
struct Grid {
    const wbsim_kernel* kernel;
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    uint64_t nblocks;
    std::atomic<uint64_t> next{0};
};

static void ensure_dynamic_shared(size_t n) {
    if (n <= t_dsmem_bytes) return;
    size_t size = (n + 4095) & ~(size_t)4095;
    void* p = aligned_alloc(128, size);
    if (!p) fault_now(WBSIM_FAULT_ERROR, "cannot allocate the block's dynamic shared memory");
    free(__wbsim_dsmem);
    __wbsim_dsmem = (unsigned char*)p;
    t_dsmem_bytes = size;
}

static void run_blocks(Grid* g) {
    ensure_dynamic_shared(g->shared_bytes);
    BlockState* b = block_state();
    b->kernel = g->kernel;
    b->nthreads = g->block[0] * g->block[1] * g->block[2];
    b->nwarps = (b->nthreads + 31) / 32;
    blockDim = dim3(g->block[0], g->block[1], g->block[2]);
    gridDim = dim3(g->grid[0], g->grid[1], g->grid[2]);
    t_kernel = g->kernel;
    t_in_kernel = 1;
    uint64_t gxy = (uint64_t)g->grid[0] * g->grid[1];
    for (;;) {
        uint64_t i = g->next.fetch_add(1, std::memory_order_relaxed);
        if (i >= g->nblocks) break;
        blockIdx.x = (unsigned)(i % g->grid[0]);
        blockIdx.y = (unsigned)((i / g->grid[0]) % g->grid[1]);
        blockIdx.z = (unsigned)(i / gxy);
        threadIdx = uint3{0, 0, 0};
        __wbsim_fiber_mode = 0;
        g->kernel->run_block(g->kernel->args);
    }
    t_in_kernel = 0;
}

struct Pool {
    std::mutex mu;
    std::condition_variable cv, done_cv;
    Grid* job = nullptr;
    uint64_t generation = 0;
    int busy = 0;
    std::vector<std::thread> threads;
};
static Pool g_pool;

static void thread_setup() {
    setup_thread_signals();
    ensure_dynamic_shared(kDynamicSharedBytes);
}

static void pool_thread() {
    thread_setup();
    uint64_t seen = 0;
    for (;;) {
        Grid* g;
        {
            std::unique_lock<std::mutex> lk(g_pool.mu);
            g_pool.cv.wait(lk, [&] { return g_pool.generation != seen; });
            seen = g_pool.generation;
            g = g_pool.job;
        }
        run_blocks(g);
        std::lock_guard<std::mutex> lk(g_pool.mu);
        if (--g_pool.busy == 0) g_pool.done_cv.notify_all();
    }
}

extern "C" int wbsim_run_grid(const wbsim_kernel* kernel, const unsigned grid[3],
                              const unsigned block[3], size_t shared_bytes) {
    Grid g;
    g.kernel = kernel;
    g.shared_bytes = shared_bytes;
    memcpy(g.grid, grid, sizeof g.grid);
    memcpy(g.block, block, sizeof g.block);
    g.nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
    uint64_t total_threads = g.nblocks * block[0] * block[1] * block[2];
    unsigned helpers = (unsigned)g_pool.threads.size();
    if (helpers == 0 || g.nblocks < 2 || total_threads < 8192) {
        run_blocks(&g);
        return 0;
    }
    {
        std::lock_guard<std::mutex> lk(g_pool.mu);
        g_pool.job = &g;
        g_pool.busy = (int)helpers;
        g_pool.generation++;
    }
    g_pool.cv.notify_all();
    run_blocks(&g);
    std::unique_lock<std::mutex> lk(g_pool.mu);
    g_pool.done_cv.wait(lk, [] { return g_pool.busy == 0; });
    return 0;
}

// ---------------------------------------------------------------------------
// Watchdog: ends a launch that runs past its time limit.
static std::mutex g_wd_mu;
static std::condition_variable g_wd_cv;
static uint64_t g_wd_deadline_ns = 0;  // 0: no launch running
static uint64_t g_wd_launches = 0;     // launches started so far
static bool g_wd_idle = true;          // the watchdog waits with no deadline
static uint64_t g_wd_wait_until = 0;   // else: when it wakes up next
static std::vector<pthread_t> g_kernel_threads;

static uint64_t now_ns() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A launch only wakes the watchdog when it waits with no deadline: during a
// series of launches it sleeps until the first deadline, then re-checks.
static void watchdog() {
    std::unique_lock<std::mutex> lk(g_wd_mu);
    for (;;) {
        if (g_wd_deadline_ns == 0) {
            g_wd_idle = true;
            g_wd_cv.wait(lk);
            g_wd_idle = false;
            continue;
        }
        uint64_t now = now_ns();
        if (now < g_wd_deadline_ns) {
            g_wd_wait_until = g_wd_deadline_ns;
            g_wd_cv.wait_for(lk, std::chrono::nanoseconds(g_wd_deadline_ns - now));
            continue;
        }
        uint64_t launch = g_wd_launches;
        g_killed_launch.store(launch);
        for (pthread_t t : g_kernel_threads) pthread_kill(t, SIGUSR1);
        lk.unlock();
        usleep(500000);
        lk.lock();
        // The threads did not report it (blocked signals?): end the process,
        // unless the launch finished in the meantime.
        if (g_wd_deadline_ns != 0 && g_wd_launches == launch) {
            if (begin_fault()) {
                copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, "time limit exceeded");
                end_fault(WBSIM_FAULT_TIMEOUT);
            }
            park_forever();
        }
    }
}

// ---------------------------------------------------------------------------
// The request loop.
static int g_in = -1, g_out = -1;

static bool read_all(int fd, void* buf, size_t n) {
    char* p = (char*)buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r; n -= (size_t)r;
    }
    return true;
}

static void write_all(int fd, const void* buf, size_t n) {
    const char* p = (const char*)buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) _exit(3);
        p += r; n -= (size_t)r;
    }
}

static void reply(int status, const void* data, uint32_t len) {
    std::string msg(8 + len, '\0');
    memcpy(&msg[0], &status, 4);
    memcpy(&msg[4], &len, 4);
    if (len) memcpy(&msg[8], data, len);
    write_all(g_out, msg.data(), msg.size());
}

static void reply_text(int status, const std::string& s) { reply(status, s.data(), (uint32_t)s.size()); }

struct Reader {
    const char* p;
    const char* end;
    template <class T> T get() {
        T v{};
        if (p + sizeof(T) <= end) memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    std::string str() {
        uint32_t n = get<uint32_t>();
        std::string s(p, p + n);
        p += n;
        return s;
    }
};

enum { OP_LOAD = 1, OP_LAUNCH = 2, OP_SYMBOL_WRITE = 3, OP_SYMBOL_READ = 4, OP_PING = 5 };

static std::vector<void*> g_libs;

static void handle_load(Reader& r) {
    std::string path = r.str();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) { reply_text(1, dlerror()); return; }
    uint32_t id = (uint32_t)g_libs.size();
    g_libs.push_back(h);
    reply(0, &id, 4);
}

typedef int (*launcher_fn)(const wbsim_launch*);

static void handle_launch(Reader& r) {
    uint32_t lib = r.get<uint32_t>();
    std::string sym = r.str();
    wbsim_launch L;
    memset(&L, 0, sizeof L);
    for (int i = 0; i < 3; ++i) L.grid[i] = r.get<uint32_t>();
    for (int i = 0; i < 3; ++i) L.block[i] = r.get<uint32_t>();
    L.shared_bytes = r.get<uint64_t>();
    uint32_t timeout_ms = r.get<uint32_t>();
    uint32_t nargs = r.get<uint32_t>();
    std::vector<unsigned> sizes(nargs);
    for (uint32_t i = 0; i < nargs; ++i) sizes[i] = r.get<uint32_t>();
    std::vector<void*> argv(nargs);
    // 16-byte slots at least; bigger arguments (structs) get more room
    size_t total = 0;
    for (uint32_t i = 0; i < nargs; ++i) total += (sizes[i] + 15) & ~15u;
    std::vector<unsigned char> blob(total + 16);
    unsigned char* base = (unsigned char*)(((uintptr_t)blob.data() + 15) & ~(uintptr_t)15);
    size_t off = 0;
    for (uint32_t i = 0; i < nargs; ++i) {
        memcpy(base + off, r.p, sizes[i]);
        r.p += sizes[i];
        argv[i] = base + off;
        off += (sizes[i] + 15) & ~15u;
    }
#ifdef WBSIM_CHECKED
    uint64_t lo = r.get<uint64_t>(), hi = r.get<uint64_t>();
    uint32_t nlive = r.get<uint32_t>();
    if (hi > lo) __asan_poison_memory_region((void*)(uintptr_t)lo, hi - lo);
    for (uint32_t i = 0; i < nlive; ++i) {
        uint64_t a = r.get<uint64_t>(), n = r.get<uint64_t>();
        __asan_unpoison_memory_region((void*)(uintptr_t)a, n);
    }
#endif
    if (lib >= g_libs.size()) { reply_text(2, "unknown library"); return; }
    // Entry points looked up once per (library, symbol).
    static std::unordered_map<std::string, launcher_fn> entry_points;
    std::string key = std::to_string(lib) + ":" + sym;
    auto found = entry_points.find(key);
    launcher_fn fn = found != entry_points.end() ? found->second : nullptr;
    if (!fn) {
        fn = (launcher_fn)dlsym(g_libs[lib], sym.c_str());
        if (!fn) { reply_text(2, "kernel entry point " + sym + " not found"); return; }
        entry_points.emplace(key, fn);
    }
    char err[512] = {0};
    L.argv = argv.data();
    L.argsize = sizes.data();
    L.nargs = nargs;
    L.error = err;
    L.error_size = sizeof err;
    g_ctl->fault.kind = 0;
    bool wake;
    {
        std::lock_guard<std::mutex> lk(g_wd_mu);
        g_current_launch.store(++g_wd_launches);
        g_wd_deadline_ns = timeout_ms ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
        wake = g_wd_deadline_ns != 0 && (g_wd_idle || g_wd_deadline_ns < g_wd_wait_until);
    }
    if (wake) g_wd_cv.notify_one();
    uint64_t t0 = now_ns();
    int rc = fn(&L);
    uint64_t t1 = now_ns();
    {
        std::lock_guard<std::mutex> lk(g_wd_mu);
        g_wd_deadline_ns = 0;
    }
    if (rc != 0) { reply_text(3, err); return; }
    uint64_t elapsed = t1 - t0;
    reply(0, &elapsed, 8);
}

static void handle_symbol(Reader& r, bool write) {
    uint32_t lib = r.get<uint32_t>();
    std::string sym = r.str();
    uint64_t offset = r.get<uint64_t>();
    uint64_t n = r.get<uint64_t>();
    if (lib >= g_libs.size()) { reply_text(2, "unknown library"); return; }
    char* addr = (char*)dlsym(g_libs[lib], sym.c_str());
    if (!addr) { reply_text(2, "no symbol " + sym); return; }
    if (write) {
        memcpy(addr + offset, r.p, n);
        reply(0, nullptr, 0);
    } else {
        reply(0, addr + offset, (uint32_t)n);
    }
}

int main(int argc, char** argv) {
    // worker <arena fd> <arena address> <arena bytes> <request fd> <reply fd> <threads>
    if (argc < 7) { fprintf(stderr, "usage: wbsim-worker fd addr size in out threads\n"); return 2; }
    int fd = atoi(argv[1]);
    uintptr_t addr = (uintptr_t)strtoull(argv[2], nullptr, 0);
    size_t size = (size_t)strtoull(argv[3], nullptr, 0);
    g_in = atoi(argv[4]);
    g_out = atoi(argv[5]);
    unsigned nthreads = (unsigned)atoi(argv[6]);
    if (const char* s = getenv("WBSIM_STACK_KIB")) g_stack_bytes = (size_t)atoi(s) * 1024;
    dup2(2, 1);  // stray writes to stdout go to the log, not the notebook
    void* m = mmap((void*)addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (m == MAP_FAILED || (uintptr_t)m != addr) {
        std::string msg = "cannot map the device arena at the notebook's address";
        reply_text(1, msg);
        return 1;
    }
    g_ctl = (wbsim_control*)m;
    thread_setup();
    install_handlers();
    if (nthreads == 0) {
        cpu_set_t set;
        nthreads = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
    }
    g_kernel_threads.push_back(pthread_self());
    for (unsigned i = 1; i < nthreads; ++i) {
        g_pool.threads.emplace_back(pool_thread);
        g_kernel_threads.push_back(g_pool.threads.back().native_handle());
    }
    std::thread(watchdog).detach();
    uint32_t hello[2] = {WBSIM_ABI_VERSION, nthreads};
    reply(0, hello, sizeof hello);
    for (;;) {
        uint32_t head[2];
        if (!read_all(g_in, head, 8)) _exit(0);
        std::vector<char> payload(head[1]);
        if (head[1] && !read_all(g_in, payload.data(), head[1])) _exit(0);
        Reader r{payload.data(), payload.data() + payload.size()};
        switch (head[0]) {
            case OP_LOAD: handle_load(r); break;
            case OP_LAUNCH: handle_launch(r); break;
            case OP_SYMBOL_WRITE: handle_symbol(r, true); break;
            case OP_SYMBOL_READ: handle_symbol(r, false); break;
            case OP_PING: reply(0, nullptr, 0); break;
            default: reply_text(9, "unknown request");
        }
    }
}
