/* CUDA's cuda_fp16.h on the CPU: __half is g++'s _Float16 (IEEE binary16), __half2 a
 * pair of them with cuda_fp16.hpp's constructors and operators. Arithmetic rounds to
 * half precision after each operation, like the GPU's half instructions. */
#pragma once
#include "wbsim_prelude.h"

#define __CUDA_FP16_H__
#define __CUDA_FP16_HPP__
#define __CUDA_FP16_TYPES_EXIST__

typedef _Float16 __half;
typedef _Float16 half;
struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };
static inline unsigned short __half_as_ushort(__half h) { unsigned short u; memcpy(&u, &h, 2); return u; }
static inline __half __ushort_as_half(unsigned short u) { __half h; memcpy(&h, &u, 2); return h; }

struct __attribute__((aligned(4))) __half2 {
    __half x, y;
    __half2() = default;
    constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
    __half2(const __half2_raw& r) : x(__ushort_as_half(r.x)), y(__ushort_as_half(r.y)) {}
    __half2& operator=(const __half2_raw& r) { x = __ushort_as_half(r.x); y = __ushort_as_half(r.y); return *this; }
    operator __half2_raw() const { __half2_raw r = {__half_as_ushort(x), __half_as_ushort(y)}; return r; }
};
typedef __half2 half2;
typedef __half __nv_half;
typedef __half2 __nv_half2;
typedef __half_raw __nv_half_raw;
typedef __half2_raw __nv_half2_raw;

#define CUDART_INF_FP16 ((__half)__builtin_huge_valf())
#define CUDART_NAN_FP16 ((__half)__builtin_nanf(""))
#define CUDART_ZERO_FP16 ((__half)0.0f)
#define CUDART_ONE_FP16 ((__half)1.0f)
#define CUDART_MAX_NORMAL_FP16 ((__half)65504.0f)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)

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
static inline __half __ushort2half_rn(unsigned short i) { return (__half)i; }
static inline __half __ll2half_rn(long long i) { return (__half)(float)i; }
static inline int __half2int_rn(__half h) { return __wbsim_sat<int>(nearbyintf((float)h)); }
static inline int __half2int_rz(__half h) { return __wbsim_sat<int>(truncf((float)h)); }
static inline int __half2int_rd(__half h) { return __wbsim_sat<int>(floorf((float)h)); }
static inline int __half2int_ru(__half h) { return __wbsim_sat<int>(ceilf((float)h)); }
static inline unsigned __half2uint_rn(__half h) { return __wbsim_sat<unsigned>(nearbyintf((float)h)); }
static inline unsigned __half2uint_rz(__half h) { return __wbsim_sat<unsigned>(truncf((float)h)); }
static inline short __half2short_rn(__half h) { return __wbsim_sat<short>(nearbyintf((float)h)); }
static inline short __half2short_rz(__half h) { return __wbsim_sat<short>(truncf((float)h)); }
static inline unsigned short __half2ushort_rn(__half h) { return __wbsim_sat<unsigned short>(nearbyintf((float)h)); }
static inline long long __half2ll_rn(__half h) { return __wbsim_sat<long long>(nearbyintf((float)h)); }
static inline short __half_as_short(__half h) { short u; memcpy(&u, &h, 2); return u; }
static inline __half __short_as_half(short u) { __half h; memcpy(&h, &u, 2); return h; }

static inline __half __hadd(__half a, __half b) { return a + b; }
static inline __half __hsub(__half a, __half b) { return a - b; }
static inline __half __hmul(__half a, __half b) { return a * b; }
static inline __half __hdiv(__half a, __half b) { return a / b; }
static inline __half __hadd_rn(__half a, __half b) { return a + b; }
static inline __half __hsub_rn(__half a, __half b) { return a - b; }
static inline __half __hmul_rn(__half a, __half b) { return a * b; }
static inline __half __hfma(__half a, __half b, __half c) { return (__half)fmaf((float)a, (float)b, (float)c); }
static inline __half __hneg(__half a) { return -a; }
static inline __half __habs(__half a) { return a < (__half)0.0f ? -a : a; }
static inline __half __wbsim_sat01(float r) { return (__half)(r < 0 ? 0 : r > 1 ? 1 : r); }
static inline __half __hadd_sat(__half a, __half b) { return __wbsim_sat01((float)(a + b)); }
static inline __half __hsub_sat(__half a, __half b) { return __wbsim_sat01((float)(a - b)); }
static inline __half __hmul_sat(__half a, __half b) { return __wbsim_sat01((float)(a * b)); }
static inline __half __hfma_sat(__half a, __half b, __half c) { return __wbsim_sat01((float)__hfma(a, b, c)); }
static inline __half __hfma_relu(__half a, __half b, __half c) { __half r = __hfma(a, b, c); return r < (__half)0.0f ? (__half)0.0f : r; }
static inline __half __hmax(__half a, __half b) { return a != a ? b : b != b ? a : a > b ? a : b; }
static inline __half __hmin(__half a, __half b) { return a != a ? b : b != b ? a : a < b ? a : b; }
static inline __half __hmax_nan(__half a, __half b) { return a != a ? a : b != b ? b : a > b ? a : b; }
static inline __half __hmin_nan(__half a, __half b) { return a != a ? a : b != b ? b : a < b ? a : b; }
static inline bool __heq(__half a, __half b) { return a == b; }
static inline bool __hne(__half a, __half b) { return a == a && b == b && a != b; }
static inline bool __hlt(__half a, __half b) { return a < b; }
static inline bool __hle(__half a, __half b) { return a <= b; }
static inline bool __hgt(__half a, __half b) { return a > b; }
static inline bool __hge(__half a, __half b) { return a >= b; }
static inline bool __hequ(__half a, __half b) { return !(a < b) && !(a > b); }
static inline bool __hneu(__half a, __half b) { return a != b; }
static inline bool __hltu(__half a, __half b) { return !(a >= b); }
static inline bool __hleu(__half a, __half b) { return !(a > b); }
static inline bool __hgtu(__half a, __half b) { return !(a <= b); }
static inline bool __hgeu(__half a, __half b) { return !(a < b); }
static inline bool __hisnan(__half a) { return a != a; }
static inline int __hisinf(__half a) { return isinf((float)a) ? (a > (__half)0.0f ? 1 : -1) : 0; }
static inline __half hsqrt(__half a) { return (__half)sqrtf((float)a); }
static inline __half hrsqrt(__half a) { return (__half)(1.0f / sqrtf((float)a)); }
static inline __half hrcp(__half a) { return (__half)(1.0f / (float)a); }
static inline __half hexp(__half a) { return (__half)expf((float)a); }
static inline __half hexp2(__half a) { return (__half)exp2f((float)a); }
static inline __half hexp10(__half a) { return (__half)exp10f((float)a); }
static inline __half hlog(__half a) { return (__half)logf((float)a); }
static inline __half hlog2(__half a) { return (__half)log2f((float)a); }
static inline __half hlog10(__half a) { return (__half)log10f((float)a); }
static inline __half hsin(__half a) { return (__half)sinf((float)a); }
static inline __half hcos(__half a) { return (__half)cosf((float)a); }
static inline __half htanh(__half a) { return (__half)tanhf((float)a); }
static inline __half hfloor(__half a) { return (__half)floorf((float)a); }
static inline __half hceil(__half a) { return (__half)ceilf((float)a); }
static inline __half htrunc(__half a) { return (__half)truncf((float)a); }
static inline __half hrint(__half a) { return (__half)nearbyintf((float)a); }

/* ---- __half2 ------------------------------------------------------------------- */
#define WBSIM_H2(expr_x, expr_y) __half2((__half)(expr_x), (__half)(expr_y))
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __float2half2_rn(float f) { return __half2half2((__half)f); }
static inline __half2 __floats2half2_rn(float a, float b) { return WBSIM_H2(a, b); }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float2 __half22float2(__half2 h) { float2 r = {(float)h.x, (float)h.y}; return r; }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline __half2 __low2half2(__half2 h) { return __half2(h.x, h.x); }
static inline __half2 __high2half2(__half2 h) { return __half2(h.y, h.y); }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(a.x + b.x, a.y + b.y); }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(a.x - b.x, a.y - b.y); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(a.x * b.x, a.y * b.y); }
static inline __half2 __hadd2_rn(__half2 a, __half2 b) { return __hadd2(a, b); }
static inline __half2 __hsub2_rn(__half2 a, __half2 b) { return __hsub2(a, b); }
static inline __half2 __hmul2_rn(__half2 a, __half2 b) { return __hmul2(a, b); }
static inline __half2 __h2div(__half2 a, __half2 b) { return __half2(a.x / b.x, a.y / b.y); }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __half2 __hfma2_relu(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y));
}
static inline __half2 __hadd2_sat(__half2 a, __half2 b) { return __half2(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); }
static inline __half2 __hsub2_sat(__half2 a, __half2 b) { return __half2(__hsub_sat(a.x, b.x), __hsub_sat(a.y, b.y)); }
static inline __half2 __hmul2_sat(__half2 a, __half2 b) { return __half2(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); }
static inline __half2 __hfma2_sat(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y));
}
static inline __half2 __hneg2(__half2 a) { return __half2(-a.x, -a.y); }
static inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
#define WBSIM_H2_COMPARES(X) X(eq, __heq) X(ne, __hne) X(lt, __hlt) X(le, __hle) X(gt, __hgt) X(ge, __hge) \
    X(equ, __hequ) X(neu, __hneu) X(ltu, __hltu) X(leu, __hleu) X(gtu, __hgtu) X(geu, __hgeu)
#define WBSIM_H2_ONE(suffix, op) \
    static inline __half2 __h##suffix##2(__half2 a, __half2 b) { \
        return __half2((__half)(op(a.x, b.x) ? 1.0f : 0.0f), (__half)(op(a.y, b.y) ? 1.0f : 0.0f)); } \
    static inline bool __hb##suffix##2(__half2 a, __half2 b) { return op(a.x, b.x) && op(a.y, b.y); }
WBSIM_H2_COMPARES(WBSIM_H2_ONE)
#undef WBSIM_H2_ONE
#undef WBSIM_H2_COMPARES
static inline __half2 __hisnan2(__half2 a) { return __half2((__half)(a.x != a.x ? 1.0f : 0.0f), (__half)(a.y != a.y ? 1.0f : 0.0f)); }
#define WBSIM_H2_MATH(name, fn) static inline __half2 name(__half2 a) { return __half2(fn(a.x), fn(a.y)); }
WBSIM_H2_MATH(h2sqrt, hsqrt) WBSIM_H2_MATH(h2rsqrt, hrsqrt) WBSIM_H2_MATH(h2rcp, hrcp)
WBSIM_H2_MATH(h2exp, hexp) WBSIM_H2_MATH(h2exp2, hexp2) WBSIM_H2_MATH(h2exp10, hexp10)
WBSIM_H2_MATH(h2log, hlog) WBSIM_H2_MATH(h2log2, hlog2) WBSIM_H2_MATH(h2log10, hlog10)
WBSIM_H2_MATH(h2sin, hsin) WBSIM_H2_MATH(h2cos, hcos) WBSIM_H2_MATH(h2tanh, htanh)
WBSIM_H2_MATH(h2floor, hfloor) WBSIM_H2_MATH(h2ceil, hceil) WBSIM_H2_MATH(h2trunc, htrunc)
WBSIM_H2_MATH(h2rint, hrint)
#undef WBSIM_H2_MATH
#undef WBSIM_H2

static inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
static inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
static inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
static inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
static inline __half2& operator+=(__half2& a, const __half2& b) { a = a + b; return a; }
static inline __half2& operator-=(__half2& a, const __half2& b) { a = a - b; return a; }
static inline __half2& operator*=(__half2& a, const __half2& b) { a = a * b; return a; }
static inline __half2& operator/=(__half2& a, const __half2& b) { a = a / b; return a; }
static inline __half2& operator++(__half2& a) { a = a + __half2half2((__half)1.0f); return a; }
static inline __half2& operator--(__half2& a) { a = a - __half2half2((__half)1.0f); return a; }
static inline __half2 operator++(__half2& a, int) { __half2 o = a; ++a; return o; }
static inline __half2 operator--(__half2& a, int) { __half2 o = a; --a; return o; }
static inline __half2 operator+(const __half2& a) { return a; }
static inline __half2 operator-(const __half2& a) { return __hneg2(a); }
static inline bool operator==(const __half2& a, const __half2& b) { return __hbeq2(a, b); }
static inline bool operator!=(const __half2& a, const __half2& b) { return __hbneu2(a, b); }
static inline bool operator<(const __half2& a, const __half2& b) { return __hblt2(a, b); }
static inline bool operator<=(const __half2& a, const __half2& b) { return __hble2(a, b); }
static inline bool operator>(const __half2& a, const __half2& b) { return __hbgt2(a, b); }
static inline bool operator>=(const __half2& a, const __half2& b) { return __hbge2(a, b); }

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
