// What the parts of the simulator's worker share. Every .cpp file of this
// folder is one part; they are linked into one executable (see worker.cpp for
// the execution model and build.py for the build):
//
//   worker.cpp  the control page, the request loop, main
//   grid.cpp    built-in variables, the pool of OS threads that runs blocks,
//               the watchdog that stops a launch past its time limit
//   fibers.cpp  a block's threads as fibers: context switch, scheduling,
//               __syncthreads, deadlock detection
//   warp.cpp    warp operations (shuffle, vote, match, reduce, __activemask)
//   faults.cpp  the fault record, signal handlers, assert and __trap
//   printf.cpp  device printf and the clocks
//   access.cpp  instrumented launches: the hooks of instrumented kernel code,
//               per-warp buffers of memory accesses and their consumers (access.h)
//   access_counts.cpp  the profiler's consumer: requests, sectors, wavefronts
// Whole programs link every part but worker.cpp with their own runtime API
// (../program_runtime/cudart.cpp), which owns the control page instead.
#ifndef WBSIM_RUNTIME_H
#define WBSIM_RUNTIME_H
#include <pthread.h>
#include <atomic>
#include <utility>
#include <vector>
#include <cstddef>
#include <cstdint>

#include "wbsim_abi.h"
#include "wbsim_control.h"

// Thread-locals of the worker itself (never read by kernel libraries): the
// executable's own TLS block, reached without the GOT as `static` ones are.
#define WBSIM_LE __attribute__((tls_model("local-exec")))

// -- worker.cpp ---------------------------------------------------------------
// The control page at the start of the arena (fault record, printf buffer).
extern wbsim_control* g_ctl;

// -- faults.cpp ---------------------------------------------------------------
void copy_text(char* dst, size_t cap, const char* src);
// Block, thread and kernel of the calling OS thread into the record.
void record_location(wbsim_fault* f);
// Returns false when another thread already reported a fault.
bool begin_fault();
[[noreturn]] void end_fault(int kind);
// Called by end_fault with the record complete, before the process ends (a
// whole program reports the fault itself: program_runtime/cudart.cpp).
extern void (*g_fault_hook)(int kind);
// Called by a failed device assert with its message (GPU's words); a whole program's
// runtime sets it (as a GPU does, the thread ends and the launch goes on: the hook
// throws), else the assert is a fault.
extern void (*g_assert_hook)(const char* message);
[[noreturn]] void park_forever();
[[noreturn]] void fault_now(int kind, const char* msg);
void setup_thread_signals();
void install_handlers();

// -- grid.cpp -----------------------------------------------------------------
extern __thread const wbsim_kernel* t_kernel WBSIM_LE;  // kernel running on this OS thread
extern __thread int t_in_kernel WBSIM_LE;
// Per OS thread that runs blocks: signal stack, dynamic shared memory.
void thread_setup();
// Starts `helpers` pool threads besides the calling one, and the watchdog.
void start_threads(unsigned helpers);
// Launch bookkeeping for the watchdog (timeout_ms 0: no limit).
void launch_begins(uint32_t timeout_ms);
// The next launch is cooperative: every block gets an OS thread of its own, so
// that this_grid().sync() can hold them all.
extern bool g_cooperative;
// The next launch explores a schedule (not 0: the seed): its blocks run on one
// OS thread in a random order, each block's threads as fibers switched in a
// random order (fibers.cpp), so that results that depend on the order show.
extern uint64_t g_schedule_seed;
// Set while this OS thread waits for the other blocks at this_grid().sync().
extern __thread int t_grid_wait;
// How many blocks wait at this_grid().sync(), in words ("" when none).
void describe_grid_wait(char* out, size_t n);
#ifdef WBSIM_CHECKED
// memcheck's build: redzones among the library's thread-locals (offsets from
// its anchor variable, bytes), poisoned by each OS thread that runs blocks.
extern std::vector<std::pair<int64_t, uint64_t>> g_redzones;
extern void* g_redzone_library;
#endif
// Let the watchdog signal (stop) this thread, or forget it.
void watch_thread(pthread_t t, bool add);
void launch_ends();
// Set when a launch is to start no more blocks (a failed assert in a whole program);
// cleared by launch_begins.
extern std::atomic<int> g_launch_abandoned;
// True when the watchdog is stopping the launch running now (a late SIGUSR1
// meant for a launch that has finished is ignored).
bool stopping_current_launch();

// -- fibers.cpp ---------------------------------------------------------------
extern size_t g_stack_bytes;
const size_t kGuardBytes = 4096;
const unsigned kMaxThreads = 1024;
// Warp opcodes run 1..WBSIM_REDUCE_XOR; __activemask takes slot 0.
const int kOpSlots = WBSIM_REDUCE_XOR + 1;
inline int op_slot(int op) { return op > 0 && op < kOpSlots ? op : 0; }

enum FiberState : uint8_t { NOT_STARTED, READY, AT_BARRIER, AT_WARP, DEAD };

struct Fiber {
    void* sp;
    FiberState state;
    uint8_t bar_op;
    int result;
    uint3 tid;
    wbsim_warp_req* req;
    const void* site;  // where the current warp operation was called (for __activemask)
    const char* bar_file;  // where the barrier it waits at was called
    int bar_line;
};

struct Stack {
    char* base;   // lowest usable address (above the guard page)
    size_t size;
    bool in_arena;  // part of the block's arena (no guard page of its own)
};
// Fibers of a cooperative launch beyond which their stacks share one mapping per
// block, without guard pages: each guarded stack costs the process two memory
// mappings, and a process gets about 65,000 (vm.max_map_count).
const uint64_t kGuardedCooperativeFibers = 16384;
extern uint64_t g_cooperative_fibers;  // of the cooperative launch running

// The block running on this OS thread.
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
    char* arena = nullptr;  // one mapping for every fiber stack (big cooperative launches)
    size_t arena_bytes = 0;
};

extern __thread BlockState* t_block WBSIM_LE;
BlockState* block_state();
void free_block_state();  // the calling OS thread's block state and fiber stacks

inline unsigned linear_tid(const uint3& t) {
    return t.x + blockDim.x * (t.y + blockDim.y * t.z);
}

// Turn a block in direct mode into fibers (first barrier or warp operation).
void promote(BlockState* b);
// The schedule being explored on this OS thread (a random state; 0: none).
extern __thread uint64_t t_explore;
// Run the current block with every thread a fiber from the start, switched in
// an order drawn from t_explore.
void run_block_explored(BlockState* b);
// Leave the current fiber (already marked blocked or dead) for the next one.
void switch_away(BlockState* b, void** save);
// Which threads of the block wait where, in words (running: the fiber running, or -1).
void describe_block(BlockState* b, int running, char* out, size_t n);

// -- warp.cpp -----------------------------------------------------------------
// Complete every group of warp w whose lanes are all there.
bool try_complete_warp(BlockState* b, unsigned w, bool ignore_barrier);
// Release the lanes of warp w waiting at __activemask, once they can be grouped.
bool resolve_activemask(BlockState* b, unsigned w);

// -- printf.cpp ---------------------------------------------------------------
uint64_t now_ns();  // steady clock
#endif
