/* CUDA's cuda_bf16.h on the CPU: __nv_bfloat16 keeps the 16 bits of a bfloat16 (the high
 * half of a float); conversions from float round to nearest even, as __float2bfloat16 does,
 * and arithmetic is done in float and rounded to bfloat16 after each operation, like the
 * GPU's bfloat16 instructions. Constructors, conversions and operators are those of
 * cuda_bf16.hpp that nvcc accepts. Whole programs only (cells on the simulator have no
 * bfloat16). */
#pragma once
#include "wbsim_prelude.h"
#include "cuda_fp16.h"

#define __CUDA_BF16_H__
#define __CUDA_BF16_HPP__
#define __CUDA_BF16_TYPES_EXIST__

struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

static inline unsigned short __wbsim_float_to_bf16_bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest, ties to even */
    return (unsigned short)(u >> 16);
}
static inline float __wbsim_bf16_bits_to_float(unsigned short b) {
    unsigned u = (unsigned)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(__wbsim_float_to_bf16_bits(f)) {}
    __nv_bfloat16(double d) : __x(__wbsim_float_to_bf16_bits((float)d)) {}
    __nv_bfloat16(__half h) : __x(__wbsim_float_to_bf16_bits((float)h)) {}
    __nv_bfloat16(short v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(unsigned short v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(int v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(unsigned int v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(long v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(unsigned long v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(long long v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16(unsigned long long v) : __nv_bfloat16((float)v) {}
    __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) { __x = r.x; return *this; }
    __nv_bfloat16& operator=(float f) { __x = __wbsim_float_to_bf16_bits(f); return *this; }
    __nv_bfloat16& operator=(double d) { __x = __wbsim_float_to_bf16_bits((float)d); return *this; }
    operator __nv_bfloat16_raw() const { __nv_bfloat16_raw r = {__x}; return r; }
    operator float() const { return __wbsim_bf16_bits_to_float(__x); }
    explicit operator bool() const { return (__x & 0x7fffu) != 0; }
    explicit operator short() const { return (short)(float)*this; }
    explicit operator unsigned short() const { return (unsigned short)(float)*this; }
    explicit operator int() const { return (int)(float)*this; }
    explicit operator unsigned int() const { return (unsigned int)(float)*this; }
    explicit operator long long() const { return (long long)(float)*this; }
    explicit operator unsigned long long() const { return (unsigned long long)(float)*this; }
    explicit operator double() const { return (double)(float)*this; }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
    __nv_bfloat162(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; }
    __nv_bfloat162& operator=(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; return *this; }
    operator __nv_bfloat162_raw() const { __nv_bfloat162_raw r = {x.__x, y.__x}; return r; }
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)

typedef __nv_bfloat16 __wbsim_bf;
static inline __wbsim_bf __ushort_as_bfloat16(unsigned short u) { __wbsim_bf b; b.__x = u; return b; }
static inline unsigned short __bfloat16_as_ushort(__wbsim_bf b) { return b.__x; }
static inline short __bfloat16_as_short(__wbsim_bf b) { return (short)b.__x; }
static inline __wbsim_bf __short_as_bfloat16(short s) { return __ushort_as_bfloat16((unsigned short)s); }
static inline __wbsim_bf __float2bfloat16(float f) { return __wbsim_bf(f); }
static inline __wbsim_bf __float2bfloat16_rn(float f) { return __wbsim_bf(f); }
static inline __wbsim_bf __float2bfloat16_rz(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return __ushort_as_bfloat16((unsigned short)(u >> 16));
}
static inline __wbsim_bf __double2bfloat16(double d) { return __wbsim_bf((float)d); }
static inline float __bfloat162float(__wbsim_bf b) { return (float)b; }
static inline __wbsim_bf __int2bfloat16_rn(int i) { return __wbsim_bf((float)i); }
static inline __wbsim_bf __uint2bfloat16_rn(unsigned i) { return __wbsim_bf((float)i); }
static inline int __bfloat162int_rn(__wbsim_bf b) { return __wbsim_sat<int>(nearbyintf((float)b)); }
static inline int __bfloat162int_rz(__wbsim_bf b) { return __wbsim_sat<int>(truncf((float)b)); }
static inline unsigned __bfloat162uint_rz(__wbsim_bf b) { return __wbsim_sat<unsigned>(truncf((float)b)); }
static inline __half __bfloat162half(__wbsim_bf b) { return (__half)(float)b; }

/* the arithmetic of cuda_bf16.hpp: overloads of the __half intrinsics' names */
static inline __wbsim_bf __hadd(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf((float)a + (float)b); }
static inline __wbsim_bf __hsub(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf((float)a - (float)b); }
static inline __wbsim_bf __hmul(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf((float)a * (float)b); }
static inline __wbsim_bf __hdiv(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf((float)a / (float)b); }
static inline __wbsim_bf __hfma(__wbsim_bf a, __wbsim_bf b, __wbsim_bf c) {
    return __wbsim_bf(fmaf((float)a, (float)b, (float)c));
}
static inline __wbsim_bf __hneg(__wbsim_bf a) { return __ushort_as_bfloat16((unsigned short)(a.__x ^ 0x8000u)); }
static inline __wbsim_bf __habs(__wbsim_bf a) { return __ushort_as_bfloat16((unsigned short)(a.__x & 0x7fffu)); }
static inline __wbsim_bf __hmax(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf(fmaxf((float)a, (float)b)); }
static inline __wbsim_bf __hmin(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf(fminf((float)a, (float)b)); }
static inline bool __heq(__wbsim_bf a, __wbsim_bf b) { return (float)a == (float)b; }
static inline bool __hne(__wbsim_bf a, __wbsim_bf b) { float x = a, y = b; return x == x && y == y && x != y; }
static inline bool __hlt(__wbsim_bf a, __wbsim_bf b) { return (float)a < (float)b; }
static inline bool __hle(__wbsim_bf a, __wbsim_bf b) { return (float)a <= (float)b; }
static inline bool __hgt(__wbsim_bf a, __wbsim_bf b) { return (float)a > (float)b; }
static inline bool __hge(__wbsim_bf a, __wbsim_bf b) { return (float)a >= (float)b; }
static inline bool __hisnan(__wbsim_bf a) { return (a.__x & 0x7fffu) > 0x7f80u; }
static inline int __hisinf(__wbsim_bf a) { return (a.__x & 0x7fffu) == 0x7f80u ? (a.__x & 0x8000u ? -1 : 1) : 0; }
#define WBSIM_BF_MATH(name, fn) static inline __wbsim_bf name(__wbsim_bf a) { return __wbsim_bf(fn((float)a)); }
WBSIM_BF_MATH(hsqrt, sqrtf) WBSIM_BF_MATH(hexp, expf) WBSIM_BF_MATH(hexp2, exp2f) WBSIM_BF_MATH(hlog, logf)
WBSIM_BF_MATH(hlog2, log2f) WBSIM_BF_MATH(hsin, sinf) WBSIM_BF_MATH(hcos, cosf) WBSIM_BF_MATH(htanh, tanhf)
WBSIM_BF_MATH(hfloor, floorf) WBSIM_BF_MATH(hceil, ceilf) WBSIM_BF_MATH(htrunc, truncf)
WBSIM_BF_MATH(hrint, nearbyintf)
#undef WBSIM_BF_MATH
static inline __wbsim_bf hrsqrt(__wbsim_bf a) { return __wbsim_bf(1.0f / sqrtf((float)a)); }
static inline __wbsim_bf hrcp(__wbsim_bf a) { return __wbsim_bf(1.0f / (float)a); }

static inline __wbsim_bf operator+(const __wbsim_bf& a, const __wbsim_bf& b) { return __hadd(a, b); }
static inline __wbsim_bf operator-(const __wbsim_bf& a, const __wbsim_bf& b) { return __hsub(a, b); }
static inline __wbsim_bf operator*(const __wbsim_bf& a, const __wbsim_bf& b) { return __hmul(a, b); }
static inline __wbsim_bf operator/(const __wbsim_bf& a, const __wbsim_bf& b) { return __hdiv(a, b); }
static inline __wbsim_bf& operator+=(__wbsim_bf& a, const __wbsim_bf& b) { a = a + b; return a; }
static inline __wbsim_bf& operator-=(__wbsim_bf& a, const __wbsim_bf& b) { a = a - b; return a; }
static inline __wbsim_bf& operator*=(__wbsim_bf& a, const __wbsim_bf& b) { a = a * b; return a; }
static inline __wbsim_bf& operator/=(__wbsim_bf& a, const __wbsim_bf& b) { a = a / b; return a; }
static inline __wbsim_bf& operator++(__wbsim_bf& a) { a = a + __wbsim_bf(1.0f); return a; }
static inline __wbsim_bf& operator--(__wbsim_bf& a) { a = a - __wbsim_bf(1.0f); return a; }
static inline __wbsim_bf operator++(__wbsim_bf& a, int) { __wbsim_bf o = a; ++a; return o; }
static inline __wbsim_bf operator--(__wbsim_bf& a, int) { __wbsim_bf o = a; --a; return o; }
static inline __wbsim_bf operator+(const __wbsim_bf& a) { return a; }
static inline __wbsim_bf operator-(const __wbsim_bf& a) { return __hneg(a); }
static inline bool operator==(const __wbsim_bf& a, const __wbsim_bf& b) { return __heq(a, b); }
static inline bool operator!=(const __wbsim_bf& a, const __wbsim_bf& b) { return (float)a != (float)b; }
static inline bool operator<(const __wbsim_bf& a, const __wbsim_bf& b) { return __hlt(a, b); }
static inline bool operator<=(const __wbsim_bf& a, const __wbsim_bf& b) { return __hle(a, b); }
static inline bool operator>(const __wbsim_bf& a, const __wbsim_bf& b) { return __hgt(a, b); }
static inline bool operator>=(const __wbsim_bf& a, const __wbsim_bf& b) { return __hge(a, b); }

/* ---- __nv_bfloat162 ------------------------------------------------------------ */
typedef __nv_bfloat162 __wbsim_bf2;
static inline __wbsim_bf2 __halves2bfloat162(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf2(a, b); }
static inline __wbsim_bf2 __bfloat162bfloat162(__wbsim_bf a) { return __wbsim_bf2(a, a); }
static inline __wbsim_bf2 make_bfloat162(__wbsim_bf a, __wbsim_bf b) { return __wbsim_bf2(a, b); }
static inline __wbsim_bf2 __float2bfloat162_rn(float f) { return __bfloat162bfloat162(__wbsim_bf(f)); }
static inline __wbsim_bf2 __floats2bfloat162_rn(float a, float b) { return __wbsim_bf2(__wbsim_bf(a), __wbsim_bf(b)); }
static inline __wbsim_bf2 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline float2 __bfloat1622float2(__wbsim_bf2 h) { float2 r = {(float)h.x, (float)h.y}; return r; }
static inline float __low2float(__wbsim_bf2 h) { return (float)h.x; }
static inline float __high2float(__wbsim_bf2 h) { return (float)h.y; }
static inline __wbsim_bf __low2bfloat16(__wbsim_bf2 h) { return h.x; }
static inline __wbsim_bf __high2bfloat16(__wbsim_bf2 h) { return h.y; }
static inline __wbsim_bf2 __lowhigh2highlow(__wbsim_bf2 a) { return __wbsim_bf2(a.y, a.x); }
static inline __wbsim_bf2 __hadd2(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(a.x + b.x, a.y + b.y); }
static inline __wbsim_bf2 __hsub2(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(a.x - b.x, a.y - b.y); }
static inline __wbsim_bf2 __hmul2(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(a.x * b.x, a.y * b.y); }
static inline __wbsim_bf2 __h2div(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(a.x / b.x, a.y / b.y); }
static inline __wbsim_bf2 __hfma2(__wbsim_bf2 a, __wbsim_bf2 b, __wbsim_bf2 c) {
    return __wbsim_bf2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __wbsim_bf2 __hneg2(__wbsim_bf2 a) { return __wbsim_bf2(__hneg(a.x), __hneg(a.y)); }
static inline __wbsim_bf2 __habs2(__wbsim_bf2 a) { return __wbsim_bf2(__habs(a.x), __habs(a.y)); }
static inline __wbsim_bf2 __hmax2(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __wbsim_bf2 __hmin2(__wbsim_bf2 a, __wbsim_bf2 b) { return __wbsim_bf2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
static inline __wbsim_bf2 operator+(const __wbsim_bf2& a, const __wbsim_bf2& b) { return __hadd2(a, b); }
static inline __wbsim_bf2 operator-(const __wbsim_bf2& a, const __wbsim_bf2& b) { return __hsub2(a, b); }
static inline __wbsim_bf2 operator*(const __wbsim_bf2& a, const __wbsim_bf2& b) { return __hmul2(a, b); }
static inline __wbsim_bf2 operator/(const __wbsim_bf2& a, const __wbsim_bf2& b) { return __h2div(a, b); }
static inline __wbsim_bf2& operator+=(__wbsim_bf2& a, const __wbsim_bf2& b) { a = a + b; return a; }
static inline __wbsim_bf2& operator-=(__wbsim_bf2& a, const __wbsim_bf2& b) { a = a - b; return a; }
static inline __wbsim_bf2& operator*=(__wbsim_bf2& a, const __wbsim_bf2& b) { a = a * b; return a; }
static inline __wbsim_bf2& operator/=(__wbsim_bf2& a, const __wbsim_bf2& b) { a = a / b; return a; }
static inline __wbsim_bf2 operator-(const __wbsim_bf2& a) { return __hneg2(a); }
static inline bool operator==(const __wbsim_bf2& a, const __wbsim_bf2& b) { return a.x == b.x && a.y == b.y; }
static inline bool operator!=(const __wbsim_bf2& a, const __wbsim_bf2& b) { return a.x != b.x || a.y != b.y; }

static inline __wbsim_bf atomicAdd(__wbsim_bf* p, __wbsim_bf v) {
    unsigned short* q = &p->__x;
    unsigned short old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
    __wbsim_bf o;
    do {
        o = __ushort_as_bfloat16(old);
        next = (o + v).__x;
    } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return o;
}
static inline __wbsim_bf2 atomicAdd(__wbsim_bf2* p, __wbsim_bf2 v) {
    __wbsim_bf2 old;
    old.x = atomicAdd(&p->x, v.x);
    old.y = atomicAdd(&p->y, v.y);
    return old;
}
