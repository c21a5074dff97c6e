/* The interface between kernel libraries and the simulator's worker runtime.
 *
 * Kernel code (compiled into a shared library with the prelude) calls these
 * functions and reads these thread-local variables; the worker executable
 * (the .cpp files of native/) defines them and exports them with -rdynamic.
 * Change WBSIM_ABI_VERSION whenever anything here changes.
 */
#ifndef WBSIM_ABI_H
#define WBSIM_ABI_H
#include <stddef.h>
#include "vector_types.h"

#define WBSIM_ABI_VERSION 9

#ifdef __cplusplus
extern "C" {
#endif

#define WBSIM_IE __attribute__((tls_model("initial-exec")))

/* In a kernel library built to count accesses (-fsanitize=thread: see
 * backends/simulator/instrumented.py) the variables kernel code only reads
 * are declared const: reads of const objects are not instrumented, so they
 * cost no call. The worker, which writes them, is not built so. */
#if defined(__SANITIZE_THREAD__) && defined(__cplusplus)
#define WBSIM_READ_ONLY const
#else
#define WBSIM_READ_ONLY
#endif

/* CUDA's built-in variables: one copy per OS thread; the scheduler writes
 * threadIdx whenever it switches between simulated threads. */
extern __thread WBSIM_READ_ONLY uint3 threadIdx WBSIM_IE;
extern __thread WBSIM_READ_ONLY uint3 blockIdx WBSIM_IE;
extern __thread WBSIM_READ_ONLY dim3 blockDim WBSIM_IE;
extern __thread WBSIM_READ_ONLY dim3 gridDim WBSIM_IE;
/* Nonzero once the current block runs its threads as fibers. */
extern __thread int __wbsim_fiber_mode WBSIM_IE;
/* This OS thread's dynamic shared memory (extern __shared__). */
extern __thread unsigned char* WBSIM_READ_ONLY __wbsim_dsmem WBSIM_IE;

typedef struct wbsim_kernel {
    const char* name;
    /* Runs every thread of the current block in turn, in "direct mode". */
    void (*run_block)(void* args);
    /* Runs the current thread (threadIdx already set); used by fibers. */
    void (*run_thread)(void* args);
    void* args;
} wbsim_kernel;

typedef struct wbsim_launch {
    void** argv;              /* one pointer per kernel parameter */
    const unsigned* argsize;  /* byte size of each argument as sent */
    unsigned nargs;
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    char* error;              /* message buffer for argument errors */
    size_t error_size;
} wbsim_launch;

enum wbsim_warp_opcode {
    WBSIM_SHFL_IDX = 1, WBSIM_SHFL_UP, WBSIM_SHFL_DOWN, WBSIM_SHFL_XOR,
    WBSIM_BALLOT, WBSIM_ANY, WBSIM_ALL, WBSIM_SYNCWARP, WBSIM_MATCH_ANY, WBSIM_MATCH_ALL,
    WBSIM_REDUCE_ADD, WBSIM_REDUCE_MIN_U, WBSIM_REDUCE_MAX_U, WBSIM_REDUCE_MIN_I,
    WBSIM_REDUCE_MAX_I, WBSIM_REDUCE_AND, WBSIM_REDUCE_OR, WBSIM_REDUCE_XOR,
    WBSIM_ACTIVEMASK = 100
};

typedef struct wbsim_warp_req {
    int op;
    unsigned mask;
    int arg;       /* source lane, delta or lane mask */
    int width;
    unsigned size; /* bytes of val */
    unsigned pred; /* match_all: out predicate */
    unsigned char val[16];
    unsigned char out[16];
} wbsim_warp_req;

enum wbsim_barrier_opcode { WBSIM_BAR_SYNC = 0, WBSIM_BAR_COUNT, WBSIM_BAR_AND, WBSIM_BAR_OR };

int wbsim_run_grid(const wbsim_kernel* kernel, const unsigned grid[3], const unsigned block[3],
                   size_t shared_bytes);
void wbsim_finish_block(void);
/* this_grid().sync(): every thread of every block of a cooperative launch. */
void wbsim_grid_sync(void);
/* 1 inside a cooperative launch (this_grid().is_valid()). */
int wbsim_grid_cooperative(void);
/* file and line: where the barrier was called (named in deadlock and hang reports). */
int wbsim_barrier(int op, int predicate, const char* file, int line);
void wbsim_warp(wbsim_warp_req* req);
unsigned wbsim_activemask(void);
int wbsim_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void wbsim_assert_fail(const char* expr, const char* file, int line, const char* func)
    __attribute__((noreturn));
void wbsim_trap(const char* what) __attribute__((noreturn));
void wbsim_yield(void);
unsigned long long wbsim_clock64(void);
/* clock(): in a kernel the cycle counter (as clock64), in host code the C library's. */
long wbsim_clock(void);
unsigned long long wbsim_globaltimer(void);
/* A build that counts accesses: the block loop says which thread runs next. */
void wbsim_access_thread(unsigned tid);
/* A persistent kernel's idle wait (a ring's dispatcher with nothing to do): sleep while the
 * 32-bit word (memory the host shares) holds `expected`, for at most timeout_us; the host
 * wakes it (a futex: FUTEX_WAKE on the same word) after it changes the word. */
void wbsim_wait_word(const unsigned* word, unsigned expected, unsigned timeout_us);
/* Offer this OS thread's CPU to another thread that waits for one (sched_yield). */
void wbsim_yield_cpu(void);

#ifdef __cplusplus
}
#endif
#endif
