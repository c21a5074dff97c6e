// Copies and memsets of whole programs on the simulator: 1D, 2D, 3D, peer and symbol
// copies, checked against the allocations (too many bytes, the wrong direction), as a
// GPU's runtime checks them, with a message on stderr that says what was wrong.
#include <cstdio>
#include <cstring>

#include "cudart_internal.h"

static const char* kKindNames[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice",
                                   "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice",
                                   "cudaMemcpyDefault"};

cudaError_t checked_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, const char* api) {
    if (count == 0) return cudaSuccess;
    if ((int)kind < 0 || (int)kind > 4)
        return fail(cudaErrorInvalidMemcpyDirection, "%s: kind %d is not a cudaMemcpyKind", api, (int)kind);
    if (!dst || !src) return fail(cudaErrorInvalidValue, "%s: a NULL pointer", api);
    Side ds, ss;
    if (!locate(dst, count, &ds, api, "destination") || !locate(src, count, &ss, api, "source"))
        return cudaErrorInvalidValue;
    bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    // pinned host memory is addressable by the device, as with unified addressing
    auto device_side = [](Side s, const void* p) { return s != HOST || is_pinned(p); };
    if (kind != cudaMemcpyDefault) {
        if (dst_device && !device_side(ds, dst))
            return fail(cudaErrorInvalidValue, "%s(%s): the destination %p is not device memory "
                        "(arguments swapped, or the wrong kind?)", api, kKindNames[kind], dst);
        if (src_device && !device_side(ss, src))
            return fail(cudaErrorInvalidValue, "%s(%s): the source %p is not device memory "
                        "(arguments swapped, or the wrong kind?)", api, kKindNames[kind], src);
        if (!dst_device && ds == DEVICE)
            return fail(cudaErrorInvalidValue, "%s(%s): the destination %p is device memory, "
                        "not host memory (arguments swapped, or the wrong kind?)", api, kKindNames[kind], dst);
        if (!src_device && ss == DEVICE)
            return fail(cudaErrorInvalidValue, "%s(%s): the source %p is device memory, "
                        "not host memory (arguments swapped, or the wrong kind?)", api, kKindNames[kind], src);
    }
    DeviceOpen open;
    memmove(dst, src, count);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    API_ENTER();
    flush_device_output();  // a blocking copy waits for the kernels before it
    return checked_copy(dst, src, count, kind, "cudaMemcpy");
}
extern "C" cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                       cudaStream_t stream) {
    API_ENTER();
    if (!known_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync: unknown stream");
    if (capture(stream, [=] { return checked_copy(dst, src, count, kind, "cudaMemcpyAsync"); }, "cudaMemcpyAsync"))
        return cudaSuccess;
    return checked_copy(dst, src, count, kind, "cudaMemcpyAsync");
}
extern "C" cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
    API_ENTER();
    if (!valid_device(dst_device, "cudaMemcpyPeer") || !valid_device(src_device, "cudaMemcpyPeer"))
        return cudaErrorInvalidDevice;
    flush_device_output();
    return checked_copy(dst, src, count, cudaMemcpyDeviceToDevice, "cudaMemcpyPeer");
}
extern "C" cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                           size_t count, cudaStream_t) {
    return cudaMemcpyPeer(dst, dst_device, src, src_device, count);
}

static cudaError_t checked_memset(void* ptr, int value, size_t count, const char* api) {
    if (count == 0) return cudaSuccess;
    Side side;
    if (!locate(ptr, count, &side, api, "pointer")) return cudaErrorInvalidValue;
    if (side == HOST && !is_pinned(ptr))
        return fail(cudaErrorInvalidValue, "%s: %p is not device memory", api, ptr);
    DeviceOpen open;
    memset(ptr, value, count);
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemset(void* ptr, int value, size_t count) {
    API_ENTER();
    return checked_memset(ptr, value, count, "cudaMemset");
}
extern "C" cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
    API_ENTER();
    if (!known_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: unknown stream");
    if (capture(stream, [=] { return checked_memset(ptr, value, count, "cudaMemsetAsync"); }, "cudaMemsetAsync"))
        return cudaSuccess;
    return checked_memset(ptr, value, count, "cudaMemsetAsync");
}

static cudaError_t copy_rows(char* dst, size_t dpitch, const char* src, size_t spitch, size_t width,
                             size_t height, cudaMemcpyKind kind, const char* api) {
    if (width > dpitch || width > spitch)
        return fail(cudaErrorInvalidPitchValue, "%s: width %zu is larger than a pitch (%zu, %zu)", api, width,
                    dpitch, spitch);
    for (size_t row = 0; row < height; ++row) {
        cudaError_t e = checked_copy(dst + row * dpitch, src + row * spitch, width, kind, api);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                    size_t height, cudaMemcpyKind kind) {
    API_ENTER();
    flush_device_output();
    return copy_rows((char*)dst, dpitch, (const char*)src, spitch, width, height, kind, "cudaMemcpy2D");
}
extern "C" cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
    API_ENTER();
    auto op = [=] {
        return copy_rows((char*)dst, dpitch, (const char*)src, spitch, width, height, kind, "cudaMemcpy2DAsync");
    };
    if (capture(stream, op, "cudaMemcpy2DAsync")) return cudaSuccess;
    return op();
}
static cudaError_t memset_rows(void* ptr, size_t pitch, int value, size_t width, size_t height, size_t depth,
                               size_t slice, const char* api) {
    if (width > pitch) return fail(cudaErrorInvalidValue, "%s: width %zu is larger than the pitch %zu", api,
                                   width, pitch);
    for (size_t z = 0; z < depth; ++z)
        for (size_t row = 0; row < height; ++row) {
            cudaError_t e = checked_memset((char*)ptr + z * slice + row * pitch, value, width, api);
            if (e != cudaSuccess) return e;
        }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
    API_ENTER();
    return memset_rows(ptr, pitch, value, width, height, 1, 0, "cudaMemset2D");
}
extern "C" cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height,
                                         cudaStream_t) {
    return cudaMemset2D(ptr, pitch, value, width, height);
}
extern "C" cudaError_t cudaMemset3D(cudaPitchedPtr p, int value, cudaExtent e) {
    API_ENTER();
    return memset_rows(p.ptr, p.pitch, value, e.width, e.height, e.depth, p.pitch * p.ysize, "cudaMemset3D");
}
extern "C" cudaError_t cudaMemset3DAsync(cudaPitchedPtr p, int value, cudaExtent e, cudaStream_t) {
    return cudaMemset3D(p, value, e);
}

// -- managed memory hints: nothing to move on the simulator -------------------------------------
extern "C" cudaError_t cudaMemPrefetchAsync(const void*, size_t, int, cudaStream_t) { API_ENTER(); return cudaSuccess; }
cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) {
    API_ENTER();
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, int) { API_ENTER(); return cudaSuccess; }
cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, cudaMemLocation) { API_ENTER(); return cudaSuccess; }
extern "C" cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void*, size_t, unsigned int) {
    API_ENTER();
    return known_stream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

// -- module variables -------------------------------------------------------------------
extern "C" cudaError_t __wbsim_symbol_copy(void* symbol, size_t symbol_bytes, size_t offset, void* other,
                                           size_t count, int to_symbol, cudaStream_t stream) {
    API_ENTER();
    if (offset > symbol_bytes || count > symbol_bytes - offset)
        return fail(cudaErrorInvalidValue, "cudaMemcpy%sSymbol: %zu bytes at offset %zu do not fit the "
                    "variable's %zu bytes", to_symbol ? "To" : "From", count, offset, symbol_bytes);
    auto op = [=] {
        DeviceOpen open;
        if (to_symbol) memmove((char*)symbol + offset, other, count);
        else memmove(other, (char*)symbol + offset, count);
        return cudaSuccess;
    };
    if (stream && capture(stream, op, "cudaMemcpyToSymbolAsync")) return cudaSuccess;
    if (!stream) flush_device_output();
    return op();
}
