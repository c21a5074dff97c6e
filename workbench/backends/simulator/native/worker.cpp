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
// The other parts of the worker are listed in runtime.h.
//
// Protocol on two pipes (request fd, reply fd), little-endian:
//   request: u32 op (enum wbsim_op), u32 length, payload;
//   reply: i32 status, u32 length, payload.
// Waiting for the next request, the worker first polls its pipe for a short
// while (the spin time, an argument) and only then blocks in poll(): waking a
// process that sleeps on another CPU costs tens of microseconds (more in a
// virtual machine), far more than an empty launch, so launches in a row find
// the worker awake. The notebook side does the same for the reply. The pipe
// stays the only channel, so no wake-up can be lost.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <ctime>

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "access.h"
#include "runtime.h"

#ifdef WBSIM_CHECKED
#include <sanitizer/asan_interface.h>
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

wbsim_control* g_ctl = nullptr;

// -- the request loop ----------------------------------------------------------
static int g_in = -1, g_out = -1;  // g_in is non-blocking: see wait_readable
static uint64_t g_spin_ns = 0;        // how long to poll before blocking

// Wait until `fd` has data (or its writer is gone): poll it without blocking
// for up to g_spin_ns, then block. Between polls the CPU is offered to any
// other thread that waits for it (the notebook may run on the same CPU), and
// when one took it, polling stops: on a busy CPU a blocked worker is woken
// sooner (the scheduler lets a waking thread in at once) than a polling one
// gets its turn back, and waking costs little when the CPU is not idle.
static const uint64_t kBusyCpuNs = 20000;
static void wait_readable(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    if (g_spin_ns) {
        uint64_t start = now_ns(), last = start, t;
        do {
            if (poll(&p, 1, 0) > 0) return;
            sched_yield();  // the notebook may be waiting for this CPU
            t = now_ns();
            if (t - last > kBusyCpuNs) break;  // it was: no polling while the CPU is shared
            last = t;
        } while (t - start < g_spin_ns);
    }
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
}

// A persistent kernel's idle wait (see wbsim_abi.h): a futex on a word of the shared arena
// (not private: the notebook's process wakes it through its own mapping of the same file).
extern "C" void wbsim_wait_word(const unsigned* word, unsigned expected, unsigned timeout_us) {
    struct timespec ts = {(time_t)(timeout_us / 1000000u), (long)(timeout_us % 1000000u) * 1000L};
    syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

extern "C" void wbsim_yield_cpu(void) { sched_yield(); }

// Requests are read through a buffer: a launch's header and payload then
// take one read() instead of two.
static char g_inbuf[1 << 16];
static size_t g_inpos = 0, g_inlen = 0;

static bool read_all(int fd, void* buf, size_t n) {
    char* p = (char*)buf;
    while (n) {
        if (g_inpos < g_inlen) {
            size_t k = g_inlen - g_inpos < n ? g_inlen - g_inpos : n;
            memcpy(p, g_inbuf + g_inpos, k);
            g_inpos += k; p += k; n -= k;
            continue;
        }
        bool direct = n >= sizeof g_inbuf;  // a large payload: straight to its place
        ssize_t r = direct ? read(fd, p, n) : read(fd, g_inbuf, sizeof g_inbuf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_readable(fd);
            continue;
        }
        if (r <= 0) return false;
        if (direct) {
            p += r; n -= (size_t)r;
        } else {
            g_inpos = 0;
            g_inlen = (size_t)r;
        }
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

// The arena beyond its high-water mark holds no allocation: it is made
// inaccessible before each launch, so a wild write far past every array
// faults (the GPU's illegal address) instead of landing in unused memory.
static uintptr_t g_arena_base = 0, g_arena_end = 0, g_accessible_end = 0;

static void set_accessible_end(uint64_t top) {
    const uintptr_t page = 4096;
    uintptr_t end = ((uintptr_t)top + page - 1) & ~(page - 1);
    if (end < g_arena_base || end > g_arena_end || end == g_accessible_end) return;
    if (end > g_accessible_end)
        mprotect((void*)g_accessible_end, end - g_accessible_end, PROT_READ | PROT_WRITE);
    else
        mprotect((void*)end, g_accessible_end - end, PROT_NONE);
    g_accessible_end = end;
}

// A launch request; `instrumented` (WBSIM_OP_INSTRUMENTED_LAUNCH): the kernel
// library was built for counting and the request ends with what its
// consumers need (see launch.py), the reply with their results.
static void handle_launch(Reader& r, bool instrumented) {
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
    set_accessible_end(r.get<uint64_t>());
    uint32_t flags = r.get<uint32_t>();
    g_cooperative = (flags & 1u) != 0;
    g_schedule_seed = (flags & 2u) ? r.get<uint64_t>() : 0;  // a schedule to explore (grid.cpp)
#ifdef WBSIM_CHECKED
    uint64_t lo = r.get<uint64_t>(), hi = r.get<uint64_t>();
    uint32_t nlive = r.get<uint32_t>();
    if (hi > lo) __asan_poison_memory_region((void*)(uintptr_t)lo, hi - lo);
    for (uint32_t i = 0; i < nlive; ++i) {
        uint64_t a = r.get<uint64_t>(), n = r.get<uint64_t>();
        __asan_unpoison_memory_region((void*)(uintptr_t)a, n);
    }
    g_redzones.clear();  // (poisoned by each OS thread that runs blocks: grid.cpp)
    uint32_t nzones = r.get<uint32_t>();
    for (uint32_t i = 0; i < nzones; ++i) {
        int64_t offset = r.get<int64_t>();
        uint64_t n = r.get<uint64_t>();
        g_redzones.emplace_back(offset, n);
    }
    g_redzone_library = nzones && lib < g_libs.size() ? g_libs[lib] : nullptr;
#endif
    AccessSetup access;
    if (instrumented) {
        access.consumers = r.get<uint32_t>();
        access.sample_stride = r.get<uint32_t>();
        access.anchor_offset = r.get<uint64_t>();
        uint32_t nvars = r.get<uint32_t>();
        for (uint32_t i = 0; i < nvars; ++i) {
            int64_t offset = r.get<int64_t>();
            uint64_t bytes = r.get<uint64_t>();
            access.shared_vars.emplace_back(offset, bytes);
        }
        uint32_t naccessors = r.get<uint32_t>();
        for (uint32_t i = 0; i < naccessors; ++i) access.accessors.push_back(r.str());
        uint32_t nmarkers = r.get<uint32_t>();
        for (uint32_t i = 0; i < nmarkers; ++i) {
            uint32_t site = r.get<uint32_t>();
            access.loop_markers.emplace_back(site, r.get<uint32_t>());
        }
        uint32_t nloops = r.get<uint32_t>();
        for (uint32_t i = 0; i < nloops; ++i) access.loop_parents.push_back(r.get<int32_t>());
        uint32_t nsites = r.get<uint32_t>();
        for (uint32_t i = 0; i < nsites; ++i) {
            uint32_t site = r.get<uint32_t>();
            access.loop_sites.emplace_back(site, r.get<uint32_t>());
        }
        uint32_t ndata = r.get<uint32_t>();  // what the consumers are given (AccessLaunch::data)
        if (ndata > (size_t)(r.end - r.p)) { reply_text(2, "truncated instrumented launch"); return; }
        access.data.assign(r.p, ndata);
        r.p += ndata;
    }
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
    if (instrumented) {
        access.library = g_libs[lib];
        access.entry = (const void*)fn;
        for (const std::string& name : access.accessors) {  // __device__ variables
            auto accessor = (void* (*)(unsigned long long*))dlsym(g_libs[lib], name.c_str());
            unsigned long long size = 0;
            void* addr = accessor ? accessor(&size) : nullptr;
            if (addr && size) access.device_vars.emplace_back((uint64_t)(uintptr_t)addr, size);
        }
        std::string why;
        if (!access_launch_begins(access, &L, g_arena_base + WBSIM_ARENA_RESERVED, g_accessible_end, why)) {
            reply_text(2, why);
            return;
        }
    }
    g_ctl->fault.kind = 0;
    launch_begins(timeout_ms);
    uint64_t t0 = now_ns();
    int rc = fn(&L);
    uint64_t t1 = now_ns();
    launch_ends();
    uint64_t elapsed = t1 - t0;
    if (instrumented) {
        std::string out((const char*)&elapsed, 8);
        access_launch_ends(out);
        if (rc != 0) { reply_text(3, err); return; }
        reply(0, out.data(), (uint32_t)out.size());
        return;
    }
    if (rc != 0) { reply_text(3, err); return; }
    reply(0, &elapsed, 8);
}

static void handle_symbol(Reader& r, bool write) {
    uint32_t lib = r.get<uint32_t>();
    std::string sym = r.str();
    uint64_t offset = r.get<uint64_t>();
    uint64_t n = r.get<uint64_t>();
    if (lib >= g_libs.size()) { reply_text(2, "unknown library"); return; }
    char* addr = nullptr;
    if (sym.rfind("__wbsim_global_", 0) == 0) {
        // an accessor generated for a module variable: its address and size
        // (static variables and variables in namespaces have no plain symbol)
        auto accessor = (void* (*)(unsigned long long*))dlsym(g_libs[lib], sym.c_str());
        if (!accessor) { reply_text(2, "no symbol " + sym); return; }
        unsigned long long size = 0;
        addr = (char*)accessor(&size);
        if (offset > size || n > size - offset) {
            reply_text(3, "the variable has " + std::to_string(size) + " bytes; " +
                          std::to_string(offset + n) + " were asked for");
            return;
        }
    } else {
        addr = (char*)dlsym(g_libs[lib], sym.c_str());
    }
    if (!addr) { reply_text(2, "no symbol " + sym); return; }
    if (write) {
        memcpy(addr + offset, r.p, n);
        reply(0, nullptr, 0);
    } else {
        reply(0, addr + offset, (uint32_t)n);
    }
}

// The notebook's process holds the request pipe's write end: when that
// process ends (killed while a kernel runs here, say) the pipe hangs up, and
// the worker ends too, whatever its threads are doing.
static void watch_requester() {
    struct pollfd p = {g_in, 0, 0};
    for (;;) {
        if (poll(&p, 1, -1) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) _exit(0);
    }
}

int main(int argc, char** argv) {
    // worker <arena fd> <arena address> <arena bytes> <request fd> <reply fd> <threads> [spin us]
    if (argc < 7) { fprintf(stderr, "usage: wbsim-worker fd addr size in out threads [spin_us]\n"); return 2; }
    int fd = atoi(argv[1]);
    uintptr_t addr = (uintptr_t)strtoull(argv[2], nullptr, 0);
    size_t size = (size_t)strtoull(argv[3], nullptr, 0);
    g_in = atoi(argv[4]);
    g_out = atoi(argv[5]);
    unsigned nthreads = (unsigned)atoi(argv[6]);
    if (argc > 7) g_spin_ns = strtoull(argv[7], nullptr, 0) * 1000ull;
    fcntl(g_in, F_SETFL, fcntl(g_in, F_GETFL) | O_NONBLOCK);
    if (const char* s = getenv("WBSIM_STACK_KIB")) g_stack_bytes = (size_t)atoi(s) * 1024;
    dup2(2, 1);  // stray writes to stdout go to the log, not the notebook
    void* m = mmap((void*)addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (m == MAP_FAILED || (uintptr_t)m != addr) {
        std::string msg = "cannot map the device arena at the notebook's address";
        reply_text(1, msg);
        return 1;
    }
    g_ctl = (wbsim_control*)m;
    g_arena_base = addr;
    g_arena_end = g_accessible_end = addr + size;
    thread_setup();
    install_handlers();
    cpu_set_t set;
    unsigned cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
    if (nthreads == 0) nthreads = cpus;
    if (cpus < 2) g_spin_ns = 0;  // polling would only keep the notebook from running
    start_threads(nthreads - 1);
    std::thread(watch_requester).detach();
    uint32_t hello[2] = {WBSIM_ABI_VERSION, nthreads};
    reply(0, hello, sizeof hello);
    for (;;) {
        uint32_t head[2];
        if (!read_all(g_in, head, 8)) _exit(0);
        std::vector<char> payload(head[1]);
        if (head[1] && !read_all(g_in, payload.data(), head[1])) _exit(0);
        Reader r{payload.data(), payload.data() + payload.size()};
        switch (head[0]) {
            case WBSIM_OP_LOAD: handle_load(r); break;
            case WBSIM_OP_LAUNCH: handle_launch(r, false); break;
            case WBSIM_OP_INSTRUMENTED_LAUNCH: handle_launch(r, true); break;
            case WBSIM_OP_SYMBOL_WRITE: handle_symbol(r, true); break;
            case WBSIM_OP_SYMBOL_READ: handle_symbol(r, false); break;
            default: reply_text(9, "unknown request");
        }
    }
}
