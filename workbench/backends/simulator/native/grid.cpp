// Grid execution: the built-in variables, blocks handed out to a pool of OS
// threads (a block runs to completion on one OS thread, so __shared__
// variables are thread_local), and the watchdog that ends a launch past its
// time limit.
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "access.h"
#include "runtime.h"

#ifdef WBSIM_CHECKED
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
std::vector<std::pair<int64_t, uint64_t>> g_redzones;
void* g_redzone_library = nullptr;
#endif

// -- built-in variables (exported to kernel libraries) --------------------------
extern "C" {
__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;
__thread int __wbsim_fiber_mode;
__thread unsigned char* __wbsim_dsmem;
}

__thread const wbsim_kernel* t_kernel;
__thread int t_in_kernel;
// The launch running now and the one the watchdog is stopping.
static std::atomic<uint64_t> g_current_launch{0};
static std::atomic<uint64_t> g_killed_launch{~0ull};

// Dynamic shared memory per OS thread: this much at first, grown (never
// shrunk) when a launch asks for more.
static const size_t kDynamicSharedBytes = 256 * 1024;
static __thread size_t t_dsmem_bytes;

// -- grid execution on a pool of OS threads ------------------------------------
struct Grid {
    const wbsim_kernel* kernel;
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    uint64_t nblocks;
    std::atomic<uint64_t> next{0};
};

static void ensure_dynamic_shared(size_t n) {
#ifdef WBSIM_CHECKED
    // the launch's dynamic shared memory is its size, not the buffer's: the
    // rest is poisoned (memcheck finds an access past it), until it grows
    if (__wbsim_dsmem) __asan_unpoison_memory_region(__wbsim_dsmem, t_dsmem_bytes);
#endif
    if (n <= t_dsmem_bytes) return;
    size_t size = (n + 4095) & ~(size_t)4095;
    void* p = aligned_alloc(128, size);
    if (!p) fault_now(WBSIM_FAULT_ERROR, "cannot allocate the block's dynamic shared memory");
    free(__wbsim_dsmem);
    __wbsim_dsmem = (unsigned char*)p;
    t_dsmem_bytes = size;
}

static void enter_grid(Grid* g) {
    ensure_dynamic_shared(g->shared_bytes);
#ifdef WBSIM_CHECKED
    if (t_dsmem_bytes > g->shared_bytes)
        __asan_poison_memory_region(__wbsim_dsmem + g->shared_bytes, t_dsmem_bytes - g->shared_bytes);
    if (g_redzone_library) {  // this OS thread's copy of the library's thread-locals
        char* anchor = (char*)dlsym(g_redzone_library, "__wbsim_tls_anchor");
        if (anchor)
            for (const auto& z : g_redzones) __asan_poison_memory_region(anchor + z.first, z.second);
    }
#endif
    BlockState* b = block_state();
    b->kernel = g->kernel;
    b->nthreads = g->block[0] * g->block[1] * g->block[2];
    b->nwarps = (b->nthreads + 31) / 32;
    blockDim = dim3(g->block[0], g->block[1], g->block[2]);
    gridDim = dim3(g->grid[0], g->grid[1], g->grid[2]);
    t_kernel = g->kernel;
    t_in_kernel = 1;
    if (g_access_on) access_enter_grid(g->shared_bytes);
}

static void leave_grid() {
    t_in_kernel = 0;
    if (g_access_on) access_leave_grid();
}

static void run_block(Grid* g, uint64_t i) {
    uint64_t gxy = (uint64_t)g->grid[0] * g->grid[1];
    blockIdx.x = (unsigned)(i % g->grid[0]);
    blockIdx.y = (unsigned)((i / g->grid[0]) % g->grid[1]);
    blockIdx.z = (unsigned)(i / gxy);
    threadIdx = uint3{0, 0, 0};
    __wbsim_fiber_mode = 0;
    if (g_access_on) access_block_begins();
    if (__builtin_expect(t_explore != 0, 0))
        run_block_explored(t_block);
    else
        g->kernel->run_block(g->kernel->args);
    if (g_access_on) access_block_ends();
}

std::atomic<int> g_launch_abandoned{0};

static void run_blocks(Grid* g) {
    enter_grid(g);
    for (;;) {
        uint64_t i = g->next.fetch_add(1, std::memory_order_relaxed);
        if (i >= g->nblocks || g_launch_abandoned.load(std::memory_order_relaxed)) break;
        run_block(g, i);
    }
    leave_grid();
}

// -- exploring a schedule: the blocks in a random order, on this OS thread -------
uint64_t g_schedule_seed = 0;

static uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void run_blocks_explored(Grid* g) {
    enter_grid(g);
    uint64_t state = g_schedule_seed, n = g->nblocks;
    if (n <= (1u << 22)) {  // a random permutation
        std::vector<uint64_t> order(n);
        for (uint64_t i = 0; i < n; ++i) order[i] = i;
        for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[splitmix(state) % i]);
        t_explore = splitmix(state) | 1;
        for (uint64_t i = 0; i < n; ++i) run_block(g, order[i]);
    } else {  // a huge grid: a random rotation, forwards or backwards
        uint64_t start = splitmix(state) % n;
        bool back = splitmix(state) & 1;
        t_explore = splitmix(state) | 1;
        for (uint64_t i = 0; i < n; ++i) run_block(g, back ? (start + n - i) % n : (start + i) % n);
    }
    t_explore = 0;
    leave_grid();
}

// -- cooperative launches: a thread per block, and the grid barrier -------------
bool g_cooperative = false;
static std::mutex g_gs_mu;
static std::condition_variable g_gs_cv;
static uint64_t g_gs_total, g_gs_arrived, g_gs_finished, g_gs_generation;
static __thread int t_grid_leader;

[[noreturn]] static void grid_deadlock() {
    char msg[300];
    snprintf(msg, sizeof msg,
             "deadlock: %llu block%s wait%s at this_grid().sync() but %llu returned without "
             "reaching it; every thread of every block must call it (on the GPU this hangs)",
             (unsigned long long)g_gs_arrived, g_gs_arrived == 1 ? "" : "s",
             g_gs_arrived == 1 ? "s" : "", (unsigned long long)g_gs_finished);
    fault_now(WBSIM_FAULT_DEADLOCK, msg);
}

// The leader of each block waits here for the leaders of all the others.
static void grid_barrier() {
    std::unique_lock<std::mutex> lk(g_gs_mu);
    uint64_t generation = g_gs_generation;
    if (++g_gs_arrived == g_gs_total) {
        g_gs_arrived = 0;
        ++g_gs_generation;
        g_gs_cv.notify_all();
        return;
    }
    if (g_gs_finished && g_gs_arrived + g_gs_finished == g_gs_total) grid_deadlock();
    t_grid_wait = 1;
    g_gs_cv.wait(lk, [&] { return g_gs_generation != generation; });
    t_grid_wait = 0;
}

__thread int t_grid_wait;

void describe_grid_wait(char* out, size_t n) {
    out[0] = 0;
    if (!g_cooperative) return;
    // read without the lock: the launch is being stopped
    snprintf(out, n, "; %llu of %llu blocks wait at this_grid().sync()",
             (unsigned long long)g_gs_arrived, (unsigned long long)g_gs_total);
}

extern "C" int wbsim_grid_cooperative(void) { return g_cooperative ? 1 : 0; }

extern "C" void wbsim_grid_sync(void) {
    if (!g_cooperative)
        fault_now(WBSIM_FAULT_UNSUPPORTED,
                  "this_grid().sync() needs a cooperative launch: call the kernel with "
                  "cooperative=True (as cudaLaunchCooperativeKernel on the GPU)");
    // All threads of the block arrive; the first to go on waits for the other
    // blocks while holding this OS thread (so no other thread of the block
    // runs); the second barrier keeps the block until it is back.
    wbsim_barrier(WBSIM_BAR_SYNC, 0, nullptr, 0);
    if (!t_grid_leader) {
        t_grid_leader = 1;
        grid_barrier();
    }
    wbsim_barrier(WBSIM_BAR_SYNC, 0, nullptr, 0);
    t_grid_leader = 0;
}

struct CoopBlock {
    Grid* g;
    uint64_t index;
    pthread_t thread;
};

static void* coop_thread(void* arg) {
    CoopBlock* cb = (CoopBlock*)arg;
    thread_setup();
    watch_thread(pthread_self(), true);
    enter_grid(cb->g);
    run_block(cb->g, cb->index);
    leave_grid();
    watch_thread(pthread_self(), false);
    free_block_state();  // this thread ends: its fibers' stacks and block state go with it
    free(__wbsim_dsmem);
    __wbsim_dsmem = nullptr;
    t_dsmem_bytes = 0;
    std::lock_guard<std::mutex> lk(g_gs_mu);
    ++g_gs_finished;
    if (g_gs_arrived && g_gs_arrived + g_gs_finished == g_gs_total) grid_deadlock();
    return nullptr;
}

static void run_cooperative(Grid* g) {
    g_gs_total = g->nblocks;
    g_cooperative_fibers = g->nblocks * g->block[0] * g->block[1] * g->block[2];
    g_gs_arrived = g_gs_finished = 0;
    std::vector<CoopBlock> blocks(g->nblocks);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (uint64_t i = 0; i < g->nblocks; ++i) {
        blocks[i] = CoopBlock{g, i, pthread_t()};
        if (pthread_create(&blocks[i].thread, &attr, coop_thread, &blocks[i]) != 0)
            fault_now(WBSIM_FAULT_ERROR, "cannot start a thread for every block of the cooperative launch");
    }
    pthread_attr_destroy(&attr);
    for (auto& b : blocks) pthread_join(b.thread, nullptr);
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

void thread_setup() {
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
    if (g_cooperative) {
        run_cooperative(&g);
        return 0;
    }
    if (g_schedule_seed) {
        run_blocks_explored(&g);
        return 0;
    }
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

// -- the watchdog: ends a launch that runs past its time limit -------------------
static std::mutex g_wd_mu;
static std::condition_variable g_wd_cv;
static uint64_t g_wd_deadline_ns = 0;  // 0: no launch running
static uint64_t g_wd_launches = 0;     // launches started so far
static bool g_wd_idle = true;          // the watchdog waits with no deadline
static uint64_t g_wd_wait_until = 0;   // else: when it wakes up next
static std::vector<pthread_t> g_kernel_threads;

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

bool stopping_current_launch() {
    return g_killed_launch.load() == g_current_launch.load();
}

void launch_begins(uint32_t timeout_ms) {
    bool wake;
    {
        std::lock_guard<std::mutex> lk(g_wd_mu);
        g_current_launch.store(++g_wd_launches);
        g_launch_abandoned.store(0);
        g_wd_deadline_ns = timeout_ms ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
        wake = g_wd_deadline_ns != 0 && (g_wd_idle || g_wd_deadline_ns < g_wd_wait_until);
    }
    if (wake) g_wd_cv.notify_one();
}

void watch_thread(pthread_t t, bool add) {
    std::lock_guard<std::mutex> lk(g_wd_mu);
    if (add) {
        g_kernel_threads.push_back(t);
    } else {
        for (size_t i = 0; i < g_kernel_threads.size(); ++i)
            if (pthread_equal(g_kernel_threads[i], t)) {
                g_kernel_threads.erase(g_kernel_threads.begin() + (long)i);
                break;
            }
    }
}

void launch_ends() {
    std::lock_guard<std::mutex> lk(g_wd_mu);
    g_wd_deadline_ns = 0;
}

void start_threads(unsigned helpers) {
    g_kernel_threads.push_back(pthread_self());
    for (unsigned i = 0; i < helpers; ++i) {
        g_pool.threads.emplace_back(pool_thread);
        g_kernel_threads.push_back(g_pool.threads.back().native_handle());
    }
    std::thread(watchdog).detach();
}
