// Row-wise kernels over a (rows, cols) array: softmax, log-softmax, layer
// norm and cross-entropy. Rows are visited in a grid-stride loop.
//
// The kernels with a WARP parameter run one warp per row when it is true
// (8 rows per block of 256 threads: short rows, up to about a thousand
// columns) and one block per row when it is false (long rows).
//
// softmax_kernel is the one-pass "online" form: each thread keeps a running
// maximum m and a sum s of exp(x - m) over its columns, rescaling s when m
// grows; the (m, s) pairs are then combined across the warp (and the block),
// so the row is read once for its statistics and once more to write the
// result. For rows of 1k to 32k columns softmax_cached_kernel keeps the row
// in registers instead (VPT values per thread of a 512-thread block), so it
// reads the row from memory exactly once, whatever the L2 cache holds.
// Layer norm takes the sum and the sum of squares of x - x[0] (the shift
// keeps the variance accurate) in one pass.

template <typename T> __device__ __forceinline__ T infinity();
template <> __device__ __forceinline__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// A running maximum and the sum of exp(x - max).
template <typename T> struct MaxSum { T m; T s; };

template <typename T>
__device__ __forceinline__ void add_value(MaxSum<T>& a, T x) {
  if (x > a.m) {
    a.s = a.s * exp(a.m - x) + T(1);
    a.m = x;
  } else {
    a.s += exp(x - a.m);
  }
}

template <typename T>
__device__ __forceinline__ MaxSum<T> merge(MaxSum<T> a, MaxSum<T> b) {
  MaxSum<T> r;
  r.m = a.m > b.m ? a.m : b.m;
  // a side with no values yet (m = -inf) adds nothing, without -inf - -inf
  const T sa = a.m == r.m ? a.s : a.s * exp(a.m - r.m);
  const T sb = b.m == r.m ? b.s : b.s * exp(b.m - r.m);
  r.s = sa + sb;
  return r;
}

template <typename T>
__device__ __forceinline__ MaxSum<T> warp_merge(MaxSum<T> v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum<T> other;
    other.m = __shfl_xor_sync(0xffffffffu, v.m, offset);
    other.s = __shfl_xor_sync(0xffffffffu, v.s, offset);
    v = merge(v, other);
  }
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The (m, s) of the whole row in every thread of the row's group.
template <typename T, bool WARP>
__device__ __forceinline__ MaxSum<T> row_merge(MaxSum<T> v) {
  v = warp_merge(v);
  if (WARP) return v;
  __shared__ T ms[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { ms[warp] = v.m; ss[warp] = v.s; }
  __syncthreads();
  MaxSum<T> w;
  w.m = -infinity<T>();
  w.s = T(0);
  if (lane < (int)(blockDim.x >> 5)) { w.m = ms[lane]; w.s = ss[lane]; }
  w = warp_merge(w);
  __syncthreads();  // the shared slots are reused by the next row
  return w;
}

// Two sums of the whole row in every thread of the row's group.
template <typename T, bool WARP>
__device__ __forceinline__ void row_sums(T& a, T& b) {
  a = warp_sum(a);
  b = warp_sum(b);
  if (WARP) return;
  __shared__ T as[32], bs[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { as[warp] = a; bs[warp] = b; }
  __syncthreads();
  const bool live = lane < (int)(blockDim.x >> 5);
  a = warp_sum(live ? as[lane] : T(0));
  b = warp_sum(live ? bs[lane] : T(0));
  __syncthreads();
}

// Where this thread starts in a row, how far it steps, which row it takes
// first and how many rows the grid moves on.
struct RowLoop { int lane; int step; long long first; long long stride; };

template <bool WARP>
__device__ __forceinline__ RowLoop row_loop() {
  RowLoop r;
  if (WARP) {
    const int rows_per_block = blockDim.x >> 5;
    r.lane = threadIdx.x & 31;
    r.step = 32;
    r.first = (long long)blockIdx.x * rows_per_block + (threadIdx.x >> 5);
    r.stride = (long long)gridDim.x * rows_per_block;
  } else {
    r.lane = threadIdx.x;
    r.step = blockDim.x;
    r.first = blockIdx.x;
    r.stride = gridDim.x;
  }
  return r;
}

template <typename T, bool MAX>
__device__ __forceinline__ T warp_all(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = MAX ? (other > v ? other : v) : v + other;
  }
  return v;
}

// The maximum (MAX) or the sum of v over the block, in every thread.
template <typename T, bool MAX>
__device__ __forceinline__ T block_all(T v) {
  __shared__ T slots[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_all<T, MAX>(v);
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? slots[lane] : (MAX ? -infinity<T>() : T(0));
  v = warp_all<T, MAX>(v);
  __syncthreads();  // the slots are reused by the next call
  return v;
}

// One block of CACHED_BLOCK threads per row, the row held in registers:
// column j of a row is value j / CACHED_BLOCK of thread j % CACHED_BLOCK
// (consecutive threads read consecutive columns). The block size is a
// constant so that the VPT loads are one base address plus immediate
// offsets. Needs cols <= VPT * CACHED_BLOCK.
#define CACHED_BLOCK 512

template <typename T, bool LOG, int VPT>
__global__ void __launch_bounds__(CACHED_BLOCK) softmax_cached_kernel(
    const T* __restrict__ x, T* __restrict__ y, long long rows, long long cols) {
  const int t = threadIdx.x;
  const int left = (int)cols - t;  // this thread's columns: k * CACHED_BLOCK < left
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * cols + t;
    T* out = y + row * cols + t;
    T v[VPT];
    T m = -infinity<T>();
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      v[k] = k * CACHED_BLOCK < left ? in[k * CACHED_BLOCK] : -infinity<T>();
      m = v[k] > m ? v[k] : m;
    }
    m = block_all<T, true>(m);
    T s = T(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {  // exp(-inf) = 0 past the row's end
      const T e = exp(v[k] - m);
      s += e;
      if (!LOG) v[k] = e;  // softmax needs only the exponentials from here on
    }
    s = block_all<T, false>(s);
    const T shift = m + log(s), inverse = T(1) / s;
#pragma unroll
    for (int k = 0; k < VPT; ++k)
      if (k * CACHED_BLOCK < left) out[k * CACHED_BLOCK] = LOG ? v[k] - shift : v[k] * inverse;
  }
}

template <typename T, bool LOG, bool WARP>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, long long rows,
                               long long cols) {
  const RowLoop loop = row_loop<WARP>();
  for (long long row = loop.first; row < rows; row += loop.stride) {
    const T* in = x + row * cols;
    T* out = y + row * cols;
    MaxSum<T> v;
    v.m = -infinity<T>();
    v.s = T(0);
    for (long long j = loop.lane; j < cols; j += loop.step) add_value(v, in[j]);
    v = row_merge<T, WARP>(v);
    if (LOG) {
      const T shift = v.m + log(v.s);
      for (long long j = loop.lane; j < cols; j += loop.step) out[j] = in[j] - shift;
    } else {
      const T inverse = T(1) / v.s;
      for (long long j = loop.lane; j < cols; j += loop.step) out[j] = exp(in[j] - v.m) * inverse;
    }
  }
}

template <typename T, bool WARP>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                  const T* __restrict__ beta, T* __restrict__ y, long long rows,
                                  long long cols, T eps) {
  const RowLoop loop = row_loop<WARP>();
  for (long long row = loop.first; row < rows; row += loop.stride) {
    const T* in = x + row * cols;
    T* out = y + row * cols;
    const T shift = in[0];
    T sum = T(0), squares = T(0);
    for (long long j = loop.lane; j < cols; j += loop.step) {
      const T d = in[j] - shift;
      sum += d;
      squares = fma(d, d, squares);
    }
    row_sums<T, WARP>(sum, squares);
    const T mean_shifted = sum / T(cols);
    T variance = squares / T(cols) - mean_shifted * mean_shifted;
    variance = variance > T(0) ? variance : T(0);
    const T mean = shift + mean_shifted;
    const T rstd = T(1) / sqrt(variance + eps);
    for (long long j = loop.lane; j < cols; j += loop.step)
      out[j] = fma((in[j] - mean) * rstd, gamma[j], beta[j]);
  }
}

template <typename T, bool WARP>
__global__ void cross_entropy_kernel(const T* __restrict__ logits,
                                     const long long* __restrict__ targets,
                                     T* __restrict__ losses, long long rows, long long cols) {
  const RowLoop loop = row_loop<WARP>();
  for (long long row = loop.first; row < rows; row += loop.stride) {
    const T* in = logits + row * cols;
    MaxSum<T> v;
    v.m = -infinity<T>();
    v.s = T(0);
    for (long long j = loop.lane; j < cols; j += loop.step) add_value(v, in[j]);
    v = row_merge<T, WARP>(v);
    if (loop.lane == 0) {
      const long long t = targets[row];
      // a target outside 0..cols-1 gives NaN rather than reading past the row
      losses[row] = (t >= 0 && t < cols) ? v.m + log(v.s) - in[t] : infinity<T>() - infinity<T>();
    }
  }
}
