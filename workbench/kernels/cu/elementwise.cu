// Elementwise kernels: one template, map_kernel<T, OP>, for every operation but the
// multiply-add chain, which has its own kernel (fma_chain_kernel, at the end).
//
// out[i] = op(a[i], b[i], c[i]) for i < n, with scalar parameters p0 and p1.
// Operations that read fewer inputs never load through the extra pointers (the
// caller passes `a`).
//
// Speed: a memory-bound stream needs enough bytes in flight to cover the memory's
// latency (Little's law: on an H200 about 48 KiB of loads per multiprocessor). Each
// thread of a grid-stride loop takes VECS 16-byte vectors (float4 or double2) per
// input and step, all loads issued before the first is used: 4 vectors for one input,
// 2 for two or three, so every thread has 64 bytes or more of loads in flight (with
// 2 vectors a one-input kernel reached ~90% of the copy bandwidth, two-input ones 97%).
// The launch bounds keep 6 blocks of 256 threads on each multiprocessor (5 or 4 for
// the heavier ones, MapBlocks): 80-96 KiB of loads in flight. Arrays not 16-byte
// aligned, and the last n % width elements, take the scalar loop. The grid (as many
// blocks as stay resident) is the caller's.
//
// The transcendental functions are written to take few instructions (at the copy
// bandwidth an H200 has ~60 issue slots per element): GELU's tanh form as
// x / (1 + exp(-2u)), one exponential instead of tanh's longer sequence; divisions
// where the divisor is >= 1 as a reciprocal and a product (__fdividef, 2 ulp); and
// softplus's log(1 + e), e = exp(-|x|) in (0, 1], from a short series (log1p_unit).

enum MapOp {
  OP_ADD = 0, OP_SCALE = 1, OP_AXPY = 2, OP_FMA = 3,
  OP_RELU = 10, OP_LEAKY_RELU = 11, OP_GELU_TANH = 12, OP_GELU_ERF = 13,
  OP_SIGMOID = 14, OP_TANH = 15, OP_SOFTPLUS = 16, OP_SILU = 17
};

template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; static const int width = 4; };
template <> struct Vec<double> { typedef double2 type; static const int width = 2; };

// a / b for b >= 1 (or infinite): the approximate reciprocal in float (2 ulp), exact in double
__device__ __forceinline__ float divide_by_large(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ double divide_by_large(double a, double b) { return a / b; }

// log(1 + e) for e in [0, 1]. Float: log(1 + e) = 2 atanh(t), t = e / (2 + e) in
// [0, 1/3], whose odd series in t falls by at least 9x a term: seven terms are below
// float's rounding, 10 operations against log1pf's ~25.
__device__ __forceinline__ float log1p_unit(float e) {
  const float t = __fdividef(e, 2.0f + e), s = t * t;
  float p = 2.0f / 13.0f;
  p = fmaf(p, s, 2.0f / 11.0f);
  p = fmaf(p, s, 2.0f / 9.0f);
  p = fmaf(p, s, 2.0f / 7.0f);
  p = fmaf(p, s, 2.0f / 5.0f);
  p = fmaf(p, s, 2.0f / 3.0f);
  p = fmaf(p, s, 2.0f);
  return t * p;
}
__device__ __forceinline__ double log1p_unit(double e) { return log1p(e); }

template <typename T, int OP>
__device__ __forceinline__ T apply(T a, T b, T c, T p0, T p1) {
  const T zero = T(0), one = T(1), half = T(0.5);
  switch (OP) {
    case OP_ADD: return a + b;
    case OP_SCALE: return p0 * a;
    case OP_AXPY: return fma(p0, a, b);                  // p0 * a + b
    case OP_FMA: return fma(a, b, c);                    // a * b + c
    case OP_RELU: return a > zero ? a : zero;
    case OP_LEAKY_RELU: return a > zero ? a : p0 * a;
    case OP_GELU_TANH: {   // 0.5 a (1 + tanh(u)) = a / (1 + exp(-2u)), u = sqrt(2/pi) (a + 0.044715 a^3)
      const T k2 = T(-1.5957691216057308), c3 = T(0.044715);   // -2 sqrt(2/pi)
      return divide_by_large(a, one + exp(k2 * fma(c3 * a, a * a, a)));
    }
    case OP_GELU_ERF: return half * a * (one + erf(a * T(0.7071067811865476)));
    case OP_SIGMOID: {   // e = exp(-|a|) in (0, 1]: the divisor stays in [1, 2], never past float's range
      const T e = exp(-fabs(a));
      return divide_by_large(a >= zero ? one : e, one + e);
    }
    case OP_TANH: return tanh(a);
    case OP_SOFTPLUS:                                    // log(1 + e^a) without overflow
      return (a > zero ? a : zero) + log1p_unit(exp(-fabs(a)));
    case OP_SILU: {      // a sigmoid(a), the same way (a / (1 + exp(-a)) loses a < -87 to 0)
      const T e = exp(-fabs(a));
      return divide_by_large(a >= zero ? a : a * e, one + e);
    }
  }
  return a;
}

// Blocks of 256 threads each multiprocessor must hold (the launch bounds' promise, which
// caps registers at 65536 / (256 x blocks)): 6 (40 registers) for one float input and
// for add, 5 (48) for fma, 4 (64) in double; none for axpy, which ptxas fits in 38
// registers unasked but spills under a cap. elementwise.py's grid agrees.
template <typename T, int OP> struct MapBlocks {
  static const int value = sizeof(T) == 8 ? 4 : OP == OP_AXPY ? 0 : OP == OP_FMA ? 5 : 6;
};

template <typename T, int OP>
__global__ void __launch_bounds__(256, MapBlocks<T, OP>::value) map_kernel(
    const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
    T* __restrict__ out, long long n, T p0, T p1) {
  typedef typename Vec<T>::type V;
  const int W = Vec<T>::width;
  const int INPUTS = (OP == OP_ADD || OP == OP_AXPY) ? 2 : OP == OP_FMA ? 3 : 1;  // arrays read
  const int VECS = INPUTS == 1 ? 4 : 2;       // vectors per input and step
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long misaligned = ((unsigned long long)a | (unsigned long long)b | (unsigned long long)c | (unsigned long long)out) & 15;
  long long scalar_from = 0;
  if (misaligned == 0) {
    const long long vectors = n / W;
    const V* av = reinterpret_cast<const V*>(a);
    const V* bv = reinterpret_cast<const V*>(b);
    const V* cv = reinterpret_cast<const V*>(c);
    V* ov = reinterpret_cast<V*>(out);
    for (long long v = first; v < vectors; v += VECS * stride) {
      V x[VECS], y[VECS], z[VECS];
#pragma unroll
      for (int u = 0; u < VECS; ++u) {         // every load first: all in flight together
        const long long w = v + u * stride;
        const long long at = w < vectors ? w : v;   // past the end: reload v (not stored)
        x[u] = av[at];
        if (INPUTS >= 2) y[u] = bv[at];
        if (INPUTS >= 3) z[u] = cv[at];
      }
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const T* xs = reinterpret_cast<const T*>(&x[u]);
        const T* ys = reinterpret_cast<const T*>(INPUTS >= 2 ? &y[u] : &x[u]);
        const T* zs = reinterpret_cast<const T*>(INPUTS >= 3 ? &z[u] : &x[u]);
        V r;
        T* rs = reinterpret_cast<T*>(&r);
#pragma unroll
        for (int k = 0; k < W; ++k) rs[k] = apply<T, OP>(xs[k], ys[k], zs[k], p0, p1);
        if (v + u * stride < vectors) ov[v + u * stride] = r;
      }
    }
    scalar_from = vectors * W;
  }
  for (long long i = scalar_from + first; i < n; i += stride)
    out[i] = apply<T, OP>(a[i], INPUTS >= 2 ? b[i] : a[i], INPUTS >= 3 ? c[i] : a[i], p0, p1);
}

// fma_chain_kernel: `steps` dependent multiply-adds per element, y = y * p0 + p1.
//
// At 64 steps (128 FLOP per 8 bytes, 16 FLOP/byte in float) the kernel sits at the
// ridge point of an H100/H200, where the FMA peak and the copy bandwidth give the same
// time, so it reaches its roofline only if both run at once, all the time:
//  * each thread advances its 16 values together, steps outside, values inside: 16
//    independent chains, so a warp issues an FMA every cycle rather than one per FMA
//    latency (4 cycles), with little loop control between them;
//  * its loads run one step ahead (software pipelining): the next 4 vectors are
//    requested before this step's arithmetic, so every warp has 64 bytes in flight
//    while it computes and the memory never waits for the arithmetic, nor the
//    arithmetic for the memory.
template <typename T>
__global__ void __launch_bounds__(256) fma_chain_kernel(
    const T* __restrict__ a, T* __restrict__ out, long long n, T p0, T p1, int steps) {
  typedef typename Vec<T>::type V;
  const int W = Vec<T>::width, VECS = 4;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long scalar_from = 0;
  if ((((unsigned long long)a | (unsigned long long)out) & 15) == 0) {
    const long long vectors = n / W;
    const V* av = reinterpret_cast<const V*>(a);
    V* ov = reinterpret_cast<V*>(out);
    V next[VECS];
    auto load = [&](long long v) {
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const long long w = v + u * stride;
        if (w < vectors) next[u] = av[w];
      }
    };
    load(first);
    for (long long v = first; v < vectors; v += VECS * stride) {
      T y[VECS * W];
#pragma unroll
      for (int u = 0; u < VECS; ++u)
#pragma unroll
        for (int k = 0; k < W; ++k) y[u * W + k] = reinterpret_cast<const T*>(&next[u])[k];
      load(v + VECS * stride);   // the next step's vectors, in flight during the chains
#pragma unroll 8
      for (int s = 0; s < steps; ++s)
#pragma unroll
        for (int e = 0; e < VECS * W; ++e) y[e] = fma(y[e], p0, p1);
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        V r;
#pragma unroll
        for (int k = 0; k < W; ++k) reinterpret_cast<T*>(&r)[k] = y[u * W + k];
        if (v + u * stride < vectors) ov[v + u * stride] = r;
      }
    }
    scalar_from = vectors * W;
  }
  for (long long i = scalar_from + first; i < n; i += stride) {
    T y = a[i];
    for (int s = 0; s < steps; ++s) y = fma(y, p0, p1);
    out[i] = y;
  }
}
