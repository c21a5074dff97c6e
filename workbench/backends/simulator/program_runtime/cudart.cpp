// The CUDA runtime of whole programs on the simulator: start and exit, errors, the
// device, device output and the profiler API (see cudart_internal.h for the parts).
//
//  * A fault (bad address, __trap, deadlock, time limit) ends the program: device printf
//    output so far is written, then one message on stderr (and in $WBSIM_FAULT_FILE for
//    the workbench) saying what and where.
//  * A failed device assert does what it does on a GPU: the asserting thread ends, its
//    message goes to stderr at the next synchronising call, which returns cudaErrorAssert,
//    and so does every call after it (the error is sticky) until cudaDeviceReset.
//  * The runtime starts on the first CUDA call; at exit (on_exit) it writes the device
//    output still held and ends the process at once: the pool threads never stop.
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudart_internal.h"

wbsim_control* g_ctl = nullptr;
cudaError_t g_sticky = cudaSuccess;

// -- errors ------------------------------------------------------------------------
static thread_local cudaError_t g_last_error = cudaSuccess;  // per host thread, as CUDA's

cudaError_t fail(cudaError_t e, const char* fmt, ...) {
    g_last_error = e;
    if (fmt) {  // what a GPU would leave unsaid, on stderr
        char text[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        fflush(stdout);
        fprintf(stderr, "wbsim: %s (%s)\n", text, cudaGetErrorName(e));
    }
    return e;
}

std::string format_text(const char* fmt, ...) {
    char text[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

// A sticky error is returned by every later API call (API_ENTER), each of which sets the last
// error; cudaGetLastError itself resets it as for any other error (CUDA 13 on an H200: the
// second of two calls after a failed assert returns cudaSuccess).
extern "C" cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) {
    return g_last_error;
}

// -- the profiler: no profiler watches a simulator program -------------------------------------
extern "C" cudaError_t cudaProfilerStart(void) { API_ENTER(); return cudaSuccess; }
extern "C" cudaError_t cudaProfilerStop(void) { API_ENTER(); return cudaSuccess; }

// -- device output: printf and failed asserts ------------------------------------------------
static std::mutex g_assert_mu;
static std::string g_assert_text;   // messages of failed asserts not yet written
static bool g_assert_failed = false;  // in the launch running now

void note_failed_assert(const char* message) {
    std::lock_guard<std::mutex> lk(g_assert_mu);
    if (g_assert_text.size() < (64u << 10)) {
        g_assert_text += message;
        g_assert_text += '\n';
    }
    g_assert_failed = true;
}
bool take_failed_assert() {
    std::lock_guard<std::mutex> lk(g_assert_mu);
    bool failed = g_assert_failed;
    g_assert_failed = false;
    return failed;
}

[[noreturn]] static void assert_hook(const char* message) {
    note_failed_assert(message);
    g_launch_abandoned.store(1);  // no block starts after this one (the GPU ends the launch)
    throw __wbsim_thread_exit();
}

static void write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

// from_fault: in a signal handler (no stdio, no locks).
static void write_device_output(bool from_fault) {
    if (!g_ctl) return;
    uint64_t n = __atomic_load_n(&g_ctl->printf_committed, __ATOMIC_ACQUIRE);
    uint64_t dropped = g_ctl->printf_dropped;
    const char* buf = (const char*)g_ctl + WBSIM_PRINTF_OFFSET;
    if (from_fault) {
        write_all(1, buf, n);
        return;
    }
    if (n) {
        fwrite(buf, 1, n, stdout);
        fflush(stdout);
    }
    if (dropped)
        fprintf(stderr, "wbsim: %llu bytes of device printf output were dropped (more than %u bytes "
                "in one launch)\n", (unsigned long long)dropped, WBSIM_PRINTF_BYTES);
    g_ctl->printf_len = g_ctl->printf_committed = g_ctl->printf_dropped = 0;
    std::string asserts;
    {
        std::lock_guard<std::mutex> lk(g_assert_mu);
        asserts.swap(g_assert_text);
    }
    if (!asserts.empty()) {
        fputs(asserts.c_str(), stderr);
        fflush(stderr);
    }
}
void flush_device_output() { write_device_output(false); }

// -- start, exit, faults -------------------------------------------------------------
static bool g_started = false;

static const char* signal_text(int sig) {
    switch (sig) {
        case SIGSEGV: return "invalid memory access (SIGSEGV)";
        case SIGBUS: return "invalid memory access (SIGBUS)";
        case SIGFPE: return "arithmetic error (SIGFPE: integer division by zero?)";
        case SIGILL: return "illegal instruction (SIGILL)";
        case SIGABRT: return "abort (SIGABRT)";
        default: return "signal";
    }
}

static void on_fault(int kind) {
    const wbsim_fault& f = g_ctl->fault;
    bool in_kernel = f.has_block != 0;
    write_device_output(true);
    char what[1300], where[300] = "", address[300] = "";
    if (kind == WBSIM_FAULT_SIGNAL && strncmp(f.message, "stack overflow", 14) != 0) {
        if (f.signo == SIGSEGV || f.signo == SIGBUS) {
            describe_address(address, sizeof address, f.address, in_kernel);
            snprintf(what, sizeof what, "%s at address 0x%llx%s", signal_text(f.signo),
                     (unsigned long long)f.address, address);
        } else {
            snprintf(what, sizeof what, "%s", signal_text(f.signo));
        }
    } else {
        snprintf(what, sizeof what, "%s", f.message);
    }
    if (in_kernel)
        snprintf(where, sizeof where, "kernel '%s' faulted in block (%u,%u,%u), thread (%u,%u,%u)",
                 f.kernel, f.block[0], f.block[1], f.block[2], f.thread[0], f.thread[1], f.thread[2]);
    else
        snprintf(where, sizeof where, "the program faulted in host code");
    const char* gpu = "";
    if (in_kernel && kind == WBSIM_FAULT_SIGNAL)
        gpu = "\nwbsim: on a GPU: cudaErrorIllegalAddress (\"an illegal memory access was encountered\"), "
              "returned by the next synchronising call";
    else if (in_kernel && kind == WBSIM_FAULT_TRAP)
        gpu = "\nwbsim: on a GPU: cudaErrorLaunchFailure (\"unspecified launch failure\"), returned by the "
              "next synchronising call";
    char msg[2000];
    int len = snprintf(msg, sizeof msg, "wbsim: %s: %s%s\n", where, what, gpu);
    if (len < 0) return;
    if ((size_t)len >= sizeof msg) len = (int)sizeof msg - 1;
    write_all(2, msg, (size_t)len);
    if (const char* path = getenv("WBSIM_FAULT_FILE")) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) { write_all(fd, msg + 7, (size_t)len - 7); close(fd); }
    }
}

static void at_exit(int status, void*) {
    // The pool threads wait for work for ever: end the process here, after
    // writing what the program and its kernels wrote, instead of destroying their state.
    flush_device_output();
    std::cout.flush();
    std::cerr.flush();
    fflush(nullptr);
    _exit(status);
}

static std::recursive_mutex g_api;

ApiLock start() {
    if (t_in_kernel)  // the host thread that launched the kernel holds the lock
        fault_now(WBSIM_FAULT_UNSUPPORTED, "a CUDA runtime call in device code, which the simulator "
                  "does not support");
    ApiLock lock(g_api);
    if (g_started) return lock;
    g_started = true;
    load_properties();
    void* page = mmap(nullptr, WBSIM_ARENA_RESERVED, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_ctl = (wbsim_control*)page;
    g_ctl->magic = WBSIM_CONTROL_MAGIC;
    g_ctl->printf_capacity = WBSIM_PRINTF_BYTES;
    g_fault_hook = on_fault;
    g_assert_hook = assert_hook;
    reserve_memory();
    thread_setup();
    install_handlers();
    unsigned threads = 0;
    if (const char* t = getenv("WBSIM_THREADS")) threads = (unsigned)atoi(t);
    if (threads == 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
    }
    start_threads(threads - 1);
    on_exit(at_exit, nullptr);
    return lock;
}

// Output appears line by line, as on a terminal, even into a pipe.
__attribute__((constructor)) static void line_buffered() { setvbuf(stdout, nullptr, _IOLBF, 0); }
