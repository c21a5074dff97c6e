// Reductions of a whole array: sum, mean, max, min, argmax, dot, norm.
//
// Two passes, no atomics (so the result does not depend on block order):
//   reduce_partial<T, OP>: a grid of a few blocks per multiprocessor; each
//     thread folds its elements in a grid-stride loop (16-byte vector loads
//     when aligned, a scalar tail), the block combines its threads with warp
//     shuffles and one shared-memory step, and writes one partial result;
//   reduce_final<T, OP>: one block folds the partials and writes the result
//     (mean divides by n, norm takes the square root).
// argmax carries (value, index) pairs; ties go to the smallest index and a
// NaN counts as the largest value, as in NumPy; max and min propagate NaN as
// NumPy's do. In its vector loop a thread keeps one best value per vector
// component and the vector index where it was seen: a thread meets its
// elements in increasing order, so "larger, or a first NaN" is the whole test
// (no index comparison per element); the components meet in the block's
// (value, index) reduction. Float sums accumulate in T: each thread sums few elements and
// the tree over threads and blocks keeps the rounding error small.

enum ReduceOp { R_SUM = 0, R_MAX = 1, R_MIN = 2, R_ARGMAX = 3, R_DOT = 4, R_SUMSQ = 5 };

template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; static const int width = 4; };
template <> struct Vec<double> { typedef double2 type; static const int width = 2; };

template <typename T> __device__ __forceinline__ T infinity();
template <> __device__ __forceinline__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// max and min that propagate NaN, as NumPy's do.
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || a >= b) ? a : b; }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || a <= b) ? a : b; }

// argmax order: NaN above every number (NumPy's argmax returns the first
// NaN), then larger values, then, for equal values, the smaller index.
template <typename T>
__device__ __forceinline__ bool beats(T x, long long i, T y, long long j) {
  const bool x_nan = x != x, y_nan = y != y;
  if (x_nan != y_nan) return x_nan;
  if (!x_nan && x != y) return x > y;
  return i < j;
}

// The running state of one thread: a value and, for argmax, its index.
template <typename T> struct Acc { T v; long long i; };

template <typename T, int OP> __device__ __forceinline__ Acc<T> identity() {
  Acc<T> a;
  a.v = (OP == R_MAX || OP == R_ARGMAX) ? -infinity<T>() : OP == R_MIN ? infinity<T>() : T(0);
  a.i = 0x7fffffffffffffffLL;
  return a;
}

template <typename T, int OP>
__device__ __forceinline__ void fold(Acc<T>& a, T x, T y, long long i) {
  switch (OP) {
    case R_SUM: a.v += x; break;
    case R_DOT: a.v = fma(x, y, a.v); break;
    case R_SUMSQ: a.v = fma(x, x, a.v); break;
    case R_MAX: a.v = nan_max(a.v, x); break;
    case R_MIN: a.v = nan_min(a.v, x); break;
    case R_ARGMAX:
      if (beats(x, i, a.v, a.i)) { a.v = x; a.i = i; }
      break;
  }
}

template <typename T, int OP, typename V>
__device__ __forceinline__ void fold_vector(Acc<T>& a, const V& xs, const V& ys, long long first) {
  const T* xe = reinterpret_cast<const T*>(&xs);
  const T* ye = reinterpret_cast<const T*>(&ys);
#pragma unroll
  for (int k = 0; k < (int)(sizeof(V) / sizeof(T)); ++k) fold<T, OP>(a, xe[k], ye[k], first + k);
}

template <typename T, int OP>
__device__ __forceinline__ void combine(Acc<T>& a, const Acc<T>& b) {
  if (OP == R_ARGMAX) {
    if (beats(b.v, b.i, a.v, a.i)) a = b;
  } else if (OP == R_MAX) {
    a.v = nan_max(a.v, b.v);
  } else if (OP == R_MIN) {
    a.v = nan_min(a.v, b.v);
  } else {
    a.v += b.v;
  }
}

template <typename T, int OP>
__device__ __forceinline__ Acc<T> warp_reduce(Acc<T> a) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Acc<T> other;
    other.v = __shfl_down_sync(0xffffffffu, a.v, offset);
    other.i = OP == R_ARGMAX ? __shfl_down_sync(0xffffffffu, a.i, offset) : 0;
    combine<T, OP>(a, other);
  }
  return a;
}

// The block's combined state, valid in thread 0. blockDim.x is a multiple of 32.
template <typename T, int OP>
__device__ __forceinline__ Acc<T> block_reduce(Acc<T> a) {
  __shared__ T values[32];
  __shared__ long long indices[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = warp_reduce<T, OP>(a);
  if (lane == 0) { values[warp] = a.v; indices[warp] = a.i; }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    a = identity<T, OP>();
    if (lane < warps) { a.v = values[lane]; a.i = indices[lane]; }
    a = warp_reduce<T, OP>(a);
  }
  return a;
}

template <typename T, int OP>
__global__ void reduce_partial(const T* __restrict__ x, const T* __restrict__ y, long long n,
                               T* __restrict__ partial_values, long long* __restrict__ partial_indices) {
  typedef typename Vec<T>::type V;
  const int W = Vec<T>::width;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  Acc<T> a = identity<T, OP>();
  long long scalar_from = 0;
  if ((((unsigned long long)x | (unsigned long long)y) & 15) == 0) {
    const long long vectors = n / W;
    const V* xv = reinterpret_cast<const V*>(x);
    const V* yv = reinterpret_cast<const V*>(y);
    if (OP == R_ARGMAX) {
      T best[W];
      long long where[W];
#pragma unroll
      for (int c = 0; c < W; ++c) {
        best[c] = -infinity<T>();
        where[c] = first < vectors ? first : 0x7fffffffffffffffLL;   // -inf at the first vector
      }
      long long v = first;
      for (; v < vectors; v += 2 * stride) {
        const bool second = v + stride < vectors;
        const V x0 = xv[v], x1 = xv[second ? v + stride : v];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const T* xs = reinterpret_cast<const T*>(h ? &x1 : &x0);
          const long long at = h ? v + stride : v;
          if (h == 0 || second) {
#pragma unroll
            for (int c = 0; c < W; ++c) {
              const T e = xs[c];
              if (e > best[c] || (e != e && best[c] == best[c])) { best[c] = e; where[c] = at; }
            }
          }
        }
      }
#pragma unroll
      for (int c = 0; c < W; ++c) {
        Acc<T> b;
        b.v = best[c];
        b.i = where[c] == 0x7fffffffffffffffLL ? where[c] : where[c] * W + c;
        combine<T, OP>(a, b);
      }
    } else {
      long long v = first;
      // two independent 16-byte loads in flight per thread before either is folded
      for (; v + stride < vectors; v += 2 * stride) {
        V x0 = xv[v], x1 = xv[v + stride];
        V y0 = OP == R_DOT ? yv[v] : x0, y1 = OP == R_DOT ? yv[v + stride] : x1;
        fold_vector<T, OP>(a, x0, y0, v * W);
        fold_vector<T, OP>(a, x1, y1, (v + stride) * W);
      }
      if (v < vectors) {
        V x0 = xv[v], y0 = OP == R_DOT ? yv[v] : x0;
        fold_vector<T, OP>(a, x0, y0, v * W);
      }
    }
    scalar_from = vectors * W;
  }
  for (long long i = scalar_from + first; i < n; i += stride)
    fold<T, OP>(a, x[i], OP == R_DOT ? y[i] : x[i], i);
  a = block_reduce<T, OP>(a);
  if (threadIdx.x == 0) {
    partial_values[blockIdx.x] = a.v;
    partial_indices[blockIdx.x] = a.i;
  }
}

template <typename T, int OP>
__global__ void reduce_final(const T* __restrict__ partial_values,
                             const long long* __restrict__ partial_indices, int count,
                             T* __restrict__ result, long long* __restrict__ result_index,
                             T scale, int take_sqrt) {
  Acc<T> a = identity<T, OP>();
  for (int k = threadIdx.x; k < count; k += blockDim.x) {
    Acc<T> b;
    b.v = partial_values[k];
    b.i = partial_indices[k];
    combine<T, OP>(a, b);
  }
  a = block_reduce<T, OP>(a);
  if (threadIdx.x == 0) {
    T v = a.v * scale;
    result[0] = take_sqrt ? sqrt(v) : v;
    result_index[0] = a.i;
  }
}
