/* Texture and surface objects of whole programs on the simulator: tex1D/2D/3D, the layered
 * and cubemap forms, tex1Dfetch, surf1D/2D/3D read and write, as CUDA's texture_fetch_
 * functions and surface_functions define them. A cudaTextureObject_t is the address of a
 * __wbsim_texture the runtime made (cudaCreateTextureObject).
 *
 * Sampling follows the GPU: point sampling takes the texel under the coordinate, linear
 * filtering weighs the neighbours with weights of 8 fractional bits (the GPU's fixed
 * point); addresses wrap, mirror and clamp as the address mode says (wrap and mirror with
 * normalised coordinates only); 8- and 16-bit integers read as normalised floats when
 * asked. */
#ifndef WBSIM_TEXTURES_H
#define WBSIM_TEXTURES_H
#include <cmath>
#include <cstring>

#include "wbsim_abi.h"
#include "wbsim_runtime_types.h"

struct __wbsim_texture {
    unsigned char* data;
    size_t pitch;        /* bytes from one row to the next */
    size_t slice;        /* bytes from one 2D slice (or layer, or cube face) to the next */
    size_t width, height, depth;  /* depth: 3D depth, or layers (x 6 for cubemaps) */
    int dims;            /* 1, 2 or 3 */
    int layered, cubemap;
    int channels, channel_bytes;
    enum cudaChannelFormatKind kind;
    struct cudaTextureDesc desc;
    int is_surface;
};

/* The texel at integer coordinates, as up to four doubles (raw or normalised values). */
static inline void __wbsim_texel(const __wbsim_texture* t, long x, long y, long z, double out[4]) {
    const unsigned char* p = t->data + (size_t)z * t->slice + (size_t)y * t->pitch +
                             (size_t)x * (size_t)(t->channels * t->channel_bytes);
    bool normalise = t->desc.readMode == cudaReadModeNormalizedFloat && t->kind != cudaChannelFormatKindFloat;
    for (int c = 0; c < 4; ++c) {
        if (c >= t->channels) { out[c] = c == 3 ? 1.0 : 0.0; continue; }
        const unsigned char* q = p + c * t->channel_bytes;
        double v = 0;
        if (t->kind == cudaChannelFormatKindFloat) {
            if (t->channel_bytes == 4) { float f; memcpy(&f, q, 4); v = f; }
            else if (t->channel_bytes == 2) { _Float16 h; memcpy(&h, q, 2); v = (double)h; }
        } else if (t->kind == cudaChannelFormatKindSigned) {
            if (t->channel_bytes == 1) { signed char s; memcpy(&s, q, 1); v = normalise ? fmax(s / 127.0, -1.0) : s; }
            else if (t->channel_bytes == 2) { short s; memcpy(&s, q, 2); v = normalise ? fmax(s / 32767.0, -1.0) : s; }
            else { int s; memcpy(&s, q, 4); v = s; }
        } else {
            if (t->channel_bytes == 1) { unsigned char u = *q; v = normalise ? u / 255.0 : u; }
            else if (t->channel_bytes == 2) { unsigned short u; memcpy(&u, q, 2); v = normalise ? u / 65535.0 : u; }
            else { unsigned u; memcpy(&u, q, 4); v = u; }
        }
        out[c] = v;
    }
}

/* An integer coordinate past the edge, by the address mode; false: the border colour. */
static inline bool __wbsim_address(long* i, long n, enum cudaTextureAddressMode mode, int normalized) {
    if (*i >= 0 && *i < n) return true;
    if (normalized && mode == cudaAddressModeWrap) { *i = ((*i % n) + n) % n; return true; }
    if (normalized && mode == cudaAddressModeMirror) {
        long period = 2 * n, m = ((*i % period) + period) % period;
        *i = m < n ? m : period - 1 - m;
        return true;
    }
    if (mode == cudaAddressModeBorder) return false;
    *i = *i < 0 ? 0 : n - 1;
    return true;
}

/* Texel space: normalised coordinates scaled, wrapped and mirrored the GPU's way. */
static inline double __wbsim_texel_space(double u, long n, enum cudaTextureAddressMode mode, int normalized) {
    if (!normalized) return u;
    if (mode == cudaAddressModeWrap) u -= floor(u);
    else if (mode == cudaAddressModeMirror) {
        double f = floor(u);
        u -= f;
        if (((long)f) & 1) u = 1.0 - u;
    }
    return u * (double)n;
}

static inline void __wbsim_fetch_or_border(const __wbsim_texture* t, long x, long y, long z, long layer_base,
                                           double out[4]) {
    long n[3] = {(long)t->width, (long)t->height, (long)t->depth};
    long c[3] = {x, y, z};
    for (int d = 0; d < t->dims; ++d)
        if (!__wbsim_address(&c[d], n[d], t->desc.addressMode[d], t->desc.normalizedCoords)) {
            for (int k = 0; k < 4; ++k) out[k] = t->desc.borderColor[k];
            return;
        }
    __wbsim_texel(t, c[0], t->dims > 1 ? c[1] : 0, (t->dims > 2 ? c[2] : 0) + layer_base, out);
}

/* Sample at (u, v, w) in the texture's coordinates (dims of them); layer_base: the first
 * slice of the layer (or cube face) read. */
static inline void __wbsim_sample(unsigned long long obj, double u, double v, double w, long layer_base,
                                  double out[4]) {
    const __wbsim_texture* t = (const __wbsim_texture*)obj;
    if (!t) wbsim_trap("a texture fetch through a texture object that is 0 (not created?)");
    long n[3] = {(long)t->width, (long)t->height, (long)t->depth};
    double p[3] = {u, v, w};
    for (int d = 0; d < t->dims; ++d)
        p[d] = __wbsim_texel_space(p[d], n[d], t->desc.addressMode[d], t->desc.normalizedCoords);
    bool linear = t->desc.filterMode == cudaFilterModeLinear;
    if (!linear) {
        __wbsim_fetch_or_border(t, (long)floor(p[0]), (long)floor(p[1]), (long)floor(p[2]), layer_base, out);
        return;
    }
    long base[3] = {0, 0, 0};
    double frac[3] = {0, 0, 0};
    for (int d = 0; d < t->dims; ++d) {
        double b = p[d] - 0.5;
        base[d] = (long)floor(b);
        frac[d] = nearbyint((b - floor(b)) * 256.0) / 256.0;  /* 8 fractional bits, as the GPU */
    }
    for (int k = 0; k < 4; ++k) out[k] = 0;
    int corners = 1 << t->dims;
    for (int corner = 0; corner < corners; ++corner) {
        double weight = 1, texel[4];
        long c[3] = {base[0], base[1], base[2]};
        for (int d = 0; d < t->dims; ++d) {
            int hi = (corner >> d) & 1;
            c[d] += hi;
            weight *= hi ? frac[d] : 1.0 - frac[d];
        }
        if (weight == 0) continue;
        __wbsim_fetch_or_border(t, c[0], c[1], c[2], layer_base, texel);
        for (int k = 0; k < 4; ++k) out[k] += weight * texel[k];
    }
}

/* The fetched channels as the type the kernel asks for. */
template <class T> struct __wbsim_texval {
    static T make(const double v[4]) { return (T)v[0]; }
};
#define WBSIM_TEXVAL(V, T)                                                                       \
    template <> struct __wbsim_texval<V##1> { static V##1 make(const double v[4]) { V##1 r = {(T)v[0]}; return r; } }; \
    template <> struct __wbsim_texval<V##2> {                                                    \
        static V##2 make(const double v[4]) { V##2 r = {(T)v[0], (T)v[1]}; return r; } };        \
    template <> struct __wbsim_texval<V##4> {                                                    \
        static V##4 make(const double v[4]) { V##4 r = {(T)v[0], (T)v[1], (T)v[2], (T)v[3]}; return r; } };
WBSIM_TEXVAL(float, float)
WBSIM_TEXVAL(int, int)
WBSIM_TEXVAL(uint, unsigned)
WBSIM_TEXVAL(char, signed char)
WBSIM_TEXVAL(uchar, unsigned char)
WBSIM_TEXVAL(short, short)
WBSIM_TEXVAL(ushort, unsigned short)
#undef WBSIM_TEXVAL

template <class T> static inline T tex1Dfetch(cudaTextureObject_t obj, int x) {
    const __wbsim_texture* t = (const __wbsim_texture*)obj;
    if (!t) wbsim_trap("tex1Dfetch through a texture object that is 0 (not created?)");
    double v[4] = {0, 0, 0, 0};
    if (x >= 0 && (size_t)x < t->width) __wbsim_texel(t, x, 0, 0, v);
    return __wbsim_texval<T>::make(v);
}
template <class T> static inline T tex1D(cudaTextureObject_t obj, float x) {
    double v[4]; __wbsim_sample(obj, x, 0, 0, 0, v); return __wbsim_texval<T>::make(v);
}
template <class T> static inline T tex2D(cudaTextureObject_t obj, float x, float y) {
    double v[4]; __wbsim_sample(obj, x, y, 0, 0, v); return __wbsim_texval<T>::make(v);
}
template <class T> static inline T tex3D(cudaTextureObject_t obj, float x, float y, float z) {
    double v[4]; __wbsim_sample(obj, x, y, z, 0, v); return __wbsim_texval<T>::make(v);
}
template <class T> static inline T tex1DLayered(cudaTextureObject_t obj, float x, int layer) {
    double v[4]; __wbsim_sample(obj, x, 0, 0, layer, v); return __wbsim_texval<T>::make(v);
}
template <class T> static inline T tex2DLayered(cudaTextureObject_t obj, float x, float y, int layer) {
    double v[4]; __wbsim_sample(obj, x, y, 0, layer, v); return __wbsim_texval<T>::make(v);
}
/* The cube face a direction points at and the (s, t) on it, in [0, 1] (CUDA's table). */
static inline long __wbsim_cube_face(float x, float y, float z, double* s, double* t) {
    float ax = fabsf(x), ay = fabsf(y), az = fabsf(z);
    long face;
    double sc, tc, ma;
    if (ax >= ay && ax >= az) { face = x >= 0 ? 0 : 1; sc = x >= 0 ? -z : z; tc = -y; ma = ax; }
    else if (ay >= az) { face = y >= 0 ? 2 : 3; sc = x; tc = y >= 0 ? z : -z; ma = ay; }
    else { face = z >= 0 ? 4 : 5; sc = z >= 0 ? x : -x; tc = -y; ma = az; }
    *s = (sc / ma + 1) / 2;
    *t = (tc / ma + 1) / 2;
    return face;
}
template <class T> static inline T texCubemap(cudaTextureObject_t obj, float x, float y, float z) {
    double s, t, v[4];
    long face = __wbsim_cube_face(x, y, z, &s, &t);
    const __wbsim_texture* tx = (const __wbsim_texture*)obj;
    if (tx && !tx->desc.normalizedCoords) { s *= tx->width; t *= tx->height; }
    __wbsim_sample(obj, s, t, 0, face, v);
    return __wbsim_texval<T>::make(v);
}
template <class T> static inline T texCubemapLayered(cudaTextureObject_t obj, float x, float y, float z, int layer) {
    double s, t, v[4];
    long face = __wbsim_cube_face(x, y, z, &s, &t);
    const __wbsim_texture* tx = (const __wbsim_texture*)obj;
    if (tx && !tx->desc.normalizedCoords) { s *= tx->width; t *= tx->height; }
    __wbsim_sample(obj, s, t, 0, 6L * layer + face, v);
    return __wbsim_texval<T>::make(v);
}
/* the forms with an output pointer */
template <class T> static inline void tex1Dfetch(T* out, cudaTextureObject_t obj, int x) { *out = tex1Dfetch<T>(obj, x); }
template <class T> static inline void tex1D(T* out, cudaTextureObject_t obj, float x) { *out = tex1D<T>(obj, x); }
template <class T> static inline void tex2D(T* out, cudaTextureObject_t obj, float x, float y) { *out = tex2D<T>(obj, x, y); }
template <class T> static inline void tex3D(T* out, cudaTextureObject_t obj, float x, float y, float z) {
    *out = tex3D<T>(obj, x, y, z);
}

/* ---- surfaces: x is in bytes; out of range traps (cudaBoundaryModeTrap), is zero or clamps */
static inline unsigned char* __wbsim_surface_at(cudaSurfaceObject_t obj, int x, int y, int z, size_t bytes,
                                                enum cudaSurfaceBoundaryMode mode, bool* skip) {
    const __wbsim_texture* t = (const __wbsim_texture*)obj;
    if (!t) wbsim_trap("a surface access through a surface object that is 0 (not created?)");
    size_t texel = (size_t)(t->channels * t->channel_bytes);
    long n[3] = {(long)(t->width * texel), (long)t->height, (long)t->depth};
    long c[3] = {x, y, z};
    *skip = false;
    for (int d = 0; d < 3; ++d) {
        long limit = d == 0 ? n[0] - (long)bytes + 1 : (d < t->dims || (d == 2 && t->layered) ? n[d] : 1);
        if (c[d] >= 0 && c[d] < limit) continue;
        if (mode == cudaBoundaryModeClamp) { c[d] = c[d] < 0 ? 0 : limit - 1; continue; }
        if (mode == cudaBoundaryModeZero) { *skip = true; return nullptr; }
        wbsim_trap("a surface access out of bounds (cudaBoundaryModeTrap; on a GPU: cudaErrorLaunchFailure)");
    }
    return t->data + (size_t)c[2] * t->slice + (size_t)c[1] * t->pitch + (size_t)c[0];
}
template <class T> static inline void surf1Dwrite(T v, cudaSurfaceObject_t s, int x,
                                                  enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; unsigned char* p = __wbsim_surface_at(s, x, 0, 0, sizeof(T), m, &skip);
    if (!skip) memcpy(p, &v, sizeof(T));
}
template <class T> static inline void surf2Dwrite(T v, cudaSurfaceObject_t s, int x, int y,
                                                  enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; unsigned char* p = __wbsim_surface_at(s, x, y, 0, sizeof(T), m, &skip);
    if (!skip) memcpy(p, &v, sizeof(T));
}
template <class T> static inline void surf3Dwrite(T v, cudaSurfaceObject_t s, int x, int y, int z,
                                                  enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; unsigned char* p = __wbsim_surface_at(s, x, y, z, sizeof(T), m, &skip);
    if (!skip) memcpy(p, &v, sizeof(T));
}
template <class T> static inline void surf2DLayeredwrite(T v, cudaSurfaceObject_t s, int x, int y, int layer,
                                                         enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    surf3Dwrite(v, s, x, y, layer, m);
}
template <class T> static inline T surf1Dread(cudaSurfaceObject_t s, int x,
                                              enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; T v; memset(&v, 0, sizeof v);
    unsigned char* p = __wbsim_surface_at(s, x, 0, 0, sizeof(T), m, &skip);
    if (!skip) memcpy(&v, p, sizeof(T));
    return v;
}
template <class T> static inline T surf2Dread(cudaSurfaceObject_t s, int x, int y,
                                              enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; T v; memset(&v, 0, sizeof v);
    unsigned char* p = __wbsim_surface_at(s, x, y, 0, sizeof(T), m, &skip);
    if (!skip) memcpy(&v, p, sizeof(T));
    return v;
}
template <class T> static inline T surf3Dread(cudaSurfaceObject_t s, int x, int y, int z,
                                              enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    bool skip; T v; memset(&v, 0, sizeof v);
    unsigned char* p = __wbsim_surface_at(s, x, y, z, sizeof(T), m, &skip);
    if (!skip) memcpy(&v, p, sizeof(T));
    return v;
}
template <class T> static inline void surf2Dread(T* out, cudaSurfaceObject_t s, int x, int y,
                                                 enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    *out = surf2Dread<T>(s, x, y, m);
}
template <class T> static inline T surf2DLayeredread(cudaSurfaceObject_t s, int x, int y, int layer,
                                                     enum cudaSurfaceBoundaryMode m = cudaBoundaryModeTrap) {
    return surf3Dread<T>(s, x, y, layer, m);
}
#endif
