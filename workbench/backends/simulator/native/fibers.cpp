// A block's threads. A block starts in "direct mode", a plain loop over its
// threads; the first barrier or warp operation promotes it to fibers, one per
// CUDA thread, switched by a hand-written context switch. A barrier releases
// when every live thread arrived (threads that returned do not block it);
// when no fiber can run, the block is deadlocked.
#include <cstdio>
#include <cstring>

#include <sys/mman.h>

#include "access.h"
#include "runtime.h"

size_t g_stack_bytes = 128 * 1024;
__thread BlockState* t_block;

// -- context switch -----------------------------------------------------------
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

// -- block state and fibers ---------------------------------------------------
BlockState* block_state() {
    if (!t_block) t_block = new BlockState();
    return t_block;
}

void free_block_state() {
    BlockState* b = t_block;
    if (!b) return;
    for (unsigned i = 0; i < kMaxThreads; ++i)
        if (b->stacks[i].base && !b->stacks[i].in_arena)
            munmap(b->stacks[i].base - kGuardBytes, b->stacks[i].size + kGuardBytes);
    if (b->arena) munmap(b->arena, b->arena_bytes);
    delete b;
    t_block = nullptr;
}

static inline uint3 tid_of(unsigned linear) {
    uint3 t;
    t.x = linear % blockDim.x;
    t.y = (linear / blockDim.x) % blockDim.y;
    t.z = linear / (blockDim.x * blockDim.y);
    return t;
}

uint64_t g_cooperative_fibers = 0;

static void ensure_stack(BlockState* b, unsigned i) {
    if (b->stacks[i].base) return;
    if (g_cooperative && g_cooperative_fibers > kGuardedCooperativeFibers) {
        if (!b->arena) {
            b->arena_bytes = (size_t)kMaxThreads * g_stack_bytes;
            void* m = mmap(nullptr, b->arena_bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) fault_now(WBSIM_FAULT_ERROR, "cannot allocate the fiber stacks of a block");
            b->arena = (char*)m;
        }
        b->stacks[i].base = b->arena + (size_t)i * g_stack_bytes;
        b->stacks[i].size = g_stack_bytes;
        b->stacks[i].in_arena = true;
        return;
    }
    size_t total = g_stack_bytes + kGuardBytes;
    char* mem = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) fault_now(WBSIM_FAULT_ERROR, "cannot allocate a fiber stack");
    mprotect(mem, kGuardBytes, PROT_NONE);
    b->stacks[i].base = mem + kGuardBytes;
    b->stacks[i].size = g_stack_bytes;
    b->stacks[i].in_arena = false;
}

[[noreturn]] static void fiber_exit();
[[noreturn]] static void report_deadlock(BlockState* b);

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
    if (g_access_on) access_thread_runs((unsigned)next);
    if (f.state == NOT_STARTED) {
        init_fiber_stack(b, next);
        f.state = READY;
    }
    wbsim_ctx_switch(save, f.sp);
}

// -- exploring a schedule (grid.cpp): fibers chosen at random ------------------
__thread uint64_t t_explore;

static int random_runnable(BlockState* b) {
    int n = (int)b->nthreads, count = 0;
    for (int i = 0; i < n; ++i) count += b->fibers[i].state == READY || b->fibers[i].state == NOT_STARTED;
    if (!count) return -1;
    t_explore ^= t_explore << 13;  // xorshift64
    t_explore ^= t_explore >> 7;
    t_explore ^= t_explore << 17;
    int k = (int)(t_explore % (uint64_t)count);
    for (int i = 0; i < n; ++i)
        if ((b->fibers[i].state == READY || b->fibers[i].state == NOT_STARTED) && k-- == 0) return i;
    return -1;
}

// Next runnable fiber after `from` (while exploring, any at random), or -1.
static int find_runnable(BlockState* b, int from) {
    if (__builtin_expect(t_explore != 0, 0)) return random_runnable(b);
    int n = (int)b->nthreads;
    for (int k = 1; k <= n; ++k) {
        int i = from + k;
        if (i >= n) i -= n;
        FiberState s = b->fibers[i].state;
        if (s == READY || s == NOT_STARTED) return i;
    }
    return -1;
}

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
    if (g_access_on) access_barrier_released();
}

void switch_away(BlockState* b, void** save) {
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
void promote(BlockState* b) {
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

void run_block_explored(BlockState* b) {
    threadIdx = uint3{0, 0, 0};
    promote(b);  // thread 0 "current", the others not started...
    b->fibers[0].state = NOT_STARTED;  // ... and thread 0 too: every one starts as a fiber
    int first = random_runnable(b);
    switch_to(b, &b->main_sp, first);  // back here when the last thread has returned
    __wbsim_fiber_mode = 0;
}

// While exploring, a thread that goes on after a barrier or warp operation
// may give way to any other that can run.
static inline void explore_yield(BlockState* b) {
    if (__builtin_expect(t_explore != 0, 0)) switch_away(b, &b->fibers[b->cur].sp);
}

extern "C" void wbsim_finish_block(void) {
    BlockState* b = t_block;
    mark_dead(b, b->cur);
    if (b->live > 0) switch_away(b, &b->main_sp);
    __wbsim_fiber_mode = 0;
}

extern "C" int wbsim_barrier(int op, int predicate, const char* file, int line) {
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
    f.bar_file = file;
    f.bar_line = line;
    b->bar_arrived++;
    b->bar_true += predicate != 0;
    b->warp_at_barrier[me / 32] |= 1u << (me % 32);
    if (b->bar_arrived == b->live) {
        release_barrier(b);
        explore_yield(b);
    } else {
        if (b->warp_at_op[me / 32][0]) resolve_activemask(b, me / 32);
        // A lane of a warp now at the barrier may complete a warp group of
        // other lanes: that is only resolved when nothing else can run.
        switch_away(b, &f.sp);
    }
    return f.result;
}

// The threads of a block in one state, as ranges of thread indices:
// "(0,0,0)-(31,0,0), (64,0,0)" (at most a few ranges, then "...").
static bool barrier_at(const Fiber& f, int line) { return line < 0 || f.bar_line == line; }

static int describe_threads(BlockState* b, FiberState state, char* out, size_t n, int line = -1) {
    int count = 0, ranges = 0;
    size_t len = 0;
    out[0] = 0;
    auto in = [&](unsigned i) { return b->fibers[i].state == state && barrier_at(b->fibers[i], line); };
    for (unsigned i = 0; i < b->nthreads; ++i) {
        if (!in(i)) continue;
        ++count;
        bool starts = i == 0 || !in(i - 1);
        bool ends = i + 1 == b->nthreads || !in(i + 1);
        if (!starts && !ends) continue;
        if (starts && ++ranges > 4) { if (ranges == 5 && len + 5 < n) len += snprintf(out + len, n - len, ", ..."); continue; }
        if (ranges > 4) continue;
        const uint3& t = b->fibers[i].tid;
        if (len + 40 >= n) continue;
        if (starts)
            len += snprintf(out + len, n - len, "%s(%u,%u,%u)", ranges > 1 ? ", " : "", t.x, t.y, t.z);
        else
            len += snprintf(out + len, n - len, "-(%u,%u,%u)", t.x, t.y, t.z);
    }
    return count;
}

// Which threads of the block wait where, in words, for a deadlock or a hang
// (``running``: the fiber that was running, -1 for none).
void describe_block(BlockState* b, int running, char* out, size_t n) {
    char bar[160], warp[160], done[160];
    int at_warp = describe_threads(b, AT_WARP, warp, sizeof warp);
    int dead = describe_threads(b, DEAD, done, sizeof done);
    size_t len = 0;
    out[0] = 0;
    if (running >= 0) {
        const uint3& t = b->fibers[running].tid;
        len += snprintf(out + len, n - len, "thread (%u,%u,%u) was running (it never reached the "
                        "barrier or warp operation the others wait at: a spin-wait or an endless "
                        "loop?)", t.x, t.y, t.z);
    }
    // threads at a barrier, grouped by the cell line of the barrier (a few lines at most)
    int lines[4], nlines = 0;
    bool other = false;
    for (unsigned i = 0; i < b->nthreads; ++i) {
        const Fiber& f = b->fibers[i];
        if (f.state != AT_BARRIER) continue;
        int l = f.bar_file && strcmp(f.bar_file, "cell.cu") == 0 ? f.bar_line : 0;
        bool seen = false;
        for (int k = 0; k < nlines; ++k) seen |= lines[k] == l;
        if (!seen) { if (nlines < 4) lines[nlines++] = l; else other = true; }
    }
    for (int k = 0; k < nlines && len < n; ++k) {
        int at_bar = describe_threads(b, AT_BARRIER, bar, sizeof bar, other ? -1 : lines[k]);
        char site[32] = "";
        if (lines[k] > 0 && !other) snprintf(site, sizeof site, " (line %d)", lines[k]);
        len += snprintf(out + len, n - len, "%s%d thread%s wait%s at __syncthreads%s: %s",
                        len ? "; " : "", at_bar, at_bar == 1 ? "" : "s", at_bar == 1 ? "s" : "",
                        site, bar);
        if (other) break;
    }
    if (at_warp && len < n)
        len += snprintf(out + len, n - len, "%s%d wait%s at a warp operation: %s", len ? "; " : "",
                        at_warp, at_warp == 1 ? "s" : "", warp);
    if (dead && len < n)
        len += snprintf(out + len, n - len, "%s%d returned: %s", len ? "; " : "", dead, done);
    int waiting = 0;
    for (unsigned i = 0; i < b->nthreads; ++i)
        waiting += (b->fibers[i].state == NOT_STARTED || b->fibers[i].state == READY) && (int)i != running;
    if (waiting && len < n)
        len += snprintf(out + len, n - len, "%s%d not run yet or ready to run", len ? "; " : "", waiting);
}

[[noreturn]] static void report_deadlock(BlockState* b) {
    int culprit = -1;
    for (unsigned i = 0; i < b->nthreads && culprit < 0; ++i)
        if (b->fibers[i].state == AT_WARP) culprit = (int)i;
    for (unsigned i = 0; i < b->nthreads && culprit < 0; ++i)
        if (b->fibers[i].state == AT_BARRIER) culprit = (int)i;
    if (culprit >= 0) threadIdx = b->fibers[culprit].tid;
    char where[700], msg[900];
    describe_block(b, -1, where, sizeof where);
    snprintf(msg, sizeof msg,
             "deadlock: no thread of the block can go on; a barrier or warp operation is not "
             "reached by every thread it waits for (%s)", where);
    fault_now(WBSIM_FAULT_DEADLOCK, msg);
}

extern "C" void wbsim_yield(void) {
    BlockState* b = t_block;
    if (!__wbsim_fiber_mode) {
        // a thread that waits (__nanosleep in a spin loop) for another of its
        // block: the others must be able to run, so the block becomes fibers
        if (!b || !t_in_kernel || b->nthreads == 1) return;
        promote(b);
    }
    // A fiber that spins on a flag lets the others run.
    int me = b->cur;
    int next = find_runnable(b, me);
    if (next < 0 || next == me) return;
    switch_to(b, &b->fibers[me].sp, next);
}

