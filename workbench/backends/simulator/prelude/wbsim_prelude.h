/* The CUDA device API on the CPU: included before every cell the simulator
 * compiles with g++. Kernel code sees CUDA's keywords, built-in variables,
 * synchronisation, warp functions, atomics, math and intrinsics; the worker
 * runtime (native/, see runtime.h) implements the scheduling behind them. */
#ifndef WBSIM_PRELUDE_H
#define WBSIM_PRELUDE_H

/* The C++ forms first: <cstdio> and <cmath> #undef the C names they wrap, so
 * a cell's own #include <cstdio> after the prelude would undo the printf
 * macro below; included here, their include guards make that a no-op. */
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <climits>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cfenv>
#include <ctime>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <limits.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#include <assert.h>
#include <tuple>
#include <utility>
#include <type_traits>
#include <limits>

#include "wbsim_abi.h"

#define __WBSIM__ 1
#define __CUDACC__ 1
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#endif
#define CUDART_VERSION 13000
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0

/* ---- keywords ------------------------------------------------------------ */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
/* one block runs on one OS thread from start to end: its shared memory is thread_local */
#define __shared__ thread_local
#define __forceinline__ inline __attribute__((always_inline))
/* empty, not __attribute__((noinline)): newer libstdc++ headers write __attribute__((__noinline__))
   themselves, which that definition would break; inlining changes nothing here */
#define __noinline__
#define __inline__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))

static const int warpSize = 32;

/* ---- printf, assert, trap -------------------------------------------------- */
#define printf wbsim_printf
namespace std { using ::wbsim_printf; }  /* std::printf, after the macro */

static inline __attribute__((noreturn)) void __trap(void) { wbsim_trap("__trap() called"); }
static inline __attribute__((noreturn)) void __brkpt(void) { wbsim_trap("__brkpt() called"); }
static inline void __nanosleep(unsigned) { wbsim_yield(); }
static inline long long clock64(void) { return (long long)wbsim_clock64(); }
/* clock() in a kernel counts cycles, as on a GPU (host code keeps the C library's). */
#define clock() wbsim_clock()
namespace std { using ::wbsim_clock; }  /* std::clock(), after the macro */
/* a template, so that a program's own __globaltimer() (PTX's %globaltimer read by asm,
 * a common idiom) is an overload that wins rather than a redefinition */
template <int = 0> static inline unsigned long long __globaltimer(void) { return wbsim_globaltimer(); }
static inline void __prof_trigger(int) {}

/* ---- synchronisation ---------------------------------------------------- */
/* The call site (the cell's line, through #line) rides along for reports. */
#define WBSIM_SITE const char* __wbsim_file = __builtin_FILE(), int __wbsim_line = __builtin_LINE()
static inline void __syncthreads(WBSIM_SITE) { wbsim_barrier(WBSIM_BAR_SYNC, 0, __wbsim_file, __wbsim_line); }
static inline int __syncthreads_count(int p, WBSIM_SITE) { return wbsim_barrier(WBSIM_BAR_COUNT, p, __wbsim_file, __wbsim_line); }
static inline int __syncthreads_and(int p, WBSIM_SITE) { return wbsim_barrier(WBSIM_BAR_AND, p, __wbsim_file, __wbsim_line); }
static inline int __syncthreads_or(int p, WBSIM_SITE) { return wbsim_barrier(WBSIM_BAR_OR, p, __wbsim_file, __wbsim_line); }
#undef WBSIM_SITE
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---- warp functions -------------------------------------------------------- */
/* Always inlined: a warp operation's call of the worker is on its line of the
 * cell (synccheck names it; backends/simulator/sanitizing.py). */
static inline __attribute__((always_inline)) wbsim_warp_req __wbsim_req(int op, unsigned mask, int arg, int width) {
    wbsim_warp_req r;
    r.op = op; r.mask = mask; r.arg = arg; r.width = width; r.size = 4; r.pred = 0;
    return r;
}

template <class T> static inline __attribute__((always_inline)) T __wbsim_shfl(int op, unsigned mask, T var, int arg, int width) {
    static_assert(sizeof(T) <= 16, "warp shuffles take values of at most 16 bytes");
    wbsim_warp_req r = __wbsim_req(op, mask, arg, width);
    r.size = sizeof(T);
    memcpy(r.val, &var, sizeof(T));
    wbsim_warp(&r);
    T out;
    memcpy(&out, r.out, sizeof(T));
    return out;
}

template <class T> static inline __attribute__((always_inline)) T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
    return __wbsim_shfl(WBSIM_SHFL_IDX, mask, var, srcLane, width);
}
template <class T> static inline __attribute__((always_inline)) T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return __wbsim_shfl(WBSIM_SHFL_UP, mask, var, (int)delta, width);
}
template <class T> static inline __attribute__((always_inline)) T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return __wbsim_shfl(WBSIM_SHFL_DOWN, mask, var, (int)delta, width);
}
template <class T> static inline __attribute__((always_inline)) T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
    return __wbsim_shfl(WBSIM_SHFL_XOR, mask, var, laneMask, width);
}

static inline __attribute__((always_inline)) unsigned __wbsim_vote(int op, unsigned mask, int pred) {
    wbsim_warp_req r = __wbsim_req(op, mask, 0, 32);
    int p = pred != 0;
    memcpy(r.val, &p, 4);
    wbsim_warp(&r);
    unsigned out;
    memcpy(&out, r.out, 4);
    return out;
}
static inline __attribute__((always_inline)) unsigned __ballot_sync(unsigned mask, int pred) { return __wbsim_vote(WBSIM_BALLOT, mask, pred); }
static inline __attribute__((always_inline)) int __any_sync(unsigned mask, int pred) { return (int)__wbsim_vote(WBSIM_ANY, mask, pred); }
static inline __attribute__((always_inline)) int __all_sync(unsigned mask, int pred) { return (int)__wbsim_vote(WBSIM_ALL, mask, pred); }
static inline __attribute__((always_inline)) int __uni_sync(unsigned mask, int pred) {
    unsigned b = __ballot_sync(mask, pred);
    return b == 0 || b == (mask & wbsim_activemask());
}
/* The lanes that reach this call together: each lane waits until every other
 * live lane of its warp is blocked (barrier, warp operation) or returned; the
 * lanes waiting at the same call site (the caller's address) form the mask. */
static inline __attribute__((always_inline)) unsigned __activemask(void) { return __wbsim_vote(WBSIM_ACTIVEMASK, 0xffffffffu, 0); }
static inline __attribute__((always_inline)) void __syncwarp(unsigned mask = 0xffffffffu) { __wbsim_vote(WBSIM_SYNCWARP, mask, 0); }

template <class T> static inline __attribute__((always_inline)) unsigned __match_any_sync(unsigned mask, T value) {
    wbsim_warp_req r = __wbsim_req(WBSIM_MATCH_ANY, mask, 0, 32);
    r.size = sizeof(T);
    memcpy(r.val, &value, sizeof(T));
    wbsim_warp(&r);
    unsigned out; memcpy(&out, r.out, 4); return out;
}
template <class T> static inline __attribute__((always_inline)) unsigned __match_all_sync(unsigned mask, T value, int* pred) {
    wbsim_warp_req r = __wbsim_req(WBSIM_MATCH_ALL, mask, 0, 32);
    r.size = sizeof(T);
    memcpy(r.val, &value, sizeof(T));
    wbsim_warp(&r);
    *pred = (int)r.pred;
    unsigned out; memcpy(&out, r.out, 4); return out;
}

#define WBSIM_REDUCE(NAME, OP, T) \
    static inline __attribute__((always_inline)) T NAME(unsigned mask, T value) { \
        wbsim_warp_req r = __wbsim_req(OP, mask, 0, 32); memcpy(r.val, &value, 4); \
        wbsim_warp(&r); T out; memcpy(&out, r.out, 4); return out; }
WBSIM_REDUCE(__reduce_add_sync, WBSIM_REDUCE_ADD, unsigned)
WBSIM_REDUCE(__reduce_add_sync, WBSIM_REDUCE_ADD, int)
WBSIM_REDUCE(__reduce_min_sync, WBSIM_REDUCE_MIN_U, unsigned)
WBSIM_REDUCE(__reduce_min_sync, WBSIM_REDUCE_MIN_I, int)
WBSIM_REDUCE(__reduce_max_sync, WBSIM_REDUCE_MAX_U, unsigned)
WBSIM_REDUCE(__reduce_max_sync, WBSIM_REDUCE_MAX_I, int)
WBSIM_REDUCE(__reduce_and_sync, WBSIM_REDUCE_AND, unsigned)
WBSIM_REDUCE(__reduce_or_sync, WBSIM_REDUCE_OR, unsigned)
WBSIM_REDUCE(__reduce_xor_sync, WBSIM_REDUCE_XOR, unsigned)
#undef WBSIM_REDUCE

/* ---- atomics (real atomics: blocks run on several OS threads) ------------- */
#define WBSIM_ATOMIC_INT(T) \
    static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicCAS(T* p, T expected, T desired) { \
        __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
        return expected; } \
    static inline T atomicMin(T* p, T v) { \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED); \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
        return old; } \
    static inline T atomicMax(T* p, T v) { \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED); \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
        return old; }
WBSIM_ATOMIC_INT(int)
WBSIM_ATOMIC_INT(unsigned int)
WBSIM_ATOMIC_INT(long)
WBSIM_ATOMIC_INT(unsigned long)
WBSIM_ATOMIC_INT(long long)
WBSIM_ATOMIC_INT(unsigned long long)
#undef WBSIM_ATOMIC_INT

static inline unsigned short atomicCAS(unsigned short* p, unsigned short expected, unsigned short desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return expected;
}

static inline unsigned atomicInc(unsigned* p, unsigned limit) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
    do { next = old >= limit ? 0u : old + 1u; }
    while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
static inline unsigned atomicDec(unsigned* p, unsigned limit) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
    do { next = (old == 0u || old > limit) ? limit : old - 1u; }
    while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

template <class F, class U, class Op> static inline F __wbsim_atomic_float(F* p, Op op) {
    static_assert(sizeof(F) == sizeof(U), "size");
    U* q = reinterpret_cast<U*>(p);
    U old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
    F f;
    do {
        memcpy(&f, &old, sizeof f);
        F n = op(f);
        memcpy(&next, &n, sizeof n);
    } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return f;
}
static inline float atomicAdd(float* p, float v) {
    return __wbsim_atomic_float<float, uint32_t>(p, [v](float a) { return a + v; });
}
static inline double atomicAdd(double* p, double v) {
    return __wbsim_atomic_float<double, uint64_t>(p, [v](double a) { return a + v; });
}
static inline float atomicExch(float* p, float v) {
    return __wbsim_atomic_float<float, uint32_t>(p, [v](float) { return v; });
}
static inline float atomicMin(float* p, float v) {
    return __wbsim_atomic_float<float, uint32_t>(p, [v](float a) { return fminf(a, v); });
}
static inline float atomicMax(float* p, float v) {
    return __wbsim_atomic_float<float, uint32_t>(p, [v](float a) { return fmaxf(a, v); });
}
static inline double atomicMin(double* p, double v) {
    return __wbsim_atomic_float<double, uint64_t>(p, [v](double a) { return fmin(a, v); });
}
static inline double atomicMax(double* p, double v) {
    return __wbsim_atomic_float<double, uint64_t>(p, [v](double a) { return fmax(a, v); });
}
#define WBSIM_SCOPED_ATOMIC(NAME) \
    template <class... A> static inline auto NAME##_block(A... a) -> decltype(NAME(a...)) { return NAME(a...); } \
    template <class... A> static inline auto NAME##_system(A... a) -> decltype(NAME(a...)) { return NAME(a...); }
WBSIM_SCOPED_ATOMIC(atomicAdd) WBSIM_SCOPED_ATOMIC(atomicSub) WBSIM_SCOPED_ATOMIC(atomicExch)
WBSIM_SCOPED_ATOMIC(atomicMin) WBSIM_SCOPED_ATOMIC(atomicMax) WBSIM_SCOPED_ATOMIC(atomicInc)
WBSIM_SCOPED_ATOMIC(atomicDec) WBSIM_SCOPED_ATOMIC(atomicCAS) WBSIM_SCOPED_ATOMIC(atomicAnd)
WBSIM_SCOPED_ATOMIC(atomicOr) WBSIM_SCOPED_ATOMIC(atomicXor)
#undef WBSIM_SCOPED_ATOMIC

/* ---- loads and stores with cache hints -------------------------------------- */
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }
static inline unsigned __isGlobal(const void*) { return 1; }
static inline unsigned __isShared(const void*) { return 0; }
static inline unsigned __isConstant(const void*) { return 0; }
static inline unsigned __isLocal(const void*) { return 0; }

/* ---- min / max ----------------------------------------------------------- */
template <class A, class B>
static inline typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                      typename std::common_type<A, B>::type>::type
min(A a, B b) { typedef typename std::common_type<A, B>::type C; return (C)b < (C)a ? (C)b : (C)a; }
template <class A, class B>
static inline typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                      typename std::common_type<A, B>::type>::type
max(A a, B b) { typedef typename std::common_type<A, B>::type C; return (C)a < (C)b ? (C)b : (C)a; }
static inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

/* ---- math functions and fast intrinsics ------------------------------------ */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float sinpif(float x) { return sinf((float)M_PI * x); }
static inline float cospif(float x) { return cosf((float)M_PI * x); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
static inline float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
static inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
static inline float norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
static inline float norm4df(float a, float b, float c, float d) { return sqrtf(a * a + b * b + c * c + d * d); }
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
static inline double norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
static inline float fdividef(float a, float b) { return a / b; }
static inline float __fdividef(float a, float b) { return a / b; }
/* glibc declares these names itself: macros keep CUDA's meaning */
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf((x), (s), (c))
#define __powf(x, y) powf((x), (y))
#define __finitef(x) isfinite(x)
#define __isinff(x) isinf(x)
#define __isnanf(x) isnan(x)
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
/* Rounded arithmetic: _rn to nearest, _rz toward zero, _ru up, _rd down, done in the
 * host's rounding mode set for the one operation (volatile keeps the compiler from
 * folding or moving it out of that mode). */
#if defined(__x86_64__)
/* SSE's own rounding control (MXCSR) only: a few cycles, where fesetround also sets the
 * x87's (the C library's fma reads that one: the fma forms use __wbsim_rounded_fenv) */
template <class F> static inline auto __wbsim_rounded(int mode, F f) -> decltype(f()) {
    unsigned old = __builtin_ia32_stmxcsr();
    unsigned rc = mode == FE_DOWNWARD ? 0x2000u : mode == FE_UPWARD ? 0x4000u : mode == FE_TOWARDZERO ? 0x6000u : 0u;
    __builtin_ia32_ldmxcsr((old & ~0x6000u) | rc);
    auto r = f();
    __builtin_ia32_ldmxcsr(old);
    return r;
}
#endif
template <class F> static inline auto __wbsim_rounded_fenv(int mode, F f) -> decltype(f()) {
    int old = fegetround();
    fesetround(mode);
    auto r = f();
    fesetround(old);
    return r;
}
#if !defined(__x86_64__)
template <class F> static inline auto __wbsim_rounded(int mode, F f) -> decltype(f()) {
    return __wbsim_rounded_fenv(mode, f);
}
#endif
#define WBSIM_OP2(T, NAME, R, MODE, EXPR) \
    static inline T NAME##_##R(T a, T b) { \
        return __wbsim_rounded(MODE, [=] { volatile T x = a, y = b; volatile T r = EXPR; return (T)r; }); }
#define WBSIM_OP1(T, NAME, R, MODE, EXPR) \
    static inline T NAME##_##R(T a) { return __wbsim_rounded(MODE, [=] { volatile T x = a; volatile T r = EXPR; return (T)r; }); }
#define WBSIM_OP3(T, NAME, R, MODE, FN) \
    static inline T NAME##_##R(T a, T b, T c) { \
        return __wbsim_rounded_fenv(MODE, [=] { volatile T x = a, y = b, z = c; volatile T r = FN(x, y, z); return (T)r; }); }
#define WBSIM_ROUNDED(R, MODE) \
    WBSIM_OP2(float, __fadd, R, MODE, x + y) WBSIM_OP2(float, __fsub, R, MODE, x - y) \
    WBSIM_OP2(float, __fmul, R, MODE, x * y) WBSIM_OP2(float, __fdiv, R, MODE, x / y) \
    WBSIM_OP3(float, __fmaf, R, MODE, fmaf) WBSIM_OP1(float, __fsqrt, R, MODE, sqrtf(x)) \
    WBSIM_OP1(float, __frcp, R, MODE, 1.0f / x) \
    WBSIM_OP2(double, __dadd, R, MODE, x + y) WBSIM_OP2(double, __dsub, R, MODE, x - y) \
    WBSIM_OP2(double, __dmul, R, MODE, x * y) WBSIM_OP2(double, __ddiv, R, MODE, x / y) \
    WBSIM_OP3(double, __fma, R, MODE, fma) WBSIM_OP1(double, __dsqrt, R, MODE, sqrt(x)) \
    WBSIM_OP1(double, __drcp, R, MODE, 1.0 / x)
WBSIM_ROUNDED(rz, FE_TOWARDZERO) WBSIM_ROUNDED(ru, FE_UPWARD) WBSIM_ROUNDED(rd, FE_DOWNWARD)
#undef WBSIM_ROUNDED
#undef WBSIM_OP1
#undef WBSIM_OP2
#undef WBSIM_OP3
/* to nearest: the host's own mode */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __dsqrt_rn(double x) { return sqrt(x); }
static inline double __drcp_rn(double x) { return 1.0 / x; }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fmaf_ieee_rn(float a, float b, float c) { return fmaf(a, b, c); }

/* conversions and reinterpretations */
/* Float to integer saturates, as the GPU's cvt does: out-of-range values give
 * the type's limit and NaN gives 0 (a C cast is undefined there). */
template <class T> static inline T __wbsim_sat(double x) {
    if (x != x) return 0;
    if (x <= (double)std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
    if (x >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
    return (T)x;
}
static inline int __float2int_rn(float x) { return __wbsim_sat<int>(nearbyintf(x)); }
static inline int __float2int_rz(float x) { return __wbsim_sat<int>(truncf(x)); }
static inline int __float2int_ru(float x) { return __wbsim_sat<int>(ceilf(x)); }
static inline int __float2int_rd(float x) { return __wbsim_sat<int>(floorf(x)); }
static inline unsigned __float2uint_rn(float x) { return __wbsim_sat<unsigned>(nearbyintf(x)); }
static inline unsigned __float2uint_rz(float x) { return __wbsim_sat<unsigned>(truncf(x)); }
static inline unsigned __float2uint_ru(float x) { return __wbsim_sat<unsigned>(ceilf(x)); }
static inline unsigned __float2uint_rd(float x) { return __wbsim_sat<unsigned>(floorf(x)); }
static inline long long __float2ll_rn(float x) { return __wbsim_sat<long long>(nearbyintf(x)); }
static inline long long __float2ll_rz(float x) { return __wbsim_sat<long long>(truncf(x)); }
static inline int __double2int_rn(double x) { return __wbsim_sat<int>(nearbyint(x)); }
static inline int __double2int_rz(double x) { return __wbsim_sat<int>(trunc(x)); }
static inline long long __double2ll_rn(double x) { return __wbsim_sat<long long>(nearbyint(x)); }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __ull2float_rn(unsigned long long x) { return (float)x; }
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }
/* conversions that round one way: done in that rounding mode (as __fadd_rz ...) */
#define WBSIM_CONVERT(FROM, TO, NAME, R, MODE) \
    static inline TO NAME##_##R(FROM a) { return __wbsim_rounded(MODE, [=] { volatile FROM x = a; volatile TO r = (TO)x; return (TO)r; }); }
#define WBSIM_CONVERTS(R, MODE) \
    WBSIM_CONVERT(double, float, __double2float, R, MODE) WBSIM_CONVERT(int, float, __int2float, R, MODE) \
    WBSIM_CONVERT(unsigned, float, __uint2float, R, MODE) WBSIM_CONVERT(long long, float, __ll2float, R, MODE) \
    WBSIM_CONVERT(unsigned long long, float, __ull2float, R, MODE) \
    WBSIM_CONVERT(long long, double, __ll2double, R, MODE) \
    WBSIM_CONVERT(unsigned long long, double, __ull2double, R, MODE)
WBSIM_CONVERTS(rz, FE_TOWARDZERO) WBSIM_CONVERTS(ru, FE_UPWARD) WBSIM_CONVERTS(rd, FE_DOWNWARD)
#undef WBSIM_CONVERTS
#undef WBSIM_CONVERT
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
static inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
static inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
static inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return (int)(__double_as_longlong(x) & 0xffffffff); }
static inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

/* integer intrinsics */
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline int __mul24(int a, int b) { return (int)(((long long)(a << 8 >> 8)) * (long long)(b << 8 >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __sad(int a, int b, unsigned c) { return c + (unsigned)(a > b ? a - b : b - a); }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)((v << (sh & 31)) >> 32);
}
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)((v << (sh > 32 ? 32 : sh)) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (sh & 31));
}
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (sh > 32 ? 32 : sh));
}
static inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xff) * ((b >> (8 * i)) & 0xff);
    return c;
}

/* ---- kernel launchers (used by the code the simulator appends) ------------- */
template <auto F, class Tuple, size_t... I>
static inline __attribute__((always_inline)) void __wbsim_call(Tuple& t, std::index_sequence<I...>) {
    F(std::get<I>(t)...);
}

/* Runs every thread of the current block in turn ("direct mode"), until the
 * first barrier or warp operation turns the block into fibers; the kernels
 * of cells and of whole programs (program_runtime/) both run blocks so. */
template <class Call> static inline __attribute__((always_inline)) void __wbsim_block_loop(Call call) {
    const unsigned bx = blockDim.x, by = blockDim.y, bz = blockDim.z;
    uint3& tid = const_cast<uint3&>(threadIdx);  /* (const where accesses are counted: wbsim_abi.h) */
    for (unsigned z = 0; z < bz; ++z)
        for (unsigned y = 0; y < by; ++y)
            for (unsigned x = 0; x < bx; ++x) {
                tid.x = x; tid.y = y; tid.z = z;
#ifdef __SANITIZE_THREAD__
                wbsim_access_thread(x + bx * (y + by * z));
#endif
                call();
                if (__builtin_expect(__wbsim_fiber_mode, 0)) { wbsim_finish_block(); return; }
            }
}

/* The simulator's own loop over threads is not instrumented in a build that
 * counts accesses (backends/simulator/instrumented.py): each thread's call
 * then starts after threadIdx is set, so its accesses are its own. (Without
 * the instrumentation the attribute changes nothing.) */
#define WBSIM_UNCOUNTED __attribute__((no_sanitize("thread"), no_sanitize_coverage))
/* A bulk copy's read of global memory, for the profiler's footprint (DRAM
 * traffic) without an LSU request: what a kernel's stand-in for the copy
 * engine (cp.async.bulk) reports. The worker defines it (native/access.cpp). */
extern "C" __attribute__((weak)) void wbsim_bulk_read(const void* p, unsigned long n);
/* Says that this kernel's simulator code is a stand-in for a different GPU
 * kernel (a plain loop for a tensor-core one): a kernel calls it in its
 * __WBSIM__ branch. The profiler finds its basic block among the launch's
 * and gives no counts or predicted time of the GPU's kernel (profiling/
 * simulated.py: STAND_IN). */
__attribute__((noinline)) inline void wbsim_stand_in() { __asm__ volatile(""); }

template <auto F, class... A> struct __wbsim_kernel_impl {
    typedef std::tuple<A...> Tuple;
#ifndef __SANITIZE_THREAD__
    static void run_thread(void* p) {
        __wbsim_call<F>(*static_cast<Tuple*>(p), std::index_sequence_for<A...>{});
    }
    static void run_block(void* p) {
        Tuple& t = *static_cast<Tuple*>(p);
        __wbsim_block_loop([&t] { __wbsim_call<F>(t, std::index_sequence_for<A...>{}); });
    }
#else
    /* Counting: the kernel is called, never inlined, once per thread with its
     * arguments in registers, from the block loop and from a fiber's start
     * alike (one copy of its code: one site per access). The arguments'
     * addresses are taken first (std::get is not inlined into uninstrumented
     * code). */
    WBSIM_UNCOUNTED static void run_block(void* p) {
        run_block_with(*static_cast<Tuple*>(p), std::index_sequence_for<A...>{});
    }
    template <size_t... I> WBSIM_UNCOUNTED static void run_block_with(Tuple& t, std::index_sequence<I...>) {
        void* at[] = {(void*)&std::get<I>(t)..., nullptr};
        (void)at;
        __wbsim_block_loop([&at]() WBSIM_UNCOUNTED { F(*static_cast<A*>(at[I])...); });
    }
    WBSIM_UNCOUNTED static void run_thread(void* p) {
        run_thread_with(*static_cast<Tuple*>(p), std::index_sequence_for<A...>{});
    }
    template <size_t... I> WBSIM_UNCOUNTED static void run_thread_with(Tuple& t, std::index_sequence<I...>) {
        void* at[] = {(void*)&std::get<I>(t)..., nullptr};
        (void)at;
        F(*static_cast<A*>(at[I])...);
    }
#endif
    template <size_t... I> static Tuple unpack(const wbsim_launch* L, std::index_sequence<I...>) {
        return Tuple(*reinterpret_cast<A*>(L->argv[I])...);
    }
    static int launch(const wbsim_launch* L, const char* name) {
        static const size_t sizes[] = {sizeof(A)..., 0};
        if (L->nargs != sizeof...(A)) {
            snprintf(L->error, L->error_size, "kernel %s takes %zu arguments, the launch gave %u",
                     name, sizeof...(A), L->nargs);
            return 1;
        }
        for (unsigned i = 0; i < L->nargs; ++i)
            if (L->argsize[i] != sizes[i]) {
                snprintf(L->error, L->error_size,
                         "argument %u of kernel %s is %zu bytes, the launch passed %u bytes",
                         i + 1, name, sizes[i], L->argsize[i]);
                return 1;
            }
        Tuple t = unpack(L, std::index_sequence_for<A...>{});
        wbsim_kernel k = {name, &run_block, &run_thread, &t};
        return wbsim_run_grid(&k, L->grid, L->block, L->shared_bytes);
    }
};

template <auto F, class... A> static int __wbsim_launch(void (*)(A...), const wbsim_launch* L, const char* name) {
    return __wbsim_kernel_impl<F, A...>::launch(L, name);
}

#endif
