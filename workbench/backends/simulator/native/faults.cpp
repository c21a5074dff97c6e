// Faults: the record a fault leaves on the control page, the signal handlers
// that fill it, assert and __trap. A fault ends the process; the notebook side
// reads the record (workbench/backends/simulator/faults.py) and starts a new
// worker.
#include <pthread.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "runtime.h"

static std::atomic<int> g_faulted{0};

// -- the fault record ------------------------------------------------------------
void copy_text(char* dst, size_t cap, const char* src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; ++i) dst[i] = src[i];
    dst[i] = 0;
}

void record_location(wbsim_fault* f) {
    f->has_block = t_in_kernel;
    f->has_thread = t_in_kernel;
    f->block[0] = blockIdx.x; f->block[1] = blockIdx.y; f->block[2] = blockIdx.z;
    f->thread[0] = threadIdx.x; f->thread[1] = threadIdx.y; f->thread[2] = threadIdx.z;
    if (t_kernel) copy_text(f->kernel, sizeof f->kernel, t_kernel->name);
}

bool begin_fault() {
    int expected = 0;
    return g_faulted.compare_exchange_strong(expected, 1);
}

void (*g_fault_hook)(int kind) = nullptr;
void (*g_assert_hook)(const char* message) = nullptr;

[[noreturn]] void end_fault(int kind) {
    __atomic_store_n(&g_ctl->fault.kind, kind, __ATOMIC_SEQ_CST);
    if (g_fault_hook) g_fault_hook(kind);
    _exit(86);
}

[[noreturn]] void park_forever() {
    for (;;) pause();
}

[[noreturn]] void fault_now(int kind, const char* msg) {
    if (!begin_fault()) park_forever();
    wbsim_fault* f = &g_ctl->fault;
    record_location(f);
    copy_text(f->message, sizeof f->message, msg);
    end_fault(kind);
}

// -- assert and __trap -------------------------------------------------------------
extern "C" void wbsim_assert_fail(const char* expr, const char* file, int line, const char* func) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s:%d: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.",
             file, line, func, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
             threadIdx.z, expr);
    if (g_assert_hook) g_assert_hook(msg);  // a whole program's: ends this thread only
    if (!begin_fault()) park_forever();
    record_location(&g_ctl->fault);
    g_ctl->fault.line = line;
    copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, msg);
    end_fault(WBSIM_FAULT_ASSERT);
}

extern "C" void wbsim_trap(const char* what) {
    fault_now(WBSIM_FAULT_TRAP, what ? what : "__trap() called");
}

// -- signals ------------------------------------------------------------------
// This OS thread's own stack (a block in direct mode runs on it), to name a
// fault just below it a stack overflow.
static __thread uintptr_t t_stack_lo, t_stack_hi;

static void on_signal(int sig, siginfo_t* info, void*) {
    if (sig == SIGUSR1) {  // the watchdog: the time limit passed
        if (!t_in_kernel) return;  // an idle pool thread
        if (!stopping_current_launch()) return;  // too late
        if (t_grid_wait) park_forever();  // a block that is not the one holding the grid up
        if (!begin_fault()) park_forever();
        record_location(&g_ctl->fault);
        char msg[900] = "time limit exceeded", grid[120];
        describe_grid_wait(grid, sizeof grid);
        BlockState* b = t_block;
        if (b && __wbsim_fiber_mode && b->cur >= 0) {
            char where[700];
            describe_block(b, b->cur, where, sizeof where);
            snprintf(msg, sizeof msg, "time limit exceeded: %s%s", where, grid);
        } else if (grid[0]) {
            snprintf(msg, sizeof msg, "time limit exceeded: this block never reached "
                     "this_grid().sync()%s", grid);
        }
        copy_text(g_ctl->fault.message, sizeof g_ctl->fault.message, msg);
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
            what = "stack overflow: the thread used more than the simulator's fiber stack "
                   "(deep or endless recursion, or large local arrays)";
    }
    if ((sig == SIGSEGV || sig == SIGBUS) && t_in_kernel && t_stack_lo) {
        uintptr_t a = (uintptr_t)f->address;
        if (a + (1u << 20) >= t_stack_lo && a < t_stack_lo + 4096)
            what = "stack overflow: the thread used more than its stack "
                   "(deep or endless recursion, or large local arrays)";
    }
    copy_text(f->message, sizeof f->message, what);
    end_fault(WBSIM_FAULT_SIGNAL);
}

void setup_thread_signals() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* lo = nullptr;
        size_t size = 0;
        if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
            t_stack_lo = (uintptr_t)lo;
            t_stack_hi = (uintptr_t)lo + size;
        }
        pthread_attr_destroy(&attr);
    }
    stack_t ss;
    ss.ss_size = 64 * 1024;
    ss.ss_sp = malloc(ss.ss_size);
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
}

void install_handlers() {
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
