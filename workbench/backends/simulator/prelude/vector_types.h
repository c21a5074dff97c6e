/* CUDA's vector types (float2, int4, ...), dim3 and make_* functions. */
#ifndef WBSIM_VECTOR_TYPES_H
#define WBSIM_VECTOR_TYPES_H

/* One family per component type: NAME1..NAME4 with CUDA's alignments, and make_NAMEn(). */
#define WBSIM_VEC1(T, N, A) \
    struct __attribute__((aligned(A))) N##1 { T x; }; typedef struct N##1 N##1; \
    static inline N##1 make_##N##1(T x) { N##1 v = { x }; return v; }
#define WBSIM_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N##2 { T x, y; }; typedef struct N##2 N##2; \
    static inline N##2 make_##N##2(T x, T y) { N##2 v = { x, y }; return v; }
#define WBSIM_VEC3(T, N, A) \
    struct __attribute__((aligned(A))) N##3 { T x, y, z; }; typedef struct N##3 N##3; \
    static inline N##3 make_##N##3(T x, T y, T z) { N##3 v = { x, y, z }; return v; }
#define WBSIM_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; typedef struct N##4 N##4; \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 v = { x, y, z, w }; return v; }
/* alignment of the 1-, 2-, 3- and 4-component types: 3 is like 1 */
#define WBSIM_VECTORS(T, N, A1, A2, A4) \
    WBSIM_VEC1(T, N, A1) WBSIM_VEC2(T, N, A2) WBSIM_VEC3(T, N, A1) WBSIM_VEC4(T, N, A4)

WBSIM_VECTORS(char, char, 1, 2, 4)
WBSIM_VECTORS(unsigned char, uchar, 1, 2, 4)
WBSIM_VECTORS(short, short, 2, 4, 8)
WBSIM_VECTORS(unsigned short, ushort, 2, 4, 8)
WBSIM_VECTORS(int, int, 4, 8, 16)
WBSIM_VECTORS(unsigned int, uint, 4, 8, 16)
WBSIM_VECTORS(long, long, 8, 16, 16)
WBSIM_VECTORS(unsigned long, ulong, 8, 16, 16)
WBSIM_VECTORS(long long, longlong, 8, 16, 16)
WBSIM_VECTORS(unsigned long long, ulonglong, 8, 16, 16)
WBSIM_VECTORS(float, float, 4, 8, 16)
WBSIM_VECTORS(double, double, 8, 16, 16)

#ifdef __cplusplus
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
#else
typedef struct dim3 { unsigned int x, y, z; } dim3;
#endif
#endif
