/* CUDA's vector types (float2, int4, ...), dim3 and make_* functions. */
#ifndef WBSIM_VECTOR_TYPES_H
#define WBSIM_VECTOR_TYPES_H

struct __attribute__((aligned(1))) char1 { char x; };
typedef struct char1 char1;
static inline char1 make_char1(char x) { char1 v = { x }; return v; }
struct __attribute__((aligned(2))) char2 { char x, y; };
typedef struct char2 char2;
static inline char2 make_char2(char x, char y) { char2 v = { x, y }; return v; }
struct __attribute__((aligned(1))) char3 { char x, y, z; };
typedef struct char3 char3;
static inline char3 make_char3(char x, char y, char z) { char3 v = { x, y, z }; return v; }
struct __attribute__((aligned(4))) char4 { char x, y, z, w; };
typedef struct char4 char4;
static inline char4 make_char4(char x, char y, char z, char w) { char4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(1))) uchar1 { unsigned char x; };
typedef struct uchar1 uchar1;
static inline uchar1 make_uchar1(unsigned char x) { uchar1 v = { x }; return v; }
struct __attribute__((aligned(2))) uchar2 { unsigned char x, y; };
typedef struct uchar2 uchar2;
static inline uchar2 make_uchar2(unsigned char x, unsigned char y) { uchar2 v = { x, y }; return v; }
struct __attribute__((aligned(1))) uchar3 { unsigned char x, y, z; };
typedef struct uchar3 uchar3;
static inline uchar3 make_uchar3(unsigned char x, unsigned char y, unsigned char z) { uchar3 v = { x, y, z }; return v; }
struct __attribute__((aligned(4))) uchar4 { unsigned char x, y, z, w; };
typedef struct uchar4 uchar4;
static inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { uchar4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(2))) short1 { short x; };
typedef struct short1 short1;
static inline short1 make_short1(short x) { short1 v = { x }; return v; }
struct __attribute__((aligned(4))) short2 { short x, y; };
typedef struct short2 short2;
static inline short2 make_short2(short x, short y) { short2 v = { x, y }; return v; }
struct __attribute__((aligned(2))) short3 { short x, y, z; };
typedef struct short3 short3;
static inline short3 make_short3(short x, short y, short z) { short3 v = { x, y, z }; return v; }
struct __attribute__((aligned(8))) short4 { short x, y, z, w; };
typedef struct short4 short4;
static inline short4 make_short4(short x, short y, short z, short w) { short4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(2))) ushort1 { unsigned short x; };
typedef struct ushort1 ushort1;
static inline ushort1 make_ushort1(unsigned short x) { ushort1 v = { x }; return v; }
struct __attribute__((aligned(4))) ushort2 { unsigned short x, y; };
typedef struct ushort2 ushort2;
static inline ushort2 make_ushort2(unsigned short x, unsigned short y) { ushort2 v = { x, y }; return v; }
struct __attribute__((aligned(2))) ushort3 { unsigned short x, y, z; };
typedef struct ushort3 ushort3;
static inline ushort3 make_ushort3(unsigned short x, unsigned short y, unsigned short z) { ushort3 v = { x, y, z }; return v; }
struct __attribute__((aligned(8))) ushort4 { unsigned short x, y, z, w; };
typedef struct ushort4 ushort4;
static inline ushort4 make_ushort4(unsigned short x, unsigned short y, unsigned short z, unsigned short w) { ushort4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(4))) int1 { int x; };
typedef struct int1 int1;
static inline int1 make_int1(int x) { int1 v = { x }; return v; }
struct __attribute__((aligned(8))) int2 { int x, y; };
typedef struct int2 int2;
static inline int2 make_int2(int x, int y) { int2 v = { x, y }; return v; }
struct __attribute__((aligned(4))) int3 { int x, y, z; };
typedef struct int3 int3;
static inline int3 make_int3(int x, int y, int z) { int3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
typedef struct int4 int4;
static inline int4 make_int4(int x, int y, int z, int w) { int4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(4))) uint1 { unsigned int x; };
typedef struct uint1 uint1;
static inline uint1 make_uint1(unsigned int x) { uint1 v = { x }; return v; }
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
typedef struct uint2 uint2;
static inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 v = { x, y }; return v; }
struct __attribute__((aligned(4))) uint3 { unsigned int x, y, z; };
typedef struct uint3 uint3;
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
typedef struct uint4 uint4;
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { uint4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(8))) long1 { long x; };
typedef struct long1 long1;
static inline long1 make_long1(long x) { long1 v = { x }; return v; }
struct __attribute__((aligned(16))) long2 { long x, y; };
typedef struct long2 long2;
static inline long2 make_long2(long x, long y) { long2 v = { x, y }; return v; }
struct __attribute__((aligned(8))) long3 { long x, y, z; };
typedef struct long3 long3;
static inline long3 make_long3(long x, long y, long z) { long3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) long4 { long x, y, z, w; };
typedef struct long4 long4;
static inline long4 make_long4(long x, long y, long z, long w) { long4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(8))) ulong1 { unsigned long x; };
typedef struct ulong1 ulong1;
static inline ulong1 make_ulong1(unsigned long x) { ulong1 v = { x }; return v; }
struct __attribute__((aligned(16))) ulong2 { unsigned long x, y; };
typedef struct ulong2 ulong2;
static inline ulong2 make_ulong2(unsigned long x, unsigned long y) { ulong2 v = { x, y }; return v; }
struct __attribute__((aligned(8))) ulong3 { unsigned long x, y, z; };
typedef struct ulong3 ulong3;
static inline ulong3 make_ulong3(unsigned long x, unsigned long y, unsigned long z) { ulong3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) ulong4 { unsigned long x, y, z, w; };
typedef struct ulong4 ulong4;
static inline ulong4 make_ulong4(unsigned long x, unsigned long y, unsigned long z, unsigned long w) { ulong4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(8))) longlong1 { long long x; };
typedef struct longlong1 longlong1;
static inline longlong1 make_longlong1(long long x) { longlong1 v = { x }; return v; }
struct __attribute__((aligned(16))) longlong2 { long long x, y; };
typedef struct longlong2 longlong2;
static inline longlong2 make_longlong2(long long x, long long y) { longlong2 v = { x, y }; return v; }
struct __attribute__((aligned(8))) longlong3 { long long x, y, z; };
typedef struct longlong3 longlong3;
static inline longlong3 make_longlong3(long long x, long long y, long long z) { longlong3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) longlong4 { long long x, y, z, w; };
typedef struct longlong4 longlong4;
static inline longlong4 make_longlong4(long long x, long long y, long long z, long long w) { longlong4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(8))) ulonglong1 { unsigned long long x; };
typedef struct ulonglong1 ulonglong1;
static inline ulonglong1 make_ulonglong1(unsigned long long x) { ulonglong1 v = { x }; return v; }
struct __attribute__((aligned(16))) ulonglong2 { unsigned long long x, y; };
typedef struct ulonglong2 ulonglong2;
static inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { ulonglong2 v = { x, y }; return v; }
struct __attribute__((aligned(8))) ulonglong3 { unsigned long long x, y, z; };
typedef struct ulonglong3 ulonglong3;
static inline ulonglong3 make_ulonglong3(unsigned long long x, unsigned long long y, unsigned long long z) { ulonglong3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) ulonglong4 { unsigned long long x, y, z, w; };
typedef struct ulonglong4 ulonglong4;
static inline ulonglong4 make_ulonglong4(unsigned long long x, unsigned long long y, unsigned long long z, unsigned long long w) { ulonglong4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(4))) float1 { float x; };
typedef struct float1 float1;
static inline float1 make_float1(float x) { float1 v = { x }; return v; }
struct __attribute__((aligned(8))) float2 { float x, y; };
typedef struct float2 float2;
static inline float2 make_float2(float x, float y) { float2 v = { x, y }; return v; }
struct __attribute__((aligned(4))) float3 { float x, y, z; };
typedef struct float3 float3;
static inline float3 make_float3(float x, float y, float z) { float3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
typedef struct float4 float4;
static inline float4 make_float4(float x, float y, float z, float w) { float4 v = { x, y, z, w }; return v; }
struct __attribute__((aligned(8))) double1 { double x; };
typedef struct double1 double1;
static inline double1 make_double1(double x) { double1 v = { x }; return v; }
struct __attribute__((aligned(16))) double2 { double x, y; };
typedef struct double2 double2;
static inline double2 make_double2(double x, double y) { double2 v = { x, y }; return v; }
struct __attribute__((aligned(8))) double3 { double x, y, z; };
typedef struct double3 double3;
static inline double3 make_double3(double x, double y, double z) { double3 v = { x, y, z }; return v; }
struct __attribute__((aligned(16))) double4 { double x, y, z, w; };
typedef struct double4 double4;
static inline double4 make_double4(double x, double y, double z, double w) { double4 v = { x, y, z, w }; return v; }

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
