// CUDA arrays, 3D copies, texture and surface objects of whole programs on the
// simulator. An array is device memory with its texels packed row after row, slice after
// slice (layers and cube faces are slices); texture and surface objects describe an
// array, linear or pitched memory for the fetch functions of wbsim_textures.h.
#include <set>

#include "cudart_internal.h"

struct cudaArray {
    cudaChannelFormatDesc desc;
    size_t width, height, depth;  // as allocated (0: the dimension is not used)
    unsigned flags;
    size_t texel;                 // bytes
    unsigned char* data;
    size_t pitch() const { return width * texel; }
    size_t rows() const { return height ? height : 1; }
    size_t slice() const { return pitch() * rows(); }
    size_t slices() const { return depth ? depth : 1; }
};
static std::set<cudaArray_t> g_arrays;
static std::set<__wbsim_texture*> g_textures;

void free_all_arrays() {
    for (cudaArray_t a : g_arrays) delete a;
    for (__wbsim_texture* t : g_textures) delete t;
    g_arrays.clear();
    g_textures.clear();
}

extern "C" cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, cudaChannelFormatKind f) {
    cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}

static bool channels_of(const cudaChannelFormatDesc& d, int* channels, int* bytes) {
    int bits[4] = {d.x, d.y, d.z, d.w};
    int n = 0;
    for (int i = 0; i < 4; ++i) {
        if (!bits[i]) break;
        if (bits[i] != d.x) return false;
        ++n;
    }
    if (n == 0 || n == 3 || (d.x != 8 && d.x != 16 && d.x != 32)) return false;
    if (d.f == cudaChannelFormatKindFloat && d.x == 8) return false;
    if (d.f != cudaChannelFormatKindFloat && d.f != cudaChannelFormatKindSigned &&
        d.f != cudaChannelFormatKindUnsigned) return false;
    *channels = n;
    *bytes = d.x / 8;
    return true;
}

static cudaError_t make_array(cudaArray_t* out, const cudaChannelFormatDesc* desc, cudaExtent e, unsigned flags,
                              const char* api) {
    if (!out || !desc) return fail(cudaErrorInvalidValue, "%s: a NULL pointer", api);
    int channels, bytes;
    if (!channels_of(*desc, &channels, &bytes))
        return fail(cudaErrorInvalidChannelDescriptor, "%s: channels of (%d,%d,%d,%d) bits: 1, 2 or 4 channels "
                    "of 8, 16 or 32 bits", api, desc->x, desc->y, desc->z, desc->w);
    if (e.width == 0) return fail(cudaErrorInvalidValue, "%s: a width of 0", api);
    if ((flags & cudaArrayCubemap) && (e.width != e.height || e.depth % 6 != 0))
        return fail(cudaErrorInvalidValue, "%s: a cubemap is square (width = height) with 6 faces a layer "
                    "(depth a multiple of 6)", api);
    cudaArray_t a = new cudaArray{*desc, e.width, e.height, e.depth, flags, (size_t)(channels * bytes), nullptr};
    a->data = (unsigned char*)device_alloc(a->slice() * a->slices(), api);
    if (!a->data) { delete a; return cudaErrorMemoryAllocation; }
    g_arrays.insert(a);
    *out = a;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width,
                                       size_t height, unsigned int flags) {
    API_ENTER();
    return make_array(array, desc, make_cudaExtent(width, height, 0), flags, "cudaMallocArray");
}
extern "C" cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                                         unsigned int flags) {
    API_ENTER();
    return make_array(array, desc, extent, flags, "cudaMalloc3DArray");
}
extern "C" cudaError_t cudaFreeArray(cudaArray_t array) {
    API_ENTER();
    flush_device_output();
    if (!array) return cudaSuccess;
    if (!g_arrays.erase(array)) return fail(cudaErrorInvalidResourceHandle, "cudaFreeArray: unknown array");
    device_free(array->data);
    delete array;
    return cudaSuccess;
}
extern "C" cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent, unsigned int* flags,
                                        cudaArray_t array) {
    API_ENTER();
    if (!g_arrays.count(array)) return fail(cudaErrorInvalidResourceHandle);
    if (desc) *desc = array->desc;
    if (extent) *extent = make_cudaExtent(array->width, array->height, array->depth);
    if (flags) *flags = array->flags;
    return cudaSuccess;
}

// -- copies to and from arrays ----------------------------------------------------------
// Rows of width bytes between (array, byte offset x, row y) and linear memory.
static cudaError_t array_rows(cudaArray_t a, size_t x, size_t y, void* other, size_t other_pitch, size_t width,
                              size_t height, bool to_array, cudaMemcpyKind kind, const char* api) {
    if (!g_arrays.count(a)) return fail(cudaErrorInvalidResourceHandle, "%s: unknown array", api);
    if (x + width > a->pitch() || y + height > a->rows() * a->slices())
        return fail(cudaErrorInvalidValue, "%s: %zu x %zu bytes at (%zu, %zu) do not fit the array's %zu x %zu",
                    api, width, height, x, y, a->pitch(), a->rows() * a->slices());
    for (size_t r = 0; r < height; ++r) {
        unsigned char* in_array = a->data + (y + r) * a->pitch() + x;
        unsigned char* in_other = (unsigned char*)other + r * other_pitch;
        cudaError_t e = to_array ? checked_copy(in_array, in_other, width, kind, api)
                                 : checked_copy(in_other, in_array, width, kind, api);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t w, size_t h, const void* src, size_t spitch,
                                           size_t width, size_t height, cudaMemcpyKind kind) {
    API_ENTER();
    if (width > spitch) return fail(cudaErrorInvalidPitchValue, "cudaMemcpy2DToArray: width > spitch");
    return array_rows(dst, w, h, (void*)src, spitch, width, height, true, kind, "cudaMemcpy2DToArray");
}
extern "C" cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t w, size_t h, const void* src, size_t spitch,
                                                size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy2DToArray(dst, w, h, src, spitch, width, height, kind);
}
extern "C" cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t w, size_t h,
                                             size_t width, size_t height, cudaMemcpyKind kind) {
    API_ENTER();
    flush_device_output();
    if (width > dpitch) return fail(cudaErrorInvalidPitchValue, "cudaMemcpy2DFromArray: width > dpitch");
    return array_rows((cudaArray_t)src, w, h, dst, dpitch, width, height, false, kind, "cudaMemcpy2DFromArray");
}
extern "C" cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src, size_t w, size_t h,
                                                  size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy2DFromArray(dst, dpitch, src, w, h, width, height, kind);
}
// The deprecated linear forms: count bytes from (w, h), row after row.
static cudaError_t array_linear(cudaArray_t a, size_t w, size_t h, void* other, size_t count, bool to_array,
                                cudaMemcpyKind kind, const char* api) {
    if (!g_arrays.count(a)) return fail(cudaErrorInvalidResourceHandle, "%s: unknown array", api);
    size_t offset = h * a->pitch() + w, total = a->slice() * a->slices();
    if (offset > total || count > total - offset)
        return fail(cudaErrorInvalidValue, "%s: %zu bytes from (%zu, %zu) run past the array's %zu bytes", api,
                    count, w, h, total);
    return to_array ? checked_copy(a->data + offset, other, count, kind, api)
                    : checked_copy(other, a->data + offset, count, kind, api);
}
extern "C" cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t w, size_t h, const void* src, size_t count,
                                         cudaMemcpyKind kind) {
    API_ENTER();
    return array_linear(dst, w, h, (void*)src, count, true, kind, "cudaMemcpyToArray");
}
extern "C" cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t w, size_t h, size_t count,
                                           cudaMemcpyKind kind) {
    API_ENTER();
    flush_device_output();
    return array_linear((cudaArray_t)src, w, h, dst, count, false, kind, "cudaMemcpyFromArray");
}

// -- 3D copies: arrays or pitched memory on either side ------------------------------------
struct Side3D { unsigned char* base; size_t pitch, slice, x; };
static bool side_3d(cudaArray_t a, cudaPitchedPtr p, cudaPos pos, size_t texel, Side3D* s, const char* role) {
    if (a) {
        if (!g_arrays.count(a)) {
            fail(cudaErrorInvalidResourceHandle, "cudaMemcpy3D: the %s array is unknown", role);
            return false;
        }
        *s = Side3D{a->data + pos.z * a->slice() + pos.y * a->pitch(), a->pitch(), a->slice(), pos.x * texel};
        return true;
    }
    if (!p.ptr) {
        fail(cudaErrorInvalidValue, "cudaMemcpy3D: the %s is neither an array nor a pitched pointer", role);
        return false;
    }
    size_t slice = p.pitch * p.ysize;
    *s = Side3D{(unsigned char*)p.ptr + pos.z * slice + pos.y * p.pitch, p.pitch, slice, pos.x * texel};
    return true;
}
extern "C" cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms* p) {
    API_ENTER();
    flush_device_output();
    if (!p) return fail(cudaErrorInvalidValue, "cudaMemcpy3D: p is NULL");
    if ((p->srcArray && p->srcPtr.ptr) || (p->dstArray && p->dstPtr.ptr))
        return fail(cudaErrorInvalidValue, "cudaMemcpy3D: a side with both an array and a pointer");
    // with an array, the extent (and x positions) count its texels; else bytes
    size_t texel = p->srcArray && g_arrays.count(p->srcArray) ? p->srcArray->texel
                 : p->dstArray && g_arrays.count(p->dstArray) ? p->dstArray->texel : 1;
    Side3D src, dst;
    if (!side_3d(p->srcArray, p->srcPtr, p->srcPos, texel, &src, "source") ||
        !side_3d(p->dstArray, p->dstPtr, p->dstPos, texel, &dst, "destination"))
        return cudaErrorInvalidValue;
    size_t width = p->extent.width * texel;
    size_t height = p->extent.height ? p->extent.height : 1, depth = p->extent.depth ? p->extent.depth : 1;
    if (width > dst.pitch || width > src.pitch)
        return fail(cudaErrorInvalidValue, "cudaMemcpy3D: rows of %zu bytes, wider than a pitch (%zu, %zu)",
                    width, src.pitch, dst.pitch);
    for (size_t z = 0; z < depth; ++z)
        for (size_t y = 0; y < height; ++y) {
            cudaError_t e = checked_copy(dst.base + z * dst.slice + y * dst.pitch + dst.x,
                                         src.base + z * src.slice + y * src.pitch + src.x, width, p->kind,
                                         "cudaMemcpy3D");
            if (e != cudaSuccess) return e;
        }
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t) { return cudaMemcpy3D(p); }

// -- texture and surface objects -----------------------------------------------------------
static cudaError_t describe(const cudaResourceDesc* res, __wbsim_texture* t, const char* api) {
    int channels = 0, bytes = 0;
    switch (res->resType) {
        case cudaResourceTypeArray: {
            cudaArray_t a = res->res.array.array;
            if (!g_arrays.count(a)) return fail(cudaErrorInvalidResourceHandle, "%s: unknown array", api);
            channels_of(a->desc, &channels, &bytes);
            t->kind = a->desc.f;
            t->data = a->data;
            t->pitch = a->pitch();
            t->slice = a->slice();
            t->width = a->width;
            t->height = a->rows();
            t->depth = a->slices();
            t->layered = (a->flags & cudaArrayLayered) != 0;
            t->cubemap = (a->flags & cudaArrayCubemap) != 0;
            if (t->cubemap || (t->layered && a->height)) t->dims = 2;
            else if (t->layered) { t->dims = 1; t->slice = t->pitch; t->depth = a->slices(); }
            else t->dims = a->depth ? 3 : a->height ? 2 : 1;
            t->is_surface = (a->flags & cudaArraySurfaceLoadStore) != 0;
            break;
        }
        case cudaResourceTypeLinear:
            if (!channels_of(res->res.linear.desc, &channels, &bytes))
                return fail(cudaErrorInvalidChannelDescriptor, "%s: an invalid channel descriptor", api);
            t->kind = res->res.linear.desc.f;
            t->data = (unsigned char*)res->res.linear.devPtr;
            t->width = res->res.linear.sizeInBytes / (size_t)(channels * bytes);
            t->height = t->depth = 1;
            t->pitch = t->slice = res->res.linear.sizeInBytes;
            t->dims = 1;
            break;
        case cudaResourceTypePitch2D:
            if (!channels_of(res->res.pitch2D.desc, &channels, &bytes))
                return fail(cudaErrorInvalidChannelDescriptor, "%s: an invalid channel descriptor", api);
            if (res->res.pitch2D.pitchInBytes < res->res.pitch2D.width * (size_t)(channels * bytes))
                return fail(cudaErrorInvalidPitchValue, "%s: a pitch smaller than a row", api);
            t->kind = res->res.pitch2D.desc.f;
            t->data = (unsigned char*)res->res.pitch2D.devPtr;
            t->width = res->res.pitch2D.width;
            t->height = res->res.pitch2D.height;
            t->depth = 1;
            t->pitch = res->res.pitch2D.pitchInBytes;
            t->slice = t->pitch * t->height;
            t->dims = 2;
            break;
        default:
            return fail(cudaErrorNotSupported, "%s: mipmapped arrays are not supported by the simulator; run the "
                        "program on a GPU", api);
    }
    t->channels = channels;
    t->channel_bytes = bytes;
    return cudaSuccess;
}
extern "C" cudaError_t cudaCreateTextureObject(cudaTextureObject_t* tex, const cudaResourceDesc* res,
                                               const cudaTextureDesc* desc, const cudaResourceViewDesc*) {
    API_ENTER();
    if (!tex || !res || !desc) return fail(cudaErrorInvalidValue, "cudaCreateTextureObject: a NULL pointer");
    __wbsim_texture* t = new __wbsim_texture();
    cudaError_t e = describe(res, t, "cudaCreateTextureObject");
    if (e != cudaSuccess) { delete t; return e; }
    t->desc = *desc;
    t->is_surface = 0;
    if (desc->filterMode == cudaFilterModeLinear && t->kind != cudaChannelFormatKindFloat &&
        desc->readMode != cudaReadModeNormalizedFloat) {
        delete t;
        return fail(cudaErrorInvalidFilterSetting, "cudaCreateTextureObject: linear filtering of integer texels "
                    "needs cudaReadModeNormalizedFloat");
    }
    if (desc->readMode == cudaReadModeNormalizedFloat && t->kind != cudaChannelFormatKindFloat &&
        t->channel_bytes == 4) {
        delete t;
        return fail(cudaErrorInvalidNormSetting);
    }
    g_textures.insert(t);
    *tex = (cudaTextureObject_t)t;
    return cudaSuccess;
}
static __wbsim_texture* known_object(unsigned long long handle) {
    __wbsim_texture* t = (__wbsim_texture*)handle;
    return g_textures.count(t) ? t : nullptr;
}
extern "C" cudaError_t cudaDestroyTextureObject(cudaTextureObject_t tex) {
    API_ENTER();
    __wbsim_texture* t = known_object(tex);
    if (!t) return tex ? fail(cudaErrorInvalidValue, "cudaDestroyTextureObject: unknown texture object") : cudaSuccess;
    g_textures.erase(t);
    delete t;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetTextureObjectTextureDesc(cudaTextureDesc* desc, cudaTextureObject_t tex) {
    API_ENTER();
    __wbsim_texture* t = known_object(tex);
    if (!t || !desc) return fail(cudaErrorInvalidValue);
    *desc = t->desc;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetTextureObjectResourceDesc(cudaResourceDesc*, cudaTextureObject_t) {
    API_ENTER();
    return fail(cudaErrorNotSupported, "cudaGetTextureObjectResourceDesc is not supported by the simulator");
}
extern "C" cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* surf, const cudaResourceDesc* res) {
    API_ENTER();
    if (!surf || !res) return fail(cudaErrorInvalidValue, "cudaCreateSurfaceObject: a NULL pointer");
    if (res->resType != cudaResourceTypeArray)
        return fail(cudaErrorInvalidValue, "cudaCreateSurfaceObject: a surface is an array (cudaResourceTypeArray)");
    __wbsim_texture* t = new __wbsim_texture();
    cudaError_t e = describe(res, t, "cudaCreateSurfaceObject");
    if (e != cudaSuccess) { delete t; return e; }
    if (!t->is_surface) {
        delete t;
        return fail(cudaErrorInvalidValue, "cudaCreateSurfaceObject: the array was not made with "
                    "cudaArraySurfaceLoadStore");
    }
    g_textures.insert(t);
    *surf = (cudaSurfaceObject_t)t;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surf) {
    API_ENTER();
    __wbsim_texture* t = known_object(surf);
    if (!t) return surf ? fail(cudaErrorInvalidValue, "cudaDestroySurfaceObject: unknown surface object") : cudaSuccess;
    g_textures.erase(t);
    delete t;
    return cudaSuccess;
}
