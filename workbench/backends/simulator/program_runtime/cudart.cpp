// The CUDA runtime API of whole programs on the CPU simulator (declared in
// wbsim_program.h), on top of the worker runtime's grid, fibers, warps,
// faults and printf (../native/, every part but worker.cpp).
//
//  * Device memory (cudaMalloc) is one reserved region; host code cannot
//    touch it, as on a GPU: it is readable and writable only while a kernel,
//    a copy or a memset runs, so a host dereference of a device pointer
//    faults with a message that says so. Managed memory (cudaMallocManaged)
//    is a second region, always accessible; pinned host memory is malloc's.
//  * Launches, copies and everything "async" are synchronous (streams are
//    in order; events take the host's clock when recorded).
//  * A fault (bad address, assert, __trap, deadlock, time limit) ends the
//    program: device printf output so far is written, then one message on
//    stderr (and in $WBSIM_FAULT_FILE for the workbench) saying what and where.
//  * The runtime starts on the first CUDA call; at exit (on_exit) it flushes
//    the streams and ends the process at once: the pool threads never stop.
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"
#include "wbsim_program.h"

wbsim_control* g_ctl = nullptr;

// -- errors ------------------------------------------------------------------------
static thread_local cudaError_t g_last_error = cudaSuccess;  // per host thread, as CUDA's

static cudaError_t fail(cudaError_t e, const char* fmt = nullptr, ...) {
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

struct ErrorText { cudaError_t code; const char* name; const char* text; };
static const ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

extern "C" const char* cudaGetErrorString(cudaError_t e) {
    for (const auto& t : kErrors) if (t.code == e) return t.text;
    return "unrecognized error code";
}
extern "C" const char* cudaGetErrorName(cudaError_t e) {
    for (const auto& t : kErrors) if (t.code == e) return t.name;
    return "cudaErrorUnknown";
}
extern "C" cudaError_t cudaGetLastError(void) { cudaError_t e = g_last_error; g_last_error = cudaSuccess; return e; }
extern "C" cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

// -- the device --------------------------------------------------------------------
// The virtual device's properties: $WBSIM_DEVICE ("key=value;..." from the
// workbench), else an H100's.
static cudaDeviceProp g_prop;

static void load_properties() {
    cudaDeviceProp& p = g_prop;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "NVIDIA H100 80GB HBM3 (simulated)");
    p.totalGlobalMem = 80ull << 30; p.sharedMemPerBlock = 48 << 10; p.regsPerBlock = 65536;
    p.warpSize = 32; p.memPitch = 2147483647; p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024; p.maxThreadsDim[1] = 1024; p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647; p.maxGridSize[1] = 65535; p.maxGridSize[2] = 65535;
    p.clockRate = 1980000; p.totalConstMem = 65536; p.major = 9; p.minor = 0;
    p.textureAlignment = 512; p.deviceOverlap = 1; p.multiProcessorCount = 132;
    p.canMapHostMemory = 1; p.concurrentKernels = 1; p.asyncEngineCount = 2;
    p.unifiedAddressing = 1; p.memoryClockRate = 2619000; p.memoryBusWidth = 5120;
    p.l2CacheSize = 50 << 20; p.maxThreadsPerMultiProcessor = 2048;
    p.streamPrioritiesSupported = 1; p.globalL1CacheSupported = 1; p.localL1CacheSupported = 1;
    p.sharedMemPerMultiprocessor = 228 << 10; p.regsPerMultiprocessor = 65536; p.managedMemory = 1;
    p.concurrentManagedAccess = 1; p.sharedMemPerBlockOptin = 227 << 10; p.cooperativeLaunch = 1;
    p.maxBlocksPerMultiProcessor = 32; p.reservedSharedMemPerBlock = 1024;
    const char* env = getenv("WBSIM_DEVICE");
    if (!env) return;
    std::string s(env);
    size_t at = 0;
    while (at < s.size()) {
        size_t end = s.find(';', at);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(at, end - at);
        at = end + 1;
        size_t eq = item.find('=');
        if (eq == std::string::npos) continue;
        std::string k = item.substr(0, eq), v = item.substr(eq + 1);
        unsigned long long n = strtoull(v.c_str(), nullptr, 10);
        if (k == "name") snprintf(p.name, sizeof p.name, "%s (simulated)", v.c_str());
        else if (k == "major") p.major = (int)n;
        else if (k == "minor") p.minor = (int)n;
        else if (k == "sms") p.multiProcessorCount = (int)n;
        else if (k == "memory") p.totalGlobalMem = n;
        else if (k == "shared_block") p.sharedMemPerBlock = n;
        else if (k == "shared_optin") p.sharedMemPerBlockOptin = n;
        else if (k == "shared_sm") p.sharedMemPerMultiprocessor = n;
        else if (k == "regs_block") p.regsPerBlock = (int)n;
        else if (k == "regs_sm") p.regsPerMultiprocessor = (int)n;
        else if (k == "threads_sm") p.maxThreadsPerMultiProcessor = (int)n;
        else if (k == "blocks_sm") p.maxBlocksPerMultiProcessor = (int)n;
        else if (k == "l2") p.l2CacheSize = (int)n;
        else if (k == "clock_khz") p.clockRate = (int)n;
        else if (k == "memory_clock_khz") p.memoryClockRate = (int)n;
        else if (k == "bus_width") p.memoryBusWidth = (int)n;
    }
}

// -- memory ------------------------------------------------------------------------
// One reserved region per kind; allocations first-fit from freed blocks, else
// from the top; 256-byte aligned as cudaMalloc's.
struct Heap {
    const char* what;
    bool always_open;
    uintptr_t base = 0, size = 0, top = 0, open_end = 0;
    std::map<uintptr_t, size_t> live;   // start -> bytes asked for (256-byte aligned spans)
    std::map<uintptr_t, size_t> freed;  // start -> bytes of a free span
    static size_t span(size_t n) { return n ? (n + 255) & ~(size_t)255 : 256; }

    bool contains(uintptr_t p) const { return p >= base && p < base + size; }
    // The live allocation holding p, or live.end().
    std::map<uintptr_t, size_t>::const_iterator find(uintptr_t p) const {
        auto it = live.upper_bound(p);
        if (it == live.begin()) return live.end();
        --it;
        return p < it->first + span(it->second) ? it : live.end();
    }
    void open_to(uintptr_t end) {
        end = (end + 4095) & ~(uintptr_t)4095;
        if (end > open_end) { mprotect((void*)open_end, end - open_end, PROT_READ | PROT_WRITE); open_end = end; }
    }
    void close_all() {
        if (open_end > base) mprotect((void*)base, open_end - base, PROT_NONE);
        open_end = base;
    }
    void* allocate(size_t bytes) {
        if (bytes > size) return nullptr;  // before rounding: span() would wrap near SIZE_MAX
        size_t n = span(bytes);
        for (auto it = freed.begin(); it != freed.end(); ++it)
            if (it->second >= n) {
                uintptr_t p = it->first;
                size_t rest = it->second - n;
                freed.erase(it);
                if (rest) freed[p + n] = rest;
                live[p] = bytes;
                return (void*)p;
            }
        if (n > base + size - top) return nullptr;
        uintptr_t p = top;
        top += n;
        live[p] = bytes;
        if (always_open) open_to(top);
        return (void*)p;
    }
    void release(std::map<uintptr_t, size_t>::const_iterator it) {
        uintptr_t p = it->first;
        size_t n = span(it->second);
        live.erase(it);
        auto next = freed.find(p + n);
        if (next != freed.end()) { n += next->second; freed.erase(next); }
        auto prev = freed.lower_bound(p);
        if (prev != freed.begin()) {
            --prev;
            if (prev->first + prev->second == p) { p = prev->first; n += prev->second; freed.erase(prev); }
        }
        freed[p] = n;
    }
    size_t used() const { size_t u = 0; for (auto& a : live) u += span(a.second); return u; }
};

static Heap g_device{"device", false}, g_managed{"managed", true};
static std::set<void*> g_pinned;
static int g_open_depth = 0;

// Device memory is accessible while the runtime works on it.
struct DeviceOpen {
    DeviceOpen() { if (g_open_depth++ == 0) g_device.open_to(g_device.top); }
    ~DeviceOpen() { if (--g_open_depth == 0) g_device.close_all(); }
};

static void reserve(Heap& h, size_t size) {
    void* m = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { fprintf(stderr, "wbsim: cannot reserve %zu bytes of %s memory\n", size, h.what); _exit(87); }
    h.base = h.top = h.open_end = (uintptr_t)m;
    h.size = size;
}

// -- start, exit, faults -------------------------------------------------------------
static bool g_started = false;
static uint32_t g_launch_timeout_ms = 0;

static void flush_device_printf(bool from_fault) {
    uint64_t n = __atomic_load_n(&g_ctl->printf_committed, __ATOMIC_ACQUIRE);
    uint64_t dropped = g_ctl->printf_dropped;
    const char* buf = (const char*)g_ctl + WBSIM_PRINTF_OFFSET;
    if (from_fault) {
        for (uint64_t done = 0; done < n;) {
            ssize_t w = write(1, buf + done, n - done);
            if (w <= 0) break;
            done += (uint64_t)w;
        }
        return;
    }
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
    if (dropped)
        fprintf(stderr, "wbsim: %llu bytes of device printf output were dropped (more than %u bytes "
                "in one launch)\n", (unsigned long long)dropped, WBSIM_PRINTF_BYTES);
    g_ctl->printf_len = g_ctl->printf_committed = g_ctl->printf_dropped = 0;
}

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

// What a faulting address points at, in words.
static void describe_address(char* out, size_t n, uint64_t a, bool in_kernel) {
    out[0] = 0;
    if (a < 65536) { snprintf(out, n, ": a null pointer, or a small offset from one"); return; }
    if (g_device.contains(a)) {
        if (!in_kernel && g_device.find(a) != g_device.live.end())
            snprintf(out, n, ": device memory (from cudaMalloc) read or written by host code; copy it "
                     "with cudaMemcpy, or allocate it with cudaMallocManaged");
        else
            snprintf(out, n, ": device memory outside every allocation (an index out of bounds, or "
                     "freed memory)");
    } else if (g_managed.contains(a)) {
        snprintf(out, n, ": managed memory outside every allocation (an index out of bounds, or "
                 "freed memory)");
    }
}

static void on_fault(int kind) {
    const wbsim_fault& f = g_ctl->fault;
    bool in_kernel = f.has_block != 0;
    flush_device_printf(true);
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
    else if (in_kernel && kind == WBSIM_FAULT_ASSERT)
        gpu = "\nwbsim: on a GPU: cudaErrorAssert (\"device-side assert triggered\")";
    char msg[2000];
    int len = snprintf(msg, sizeof msg, "wbsim: %s: %s%s\n", where, what, gpu);
    if (len < 0) return;
    if ((size_t)len >= sizeof msg) len = (int)sizeof msg - 1;
    ssize_t ignored = write(2, msg, (size_t)len);
    (void)ignored;
    if (const char* path = getenv("WBSIM_FAULT_FILE")) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) { ignored = write(fd, msg + 7, (size_t)len - 7); close(fd); }
    }
}

static void at_exit(int status, void*) {
    // The pool threads wait for work for ever: end the process here, after
    // flushing what the program wrote, instead of destroying their state.
    std::cout.flush();
    std::cerr.flush();
    fflush(nullptr);
    _exit(status);
}

// Runtime calls from several host threads take turns (launches run one at a time).
static std::recursive_mutex g_api;
typedef std::unique_lock<std::recursive_mutex> ApiLock;

[[nodiscard]] static ApiLock start() {
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
    if (const char* t = getenv("WBSIM_LAUNCH_TIMEOUT_MS")) g_launch_timeout_ms = (uint32_t)atoi(t);
    reserve(g_device, g_prop.totalGlobalMem);
    reserve(g_managed, g_prop.totalGlobalMem);
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

// -- devices ---------------------------------------------------------------------------
extern "C" cudaError_t cudaGetDeviceCount(int* count) { ApiLock held = start(); *count = 1; return cudaSuccess; }
extern "C" cudaError_t cudaGetDevice(int* device) { ApiLock held = start(); *device = 0; return cudaSuccess; }
extern "C" cudaError_t cudaSetDevice(int device) {
    ApiLock held = start();
    return device == 0 ? cudaSuccess
                       : fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): the simulator has one device, 0", device);
}
extern "C" cudaError_t cudaSetDeviceFlags(unsigned int) { ApiLock held = start(); return cudaSuccess; }
extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    ApiLock held = start();
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no device %d", device);
    *prop = g_prop;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    ApiLock held = start();
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: no device %d", device);
    const cudaDeviceProp& p = g_prop;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
        case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: case cudaDevAttrMaxBlockDimZ:
            *value = p.maxThreadsDim[attr - cudaDevAttrMaxBlockDimX]; break;
        case cudaDevAttrMaxGridDimX: case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ:
            *value = p.maxGridSize[attr - cudaDevAttrMaxGridDimX]; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
        case cudaDevAttrWarpSize: *value = p.warpSize; break;
        case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
        case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
        case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
        case cudaDevAttrManagedMemory: case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
        case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
        default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d is not "
                             "known to the simulator", (int)attr);
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceSynchronize(void) { ApiLock held = start(); return cudaSuccess; }
extern "C" cudaError_t cudaDeviceReset(void) {
    ApiLock held = start();
    for (Heap* h : {&g_device, &g_managed}) {
        while (!h->live.empty()) h->release(h->live.begin());
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaDriverGetVersion(int* v) { *v = CUDART_VERSION; return cudaSuccess; }
extern "C" cudaError_t cudaRuntimeGetVersion(int* v) { *v = CUDART_VERSION; return cudaSuccess; }
extern "C" cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    ApiLock held = start();
    *total = g_device.size;
    *free_bytes = g_device.size - g_device.used() - g_managed.used();
    return cudaSuccess;
}

// -- allocation -----------------------------------------------------------------------
static cudaError_t heap_alloc(Heap& h, void** ptr, size_t size, const char* api) {
    ApiLock held = start();
    if (!ptr) return fail(cudaErrorInvalidValue, "%s: the pointer to store the address in is NULL", api);
    void* p = h.allocate(size);
    if (!p) {
        *ptr = nullptr;
        return fail(cudaErrorMemoryAllocation, "%s(%zu bytes): the device has %zu bytes free", api,
                    size, h.size - h.used());
    }
    *ptr = p;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMalloc(void** ptr, size_t size) { return heap_alloc(g_device, ptr, size, "cudaMalloc"); }
extern "C" cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int) {
    return heap_alloc(g_managed, ptr, size, "cudaMallocManaged");
}
extern "C" cudaError_t cudaFree(void* ptr) {
    ApiLock held = start();
    if (!ptr) return cudaSuccess;
    for (Heap* h : {&g_device, &g_managed}) {
        auto it = h->live.find((uintptr_t)ptr);
        if (it != h->live.end()) { h->release(it); return cudaSuccess; }
    }
    return fail(cudaErrorInvalidValue, "cudaFree(%p): not the start of a live cudaMalloc/cudaMallocManaged "
                "allocation (freed twice, or a host pointer?)", ptr);
}
extern "C" cudaError_t cudaMallocHost(void** ptr, size_t size) {
    ApiLock held = start();
    void* p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaMallocHost(%zu bytes): out of host memory", size);
    g_pinned.insert(p);
    *ptr = p;
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }
extern "C" cudaError_t cudaFreeHost(void* ptr) {
    ApiLock held = start();
    if (!ptr) return cudaSuccess;
    if (!g_pinned.erase(ptr))
        return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not memory from cudaMallocHost", ptr);
    free(ptr);
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostRegister(void*, size_t, unsigned int) { ApiLock held = start(); return cudaSuccess; }
extern "C" cudaError_t cudaHostUnregister(void*) { ApiLock held = start(); return cudaSuccess; }

// -- copies ------------------------------------------------------------------------------
enum Side { HOST, DEVICE, MANAGED };

// Where [p, p+n) lies; false (with a message) when it starts in a heap but
// does not fit one live allocation.
static bool locate(const void* p, size_t n, Side* side, const char* api, const char* role) {
    uintptr_t a = (uintptr_t)p;
    for (Heap* h : {&g_device, &g_managed}) {
        if (!h->contains(a)) continue;
        *side = h == &g_device ? DEVICE : MANAGED;
        auto it = h->find(a);
        if (it == h->live.end()) {
            fail(cudaErrorInvalidValue, "%s: the %s %p is not in any live %s allocation (freed?)", api,
                 role, p, h->what);
            return false;
        }
        if (n > it->first + it->second - a) {
            fail(cudaErrorInvalidValue, "%s: %zu bytes at the %s %p run past the end of its allocation "
                 "(%zu bytes, %zu of them from this address)", api, n, role, p, it->second,
                 (size_t)(it->first + it->second - a));
            return false;
        }
        return true;
    }
    *side = HOST;
    return true;
}

static const char* kKindNames[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice",
                                   "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice",
                                   "cudaMemcpyDefault"};

extern "C" cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    ApiLock held = start();
    if (count == 0) return cudaSuccess;
    if ((int)kind < 0 || (int)kind > 4)
        return fail(cudaErrorInvalidMemcpyDirection, "cudaMemcpy: kind %d is not a cudaMemcpyKind", (int)kind);
    if (!dst || !src) return fail(cudaErrorInvalidValue, "cudaMemcpy: a NULL pointer");
    Side ds, ss;
    if (!locate(dst, count, &ds, "cudaMemcpy", "destination") || !locate(src, count, &ss, "cudaMemcpy", "source"))
        return g_last_error;
    bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault) {
        if (dst_device && ds == HOST)
            return fail(cudaErrorInvalidValue, "cudaMemcpy(%s): the destination %p is not device memory "
                        "(arguments swapped, or the wrong kind?)", kKindNames[kind], dst);
        if (src_device && ss == HOST)
            return fail(cudaErrorInvalidValue, "cudaMemcpy(%s): the source %p is not device memory "
                        "(arguments swapped, or the wrong kind?)", kKindNames[kind], src);
        if (!dst_device && ds == DEVICE)
            return fail(cudaErrorInvalidValue, "cudaMemcpy(%s): the destination %p is device memory, "
                        "not host memory (arguments swapped, or the wrong kind?)", kKindNames[kind], dst);
        if (!src_device && ss == DEVICE)
            return fail(cudaErrorInvalidValue, "cudaMemcpy(%s): the source %p is device memory, "
                        "not host memory (arguments swapped, or the wrong kind?)", kKindNames[kind], src);
    }
    DeviceOpen open;
    memmove(dst, src, count);
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                       cudaStream_t) {
    return cudaMemcpy(dst, src, count, kind);
}
extern "C" cudaError_t cudaMemset(void* ptr, int value, size_t count) {
    ApiLock held = start();
    if (count == 0) return cudaSuccess;
    Side side;
    if (!locate(ptr, count, &side, "cudaMemset", "pointer")) return g_last_error;
    if (side == HOST)
        return fail(cudaErrorInvalidValue, "cudaMemset: %p is not device memory", ptr);
    DeviceOpen open;
    memset(ptr, value, count);
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t) {
    return cudaMemset(ptr, value, count);
}
// Pitched memory: rows padded to 512 bytes, as a GPU's texture alignment.
extern "C" cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
    ApiLock held = start();
    if (!pitch) return fail(cudaErrorInvalidValue, "cudaMallocPitch: pitch is NULL");
    *pitch = (width + 511) & ~(size_t)511;
    return heap_alloc(g_device, ptr, *pitch * height, "cudaMallocPitch");
}
extern "C" cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                    size_t height, cudaMemcpyKind kind) {
    ApiLock held = start();
    if (width > dpitch || width > spitch)
        return fail(cudaErrorInvalidValue, "cudaMemcpy2D: width %zu is larger than a pitch (%zu, %zu)",
                    width, dpitch, spitch);
    for (size_t row = 0; row < height; ++row) {
        cudaError_t e = cudaMemcpy((char*)dst + row * dpitch, (const char*)src + row * spitch, width, kind);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
extern "C" cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
    ApiLock held = start();
    if (width > pitch) return fail(cudaErrorInvalidValue, "cudaMemset2D: width %zu is larger than the pitch %zu",
                                   width, pitch);
    for (size_t row = 0; row < height; ++row) {
        cudaError_t e = cudaMemset((char*)ptr + row * pitch, value, width);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemPrefetchAsync(const void*, size_t, int, cudaStream_t) { ApiLock held = start(); return cudaSuccess; }
cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) {
    ApiLock held = start();
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, int) { ApiLock held = start(); return cudaSuccess; }

extern "C" cudaError_t __wbsim_symbol_copy(void* symbol, size_t symbol_bytes, size_t offset, void* other,
                                           size_t count, int to_symbol) {
    ApiLock held = start();
    if (offset > symbol_bytes || count > symbol_bytes - offset)
        return fail(cudaErrorInvalidValue, "cudaMemcpy%sSymbol: %zu bytes at offset %zu do not fit the "
                    "variable's %zu bytes", to_symbol ? "To" : "From", count, offset, symbol_bytes);
    DeviceOpen open;
    if (to_symbol) memmove((char*)symbol + offset, other, count);
    else memmove(other, (char*)symbol + offset, count);
    return cudaSuccess;
}

// -- streams and events ------------------------------------------------------------------
struct CUstream_st { unsigned flags; };
struct CUevent_st { uint64_t ns; bool recorded; unsigned flags; };
static std::set<cudaStream_t> g_streams;
static std::set<cudaEvent_t> g_events;

static bool known_stream(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || g_streams.count(s);
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
    ApiLock held = start();
    *s = new CUstream_st{flags};
    g_streams.insert(*s);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    ApiLock held = start();
    if (!g_streams.erase(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: unknown stream %p", (void*)s);
    delete s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    ApiLock held = start();
    return known_stream(s) ? cudaSuccess
                           : fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: unknown stream %p", (void*)s);
}
extern "C" cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }
extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
    ApiLock held = start();
    if (!known_stream(s) || !g_events.count(e))
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: unknown stream or event");
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    ApiLock held = start();
    *e = new CUevent_st{0, false, flags};
    g_events.insert(*e);
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    ApiLock held = start();
    if (!g_events.erase(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: unknown event %p", (void*)e);
    delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ApiLock held = start();
    if (!g_events.count(e) || !known_stream(s))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: unknown event or stream");
    e->ns = now_ns();
    e->recorded = true;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    ApiLock held = start();
    return g_events.count(e) ? cudaSuccess
                             : fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: unknown event %p", (void*)e);
}
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start_event, cudaEvent_t end_event) {
    ApiLock held = start();
    if (!g_events.count(start_event) || !g_events.count(end_event))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: unknown event");
    if ((start_event->flags | end_event->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event made with cudaEventDisableTiming");
    if (!start_event->recorded || !end_event->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event that was never recorded");
    *ms = (float)((double)((int64_t)(end_event->ns - start_event->ns)) / 1e6);
    return cudaSuccess;
}

// -- launches ----------------------------------------------------------------------------
// A kernel as written before <<< or as cudaFuncSetAttribute's first argument ("ns::k<float>",
// "&k", "(const void*)k"): its name without template arguments, casts, '&' or namespaces.
static std::string kernel_key(const char* text, size_t n) {
    std::string s;
    int angle = 0;
    for (size_t i = 0; i < n && text[i]; ++i) {
        char c = text[i];
        if (c == '<') ++angle;
        else if (c == '>') { if (angle) --angle; }
        else if (!angle && c != ' ' && c != '\t' && c != '\n') s += c;
    }
    size_t cut = s.find_last_of(")&*:");
    if (cut != std::string::npos) s = s.substr(cut + 1);
    return s;
}
// cudaFuncAttributeMaxDynamicSharedMemorySize set per kernel (the opt-in above 48 KiB).
static std::map<std::string, int> g_max_dynamic_shared;

extern "C" cudaError_t __wbsim_func_set_attribute(const char* call_text, int attribute, int value) {
    ApiLock held = start();
    // the kernel is the text before the first top-level comma of "kernel, attribute, value"
    size_t end = 0;
    int depth = 0;
    for (; call_text[end]; ++end) {
        char c = call_text[end];
        if (c == '(' || c == '<' || c == '[') ++depth;
        else if (c == ')' || c == '>' || c == ']') --depth;
        else if (c == ',' && depth == 0) break;
    }
    std::string key = kernel_key(call_text, end);
    if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > g_prop.sharedMemPerBlockOptin)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                        "%d): the device allows at most %zu bytes per block", key.c_str(), value,
                        g_prop.sharedMemPerBlockOptin);
        g_max_dynamic_shared[key] = value;
    }
    return cudaSuccess;
}

extern "C" cudaError_t __wbsim_program_launch(const wbsim_kernel* k, const __wbsim_config* c) {
    if (t_in_kernel)  // before the lock, which the launching host thread holds
        fault_now(WBSIM_FAULT_UNSUPPORTED, "a kernel launched a kernel (dynamic parallelism), which "
                  "the simulator does not support");
    ApiLock held = start();
    const cudaDeviceProp& p = g_prop;
    const dim3 g = c->grid, b = c->block;
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0)
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a grid or block dimension is 0", k->name);
    if (threads > (unsigned)p.maxThreadsPerBlock || b.x > (unsigned)p.maxThreadsDim[0] ||
        b.y > (unsigned)p.maxThreadsDim[1] || b.z > (unsigned)p.maxThreadsDim[2])
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a block of (%u,%u,%u) = %llu threads; "
                    "the device allows %d threads, at most (%d,%d,%d)", k->name, b.x, b.y, b.z, threads,
                    p.maxThreadsPerBlock, p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
    if (g.x > (unsigned)p.maxGridSize[0] || g.y > (unsigned)p.maxGridSize[1] || g.z > (unsigned)p.maxGridSize[2])
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a grid of (%u,%u,%u) blocks; the device "
                    "allows at most (%d,%d,%d)", k->name, g.x, g.y, g.z, p.maxGridSize[0], p.maxGridSize[1],
                    p.maxGridSize[2]);
    if (c->shmem > p.sharedMemPerBlockOptin)
        return fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory; the device "
                    "allows at most %zu per block", k->name, c->shmem, p.sharedMemPerBlockOptin);
    if (c->shmem > p.sharedMemPerBlock) {
        auto opted = g_max_dynamic_shared.find(kernel_key(k->name, strlen(k->name)));
        size_t allowed = opted == g_max_dynamic_shared.end() ? p.sharedMemPerBlock : (size_t)opted->second;
        if (c->shmem > allowed)
            return fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory, above the "
                        "%zu a block gets without opting in; call cudaFuncSetAttribute(%s, "
                        "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first (up to %zu)", k->name,
                        c->shmem, allowed, k->name, p.sharedMemPerBlockOptin);
    }
    if (!known_stream(c->stream))
        return fail(cudaErrorInvalidResourceHandle, "launch of %s: unknown stream %p", k->name, (void*)c->stream);
    unsigned grid[3] = {g.x, g.y, g.z}, block[3] = {b.x, b.y, b.z};
    {
        DeviceOpen open;
        launch_begins(g_launch_timeout_ms);
        wbsim_run_grid(k, grid, block, c->shmem);
        launch_ends();
    }
    flush_device_printf(false);
    return cudaSuccess;
}
