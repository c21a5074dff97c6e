/* CUDA's cuda_fp16.h on the CPU: __half is g++'s _Float16 (IEEE binary16),
 * __half2 a pair of them. Arithmetic rounds to half precision after each
 * operation, like the GPU's half instructions. */
#pragma once
#include "wbsim_prelude.h"

typedef _Float16 __half;
typedef _Float16 half;
struct __attribute__((aligned(4))) __half2 { __half x, y; };
typedef __half2 half2;
struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };
typedef __half __nv_half;
typedef __half2 __nv_half2;

#define CUDART_INF_FP16 ((__half)__builtin_huge_valf())
#define CUDART_NAN_FP16 ((__half)__builtin_nanf(""))
#define CUDART_ZERO_FP16 ((__half)0.0f)
#define CUDART_ONE_FP16 ((__half)1.0f)
#define CUDART_MAX_NORMAL_FP16 ((__half)65504.0f)

static inline __half __float2half(float f) { return (__half)f; }
static inline __half __float2half_rn(float f) { return (__half)f; }
/* Round toward zero: round to nearest, then step back one unit toward zero
 * when that went up in magnitude. */
static inline __half __float2half_rz(float f) {
    __half h = (__half)f;
    if (f != f || fabsf((float)h) <= fabsf(f)) return h;
    unsigned short u;
    memcpy(&u, &h, 2);
    u = (unsigned short)(u - 1);  // the next smaller magnitude (inf -> 65504)
    memcpy(&h, &u, 2);
    return h;
}
static inline __half __double2half(double d) { return (__half)d; }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __int2half_rn(int i) { return (__half)i; }
static inline __half __uint2half_rn(unsigned i) { return (__half)i; }
static inline __half __short2half_rn(short i) { return (__half)i; }
static inline int __half2int_rn(__half h) { return __wbsim_sat<int>(nearbyintf((float)h)); }
static inline int __half2int_rz(__half h) { return __wbsim_sat<int>(truncf((float)h)); }
static inline unsigned __half2uint_rn(__half h) { return __wbsim_sat<unsigned>(nearbyintf((float)h)); }
static inline short __half2short_rn(__half h) { return __wbsim_sat<short>(nearbyintf((float)h)); }
static inline unsigned short __half_as_ushort(__half h) { unsigned short u; memcpy(&u, &h, 2); return u; }
static inline short __half_as_short(__half h) { short u; memcpy(&u, &h, 2); return u; }
static inline __half __ushort_as_half(unsigned short u) { __half h; memcpy(&h, &u, 2); return h; }
static inline __half __short_as_half(short u) { __half h; memcpy(&h, &u, 2); return h; }

static inline __half __hadd(__half a, __half b) { return a + b; }
static inline __half __hsub(__half a, __half b) { return a - b; }
static inline __half __hmul(__half a, __half b) { return a * b; }
static inline __half __hdiv(__half a, __half b) { return a / b; }
static inline __half __hfma(__half a, __half b, __half c) { return (__half)fmaf((float)a, (float)b, (float)c); }
static inline __half __hneg(__half a) { return -a; }
static inline __half __habs(__half a) { return a < (__half)0.0f ? -a : a; }
static inline __half __hadd_sat(__half a, __half b) { float r = (float)(a + b); return (__half)(r < 0 ? 0 : r > 1 ? 1 : r); }
static inline __half __hmul_sat(__half a, __half b) { float r = (float)(a * b); return (__half)(r < 0 ? 0 : r > 1 ? 1 : r); }
static inline __half __hmax(__half a, __half b) { return a > b ? a : b; }
static inline __half __hmin(__half a, __half b) { return a < b ? a : b; }
static inline bool __heq(__half a, __half b) { return a == b; }
static inline bool __hne(__half a, __half b) { return a != b; }
static inline bool __hlt(__half a, __half b) { return a < b; }
static inline bool __hle(__half a, __half b) { return a <= b; }
static inline bool __hgt(__half a, __half b) { return a > b; }
static inline bool __hge(__half a, __half b) { return a >= b; }
static inline bool __hisnan(__half a) { return a != a; }
static inline int __hisinf(__half a) { return isinf((float)a) ? (a > (__half)0.0f ? 1 : -1) : 0; }
static inline __half hsqrt(__half a) { return (__half)sqrtf((float)a); }
static inline __half hrsqrt(__half a) { return (__half)(1.0f / sqrtf((float)a)); }
static inline __half hrcp(__half a) { return (__half)(1.0f / (float)a); }
static inline __half hexp(__half a) { return (__half)expf((float)a); }
static inline __half hexp2(__half a) { return (__half)exp2f((float)a); }
static inline __half hlog(__half a) { return (__half)logf((float)a); }
static inline __half hlog2(__half a) { return (__half)log2f((float)a); }
static inline __half hsin(__half a) { return (__half)sinf((float)a); }
static inline __half hcos(__half a) { return (__half)cosf((float)a); }
static inline __half hfloor(__half a) { return (__half)floorf((float)a); }
static inline __half hceil(__half a) { return (__half)ceilf((float)a); }
static inline __half htrunc(__half a) { return (__half)truncf((float)a); }

static inline __half2 __halves2half2(__half a, __half b) { __half2 r = {a, b}; return r; }
static inline __half2 __half2half2(__half a) { __half2 r = {a, a}; return r; }
static inline __half2 make_half2(__half a, __half b) { __half2 r = {a, b}; return r; }
static inline __half2 __float2half2_rn(float f) { return __half2half2((__half)f); }
static inline __half2 __floats2half2_rn(float a, float b) { __half2 r = {(__half)a, (__half)b}; return r; }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float2 __half22float2(__half2 h) { float2 r = {(float)h.x, (float)h.y}; return r; }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline __half2 __lows2half2(__half2 a, __half2 b) { __half2 r = {a.x, b.x}; return r; }
static inline __half2 __highs2half2(__half2 a, __half2 b) { __half2 r = {a.y, b.y}; return r; }
static inline __half2 __hadd2(__half2 a, __half2 b) { __half2 r = {a.x + b.x, a.y + b.y}; return r; }
static inline __half2 __hsub2(__half2 a, __half2 b) { __half2 r = {a.x - b.x, a.y - b.y}; return r; }
static inline __half2 __hmul2(__half2 a, __half2 b) { __half2 r = {a.x * b.x, a.y * b.y}; return r; }
static inline __half2 __h2div(__half2 a, __half2 b) { __half2 r = {a.x / b.x, a.y / b.y}; return r; }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    __half2 r = {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; return r;
}
static inline __half2 __hneg2(__half2 a) { __half2 r = {-a.x, -a.y}; return r; }
static inline __half2 __habs2(__half2 a) { __half2 r = {__habs(a.x), __habs(a.y)}; return r; }
static inline __half2 __hmax2(__half2 a, __half2 b) { __half2 r = {__hmax(a.x, b.x), __hmax(a.y, b.y)}; return r; }
static inline __half2 __hmin2(__half2 a, __half2 b) { __half2 r = {__hmin(a.x, b.x), __hmin(a.y, b.y)}; return r; }
static inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
static inline __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
static inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
static inline __half2 operator/(__half2 a, __half2 b) { return __h2div(a, b); }
static inline __half2& operator+=(__half2& a, __half2 b) { a = a + b; return a; }
static inline __half2& operator*=(__half2& a, __half2 b) { a = a * b; return a; }

static inline __half atomicAdd(__half* p, __half v) {
    unsigned short* q = reinterpret_cast<unsigned short*>(p);
    unsigned short old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
    __half o;
    do {
        o = __ushort_as_half(old);
        next = __half_as_ushort((__half)(o + v));
    } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return o;
}
static inline __half2 atomicAdd(__half2* p, __half2 v) {
    __half2 old;
    old.x = atomicAdd(&p->x, v.x);
    old.y = atomicAdd(&p->y, v.y);
    return old;
}
