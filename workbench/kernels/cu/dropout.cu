// Dropout with a counter-based random number generator: Philox-4x32-10
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
// Element i takes word i % 4 of Philox(counter = (i / 4, offset), key = seed):
// the mask depends only on (seed, offset, i), so it is the same on every
// device, for any launch configuration, and NumPy can reproduce it exactly.
// The element is kept when the word's top 24 bits, as u in [0, 1), are >= p;
// kept elements are multiplied by scale = 1 / (1 - p).

typedef unsigned int u32;  // no <stdint.h>: CuPy's NVRTC has no system headers

struct Philox4 { u32 v[4]; };

__device__ __forceinline__ Philox4 philox4x32_10(u32 c0, u32 c1, u32 c2, u32 c3,
                                                 u32 k0, u32 k1)
{
    const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const u32 hi0 = __umulhi(M0, c0), lo0 = M0 * c0;
        const u32 hi1 = __umulhi(M1, c2), lo1 = M1 * c2;
        const u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += W0; k1 += W1;
    }
    Philox4 r = {{c0, c1, c2, c3}};
    return r;
}

// One thread per group of four elements (grid-stride loop). When x and y are 16-byte
// aligned (and the mask 4-byte aligned) a whole group moves as one float4 (or two
// double2) load and store and one 4-byte mask store: with four scalar accesses each,
// too few bytes were in flight (~35% of the copy bandwidth).
template <typename T> struct Four;
template <> struct Four<float> {
  float4 v;
  __device__ __forceinline__ void load(const float* p) { v = *reinterpret_cast<const float4*>(p); }
  __device__ __forceinline__ void store(float* p) const { *reinterpret_cast<float4*>(p) = v; }
  __device__ __forceinline__ float& operator[](int j) { return reinterpret_cast<float*>(&v)[j]; }
};
template <> struct Four<double> {
  double2 a, b;
  __device__ __forceinline__ void load(const double* p) {
    a = reinterpret_cast<const double2*>(p)[0];
    b = reinterpret_cast<const double2*>(p)[1];
  }
  __device__ __forceinline__ void store(double* p) const {
    reinterpret_cast<double2*>(p)[0] = a;
    reinterpret_cast<double2*>(p)[1] = b;
  }
  __device__ __forceinline__ double& operator[](int j) {
    return j < 2 ? reinterpret_cast<double*>(&a)[j] : reinterpret_cast<double*>(&b)[j - 2];
  }
};

template <typename T>
__global__ void dropout_philox(const T* __restrict__ x, T* __restrict__ y, unsigned char* __restrict__ mask,
                               long long n, float p, T scale, unsigned long long seed,
                               unsigned long long offset)
{
    const long long groups = (n + 3) / 4;
    const bool aligned = (((unsigned long long)x | (unsigned long long)y) & 15) == 0
                         && ((unsigned long long)mask & 3) == 0;
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        const bool whole = aligned && 4 * g + 3 < n;
        Four<T> v;
        if (whole) v.load(x + 4 * g);   // in flight while the generator runs
        const Philox4 r = philox4x32_10((u32)g, (u32)((unsigned long long)g >> 32),
                                        (u32)offset, (u32)(offset >> 32),
                                        (u32)seed, (u32)(seed >> 32));
        bool keep[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            keep[j] = (float)(r.v[j] >> 8) * (1.0f / 16777216.0f) >= p;
        if (whole) {
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = keep[j] ? v[j] * scale : T(0);
            v.store(y + 4 * g);
            *reinterpret_cast<u32*>(mask + 4 * g) =
                (u32)keep[0] | (u32)keep[1] << 8 | (u32)keep[2] << 16 | (u32)keep[3] << 24;
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long i = 4 * g + j;
            if (i < n) {
                y[i] = keep[j] ? x[i] * scale : T(0);
                mask[i] = keep[j];
            }
        }
    }
}
