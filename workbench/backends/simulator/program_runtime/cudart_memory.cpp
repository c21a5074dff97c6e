// Memory of whole programs on the simulator: allocation, copies and memsets.
//
//  * Device memory (cudaMalloc, cudaMallocAsync, CUDA arrays) is one reserved region;
//    host code cannot touch it, as on a GPU: it is readable and writable only while a
//    kernel, a copy or a memset runs, so a host dereference of a device pointer faults
//    with a message that says so. Managed memory (cudaMallocManaged) is a second region,
//    always accessible; pinned and registered host memory is the host's own (kernels
//    reach it through the same address: cudaHostGetDevicePointer returns it).
//  * Copies are checked against the allocations (too many bytes, the wrong direction).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

#include "cudart_internal.h"

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
// Pinned (cudaMallocHost, cudaHostAlloc) and registered (cudaHostRegister) host memory:
// start -> (bytes, flags).
struct HostRange { size_t bytes; unsigned flags; bool registered; };
static std::map<uintptr_t, HostRange> g_host;
static int g_open_depth = 0;

DeviceOpen::DeviceOpen() { if (g_open_depth++ == 0) g_device.open_to(g_device.top); }
DeviceOpen::~DeviceOpen() { if (--g_open_depth == 0) g_device.close_all(); }

// Device memory is a memory file (shared with the processes the program starts, which
// inherit it: cudaIpcOpenMemHandle maps it), managed memory anonymous.
static int g_device_fd = -1;
static void reserve(Heap& h, size_t size, int fd) {
    void* m = fd >= 0 ? mmap(nullptr, size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0)
                      : mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { fprintf(stderr, "wbsim: cannot reserve %zu bytes of %s memory\n", size, h.what); _exit(87); }
    h.base = h.top = h.open_end = (uintptr_t)m;
    h.size = size;
}
void reserve_memory() {
    g_device_fd = memfd_create("wbsim-device", 0);
    if (g_device_fd >= 0 && ftruncate(g_device_fd, (off_t)g_prop.totalGlobalMem) != 0) {
        close(g_device_fd);
        g_device_fd = -1;
    }
    reserve(g_device, g_prop.totalGlobalMem, g_device_fd);
    reserve(g_managed, g_prop.totalGlobalMem, -1);
}
void free_all_memory() {
    for (Heap* h : {&g_device, &g_managed})
        while (!h->live.empty()) h->release(h->live.begin());
    for (auto& r : g_host)
        if (!r.second.registered) free((void*)r.first);
    g_host.clear();
}
size_t device_memory_used() { return g_device.used() + g_managed.used(); }

// The pinned or registered range holding p, or g_host.end().
static std::map<uintptr_t, HostRange>::iterator host_range(const void* p) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_host.upper_bound(a);
    if (it == g_host.begin()) return g_host.end();
    --it;
    return a < it->first + it->second.bytes ? it : g_host.end();
}

bool is_pinned(const void* p) { return host_range(p) != g_host.end(); }

// What a faulting address points at, in words.
void describe_address(char* out, size_t n, uint64_t a, bool in_kernel) {
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

// -- allocation -----------------------------------------------------------------------
static cudaError_t heap_alloc(Heap& h, void** ptr, size_t size, const char* api) {
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
void* device_alloc(size_t bytes, const char* api) {
    void* p = nullptr;
    return heap_alloc(g_device, &p, bytes, api) == cudaSuccess ? p : nullptr;
}
bool device_free(void* p) {
    auto it = g_device.live.find((uintptr_t)p);
    if (it == g_device.live.end()) return false;
    g_device.release(it);
    return true;
}

extern "C" cudaError_t cudaMalloc(void** ptr, size_t size) {
    ApiLock held = start();
    // a GPU refuses a NULL out-pointer before it answers with a sticky error
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaMalloc: the pointer to store the address in is NULL");
    if (g_sticky != cudaSuccess) return fail(g_sticky);
    return heap_alloc(g_device, ptr, size, "cudaMalloc");
}
extern "C" cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
    API_ENTER();
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
        return fail(cudaErrorInvalidValue, "cudaMallocManaged: flags %u (cudaMemAttachGlobal or "
                    "cudaMemAttachHost)", flags);
    return heap_alloc(g_managed, ptr, size, "cudaMallocManaged");
}
extern "C" cudaError_t cudaFree(void* ptr) {
    API_ENTER();
    flush_device_output();  // cudaFree waits for the device
    if (!ptr) return cudaSuccess;
    for (Heap* h : {&g_device, &g_managed}) {
        auto it = h->live.find((uintptr_t)ptr);
        if (it != h->live.end()) { h->release(it); return cudaSuccess; }
    }
    return fail(cudaErrorInvalidValue, "cudaFree(%p): not the start of a live cudaMalloc/cudaMallocManaged "
                "allocation (freed twice, or a host pointer?)", ptr);
}
extern "C" cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
    API_ENTER();
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaHostAlloc: the pointer to store the address in is NULL");
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: unknown flags 0x%x", flags);
    void* p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu bytes): out of host memory", size);
    // cudaHostGetFlags on a GPU reports Mapped (all pinned memory is, under unified addressing)
    // and WriteCombined, never Portable, though every allocation is portable.
    const unsigned reported = (flags | cudaHostAllocMapped) & ~(unsigned)cudaHostAllocPortable;
    g_host[(uintptr_t)p] = HostRange{size ? size : 1, reported, false};
    *ptr = p;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }
extern "C" cudaError_t cudaFreeHost(void* ptr) {
    API_ENTER();
    flush_device_output();
    if (!ptr) return cudaSuccess;
    auto it = g_host.find((uintptr_t)ptr);
    if (it == g_host.end() || it->second.registered)
        return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not memory from cudaMallocHost or cudaHostAlloc", ptr);
    g_host.erase(it);
    free(ptr);
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
    API_ENTER();
    if (!ptr || !size) return fail(cudaErrorInvalidValue, "cudaHostRegister: a NULL pointer or 0 bytes");
    uintptr_t a = (uintptr_t)ptr;
    auto next = g_host.lower_bound(a);
    if (host_range(ptr) != g_host.end() || (next != g_host.end() && next->first < a + size))
        return fail(cudaErrorHostMemoryAlreadyRegistered);
    g_host[a] = HostRange{size, flags | cudaHostRegisterMapped, true};
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostUnregister(void* ptr) {
    API_ENTER();
    auto it = g_host.find((uintptr_t)ptr);
    if (it == g_host.end() || !it->second.registered) return fail(cudaErrorHostMemoryNotRegistered);
    g_host.erase(it);
    return cudaSuccess;
}
// Unified addressing: a kernel reaches pinned host memory at its own address.
extern "C" cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
    API_ENTER();
    if (!device || flags != 0) return fail(cudaErrorInvalidValue);
    if (host_range(host) == g_host.end())
        return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer(%p): not memory from cudaHostAlloc, "
                    "cudaMallocHost or cudaHostRegister", host);
    *device = host;
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
    API_ENTER();
    auto it = host_range(host);
    if (it == g_host.end()) return fail(cudaErrorInvalidValue);
    *flags = it->second.flags;
    return cudaSuccess;
}
extern "C" cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* ptr) {
    API_ENTER();
    if (!a) return fail(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    uintptr_t p = (uintptr_t)ptr;
    if (g_device.contains(p)) { a->type = cudaMemoryTypeDevice; a->devicePointer = (void*)ptr; }
    else if (g_managed.contains(p)) {
        a->type = cudaMemoryTypeManaged; a->devicePointer = a->hostPointer = (void*)ptr;
    } else if (host_range(ptr) != g_host.end()) {
        a->type = cudaMemoryTypeHost; a->devicePointer = a->hostPointer = (void*)ptr;
    } else {
        a->type = cudaMemoryTypeUnregistered; a->device = -2;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    API_ENTER();
    if (total) *total = g_device.size;
    if (free_bytes) *free_bytes = g_device.size - device_memory_used();
    return cudaSuccess;
}

// -- stream-ordered allocation: the device's one pool ---------------------------------------
struct CUmemPoolHandle_st { size_t release_threshold = 0; size_t used_high = 0; };
static CUmemPoolHandle_st g_pool;
extern "C" cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
    API_ENTER();
    if (!known_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync: unknown stream");
    cudaError_t e = heap_alloc(g_device, ptr, size, "cudaMallocAsync");
    if (g_device.used() > g_pool.used_high) g_pool.used_high = g_device.used();
    return e;
}
extern "C" cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
    if (pool != &g_pool) return fail(cudaErrorInvalidValue, "cudaMallocFromPoolAsync: not the device's pool");
    return cudaMallocAsync(ptr, size, stream);
}
extern "C" cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
    API_ENTER();
    if (!known_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync: unknown stream");
    if (!ptr) return cudaSuccess;
    if (!device_free(ptr))
        return fail(cudaErrorInvalidValue, "cudaFreeAsync(%p): not the start of a live device allocation", ptr);
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
    API_ENTER();
    if (!valid_device(device, "cudaDeviceGetDefaultMemPool")) return cudaErrorInvalidDevice;
    *pool = &g_pool;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
    return cudaDeviceGetDefaultMemPool(pool, device);
}
extern "C" cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
    API_ENTER();
    if (!valid_device(device, "cudaDeviceSetMemPool")) return cudaErrorInvalidDevice;
    return pool == &g_pool ? cudaSuccess : fail(cudaErrorInvalidValue, "cudaDeviceSetMemPool: the simulator "
                                                "has one pool, the device's default one");
}
extern "C" cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
    API_ENTER();
    if (pool != &g_pool || !value) return fail(cudaErrorInvalidValue);
    if (attr == cudaMemPoolAttrReleaseThreshold) pool->release_threshold = *(uint64_t*)value;
    else if (attr == cudaMemPoolAttrUsedMemHigh || attr == cudaMemPoolAttrReservedMemHigh) pool->used_high = 0;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
    API_ENTER();
    if (pool != &g_pool || !value) return fail(cudaErrorInvalidValue);
    switch (attr) {
        case cudaMemPoolAttrReleaseThreshold: *(uint64_t*)value = pool->release_threshold; break;
        case cudaMemPoolAttrReservedMemCurrent: case cudaMemPoolAttrUsedMemCurrent:
            *(uint64_t*)value = g_device.used(); break;
        case cudaMemPoolAttrReservedMemHigh: case cudaMemPoolAttrUsedMemHigh:
            *(uint64_t*)value = pool->used_high; break;
        default: *(int*)value = 1;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* descs, size_t count) {
    API_ENTER();
    if (pool != &g_pool) return fail(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; ++i)
        if (descs[i].location.type == cudaMemLocationTypeDevice &&
            !valid_device(descs[i].location.id, "cudaMemPoolSetAccess"))
            return cudaErrorInvalidDevice;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t) {
    API_ENTER();
    return pool == &g_pool ? cudaSuccess : fail(cudaErrorInvalidValue);
}

// -- where an address lies ------------------------------------------------------------------
// Device memory of another process, opened with cudaIpcOpenMemHandle: start -> bytes.
static std::map<uintptr_t, size_t> g_imported;

bool locate(const void* p, size_t n, Side* side, const char* api, const char* role) {
    uintptr_t a = (uintptr_t)p;
    auto imported = g_imported.upper_bound(a);
    if (imported != g_imported.begin() && a < (--imported)->first + imported->second) {
        *side = MANAGED;  // device memory that host code may touch (mapped for good)
        return true;
    }
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

// -- pitched memory: rows padded to 512 bytes, as a GPU's texture alignment -------------------
extern "C" cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
    API_ENTER();
    if (!pitch) return fail(cudaErrorInvalidValue, "cudaMallocPitch: pitch is NULL");
    *pitch = (width + 511) & ~(size_t)511;
    return heap_alloc(g_device, ptr, *pitch * height, "cudaMallocPitch");
}
extern "C" cudaError_t cudaMalloc3D(cudaPitchedPtr* pitched, cudaExtent extent) {
    API_ENTER();
    if (!pitched) return fail(cudaErrorInvalidValue, "cudaMalloc3D: pitchedDevPtr is NULL");
    size_t pitch = (extent.width + 511) & ~(size_t)511;
    void* p = nullptr;
    cudaError_t e = heap_alloc(g_device, &p, pitch * (extent.height ? extent.height : 1) *
                               (extent.depth ? extent.depth : 1), "cudaMalloc3D");
    *pitched = make_cudaPitchedPtr(p, pitch, extent.width, extent.height);
    return e;
}

// -- interprocess memory -------------------------------------------------------------------
// A handle names a device allocation of a process by its memory file, which the processes
// the program starts inherit (the same descriptor number).
struct IpcMemHandle { uint32_t magic; int32_t pid; int32_t fd; uint64_t offset, bytes; };
static const uint32_t kIpcMagic = 0x57424950u;  // "WBIP"
static_assert(sizeof(IpcMemHandle) <= sizeof(cudaIpcMemHandle_t), "an IPC handle fits");

extern "C" cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr) {
    API_ENTER();
    if (!handle) return fail(cudaErrorInvalidValue);
    auto it = g_device.live.find((uintptr_t)ptr);
    if (it == g_device.live.end())
        return fail(cudaErrorInvalidValue, "cudaIpcGetMemHandle(%p): not the start of a cudaMalloc allocation", ptr);
    if (g_device_fd < 0) return fail(cudaErrorNotSupported, "cudaIpcGetMemHandle: no shareable device memory");
    IpcMemHandle h = {kIpcMagic, (int32_t)getpid(), g_device_fd, (uint64_t)(it->first - g_device.base),
                      (uint64_t)it->second};
    memset(handle, 0, sizeof *handle);
    memcpy(handle, &h, sizeof h);
    return cudaSuccess;
}
extern "C" cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned int) {
    API_ENTER();
    IpcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    if (!ptr || h.magic != kIpcMagic) return fail(cudaErrorInvalidValue, "cudaIpcOpenMemHandle: not a handle "
                                                  "from cudaIpcGetMemHandle");
    if (h.pid == (int32_t)getpid())
        return fail(cudaErrorDeviceUninitialized, "cudaIpcOpenMemHandle: a handle of this process's own memory");
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", h.fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    if (n <= 0 || !strstr(target, "wbsim-device"))
        return fail(cudaErrorInvalidValue, "cudaIpcOpenMemHandle: the simulator shares device memory only with "
                    "the processes a program starts (they inherit it)");
    uint64_t page = h.offset & ~(uint64_t)4095, skip = h.offset - page;
    size_t bytes = (size_t)(skip + (h.bytes ? h.bytes : 1));
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, h.fd, (off_t)page);
    if (m == MAP_FAILED) return fail(cudaErrorMapBufferObjectFailed, "cudaIpcOpenMemHandle: mmap failed");
    *ptr = (char*)m + skip;
    g_imported[(uintptr_t)*ptr] = (size_t)h.bytes;
    return cudaSuccess;
}
extern "C" cudaError_t cudaIpcCloseMemHandle(void* ptr) {
    API_ENTER();
    auto it = g_imported.find((uintptr_t)ptr);
    if (it == g_imported.end()) return fail(cudaErrorInvalidValue, "cudaIpcCloseMemHandle(%p): not opened with "
                                            "cudaIpcOpenMemHandle", ptr);
    uintptr_t page = it->first & ~(uintptr_t)4095;
    munmap((void*)page, it->first - page + it->second);
    g_imported.erase(it);
    return cudaSuccess;
}
