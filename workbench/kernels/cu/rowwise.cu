// Row-wise kernels over a (rows, cols) array: softmax, log-softmax, layer
// norm and cross-entropy. Rows are visited in a grid-stride loop.
//
// The kernels with a WARP parameter run one warp per row when it is true
// (8 rows per block of 256 threads: short rows, up to about a thousand
// columns) and one block per row when it is false (long rows).
//
// Rows of up to 32768 floats (16384 doubles) go to rowwise_kernel, which holds
// the row in registers (below). Longer rows take the kernels at the end, one
// block per row: softmax_kernel is the "online" form (each thread keeps a
// running maximum m and a sum s of exp(x - m), rescaling s when m grows; the
// (m, s) pairs are combined across the block), so the row is read once for its
// statistics and once more for the result; layer norm takes the sum and the sum
// of squares of x - x[0] (the shift keeps the variance accurate) in one pass.

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

// ---- rows held in registers --------------------------------------------------------
//
// rowwise_kernel<T, OP, VPT>: a group of `group` threads (a warp, or the whole block)
// takes a row; thread `lane` of the group holds the row's 16-byte vectors lane,
// lane + group, lane + 2 group, ... (VPT of them: up to 64 floats), so the row is read
// from memory once, with coalesced 16-byte loads, whatever the cache holds; the
// reductions (max, sums) run over registers and the result is written once. Every
// unrolled load is independent, so all of a thread's loads are in flight together.
// `vec` says rows are whole vectors on 16-byte boundaries (cols a multiple of the
// width, aligned arrays); otherwise the same vectors are gathered element by element.
//
// With `prefetch` (the longest rows, where one block fills a multiprocessor and there
// is no other block to overlap with) each thread also copies its vectors of the
// block's next row into shared memory with cp.async while it works on this one, so
// that the memory system never waits on the arithmetic and the reductions. Each
// thread reads back only what it copied itself (prefetch runs with whole-block groups,
// whose first reduction's barrier orders those reads before the next copies).
enum RowOp { ROW_SOFTMAX = 0, ROW_LOG_SOFTMAX = 1, ROW_LAYER_NORM = 2, ROW_CROSS_ENTROPY = 3 };

template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; static const int width = 4; };
template <> struct Vec<double> { typedef double2 type; static const int width = 2; };

#if defined(__WBSIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
__device__ __forceinline__ void row_copy16(void* dst, const void* src, bool valid) {
  if (valid) *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
}
__device__ __forceinline__ void row_copies_wait() {}
#else
__device__ __forceinline__ void row_copy16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))), "l"(src),
                  "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void row_copies_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#endif

// The maximum (MAX) or sum of v over the row's group, in every thread of it.
template <typename T, bool MAX>
__device__ __forceinline__ T group_all(T v, int group) {
  return group > 32 ? block_all<T, MAX>(v) : warp_all<T, MAX>(v);
}

template <typename T, typename V>
__device__ __forceinline__ T& component(V& v, int c) { return reinterpret_cast<T*>(&v)[c]; }
template <typename T, typename V>
__device__ __forceinline__ T component(const V& v, int c) { return reinterpret_cast<const T*>(&v)[c]; }

template <typename T, int OP, int VPT>
__global__ void __launch_bounds__(512) rowwise_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
    const long long* __restrict__ targets, T* __restrict__ y, long long rows, long long cols,
    int threads_per_row, int vec, int prefetch, T eps) {
  typedef typename Vec<T>::type V;
  // VPT = 16 is launched with whole blocks of 512 only: a constant keeps the unrolled
  // addresses immediate offsets from one base (fewer registers beside the 64 values)
  const int group = VPT == 16 ? 512 : threads_per_row;
  const int W = Vec<T>::width;
  extern __shared__ __align__(16) unsigned char row_dynamic_shared[];
  V* staged = reinterpret_cast<V*>(row_dynamic_shared);   // group * VPT vectors, with prefetch
  const int lane = threadIdx.x % group;
  const int rows_per_block = blockDim.x / group;
  const long long stride = (long long)gridDim.x * rows_per_block;
  const long long first = (long long)blockIdx.x * rows_per_block + threadIdx.x / group;
  const T filler = OP == ROW_LAYER_NORM ? T(0) : -infinity<T>();   // past the row's end
  const int n = (int)cols;                 // the host keeps rows under 2^31 values
  const int vectors = (n + W - 1) / W;

  auto stage = [&](long long row) {   // this thread's vectors of `row` into shared memory
    const V* in = reinterpret_cast<const V*>(x + row * cols);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * group;
      row_copy16(&staged[lane + k * group], in + (j < vectors ? j : 0), j < vectors);
    }
  };
  if (prefetch && first < rows) stage(first);

  for (long long row = first; row < rows; row += stride) {
    const T* in = x + row * cols;
    V v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * group;   // vector j: columns W j .. W j + W - 1
      if (prefetch) {
        if (k == 0) row_copies_wait();
        v[k] = staged[lane + k * group];
        if (j >= vectors)
#pragma unroll
          for (int c = 0; c < W; ++c) component<T>(v[k], c) = filler;
      } else if (vec) {
        if (j < vectors) {
          v[k] = reinterpret_cast<const V*>(in)[j];
        } else {
#pragma unroll
          for (int c = 0; c < W; ++c) component<T>(v[k], c) = filler;
        }
      } else {
#pragma unroll
        for (int c = 0; c < W; ++c)
          component<T>(v[k], c) = W * j + c < n ? in[W * j + c] : filler;
      }
    }
    // the next row's copies start after the first reduction, whose barrier also
    // guarantees that every read of the staging buffer above has completed
    auto stage_next = [&]() { if (prefetch && row + stride < rows) stage(row + stride); };

    if (OP == ROW_LAYER_NORM) {
      T sum = T(0);
#pragma unroll
      for (int k = 0; k < VPT; ++k)
#pragma unroll
        for (int c = 0; c < W; ++c) sum += component<T>(v[k], c);
      const T mean = group_all<T, false>(sum, group) / T(n);
      stage_next();
      T squares = T(0);   // the second pass runs over registers: exact, and free
#pragma unroll
      for (int k = 0; k < VPT; ++k)
#pragma unroll
        for (int c = 0; c < W; ++c) {
          const T d = W * (lane + k * group) + c < n ? component<T>(v[k], c) - mean : T(0);
          squares = fma(d, d, squares);
        }
      const T rstd = T(1) / sqrt(group_all<T, false>(squares, group) / T(n) + eps);
      T* out = y + row * cols;
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int j = lane + k * group;
        if (vec) {
          if (j < vectors) {
            const V g = reinterpret_cast<const V*>(gamma)[j], b = reinterpret_cast<const V*>(beta)[j];
            V r;
#pragma unroll
            for (int c = 0; c < W; ++c)
              component<T>(r, c) = fma((component<T>(v[k], c) - mean) * rstd,
                                       component<T>(g, c), component<T>(b, c));
            reinterpret_cast<V*>(out)[j] = r;
          }
        } else {
#pragma unroll
          for (int c = 0; c < W; ++c) {
            const int col = W * j + c;
            if (col < n) out[col] = fma((component<T>(v[k], c) - mean) * rstd, gamma[col], beta[col]);
          }
        }
      }
      continue;
    }

    T m = -infinity<T>();
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) m = fmax(m, component<T>(v[k], c));
    m = group_all<T, true>(m, group);
    stage_next();
    T s = T(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) {   // exp(-inf) = 0 past the row's end
        const T e = exp(component<T>(v[k], c) - m);
        s += e;
        if (OP == ROW_SOFTMAX) component<T>(v[k], c) = e;   // only the exponentials are needed now
      }
    s = group_all<T, false>(s, group);
    if (OP == ROW_CROSS_ENTROPY) {
      if (lane == 0) {
        const long long t = targets[row];
        // a target outside 0..cols-1 gives NaN rather than reading past the row
        y[row] = (t >= 0 && t < cols) ? m + log(s) - in[t] : infinity<T>() - infinity<T>();
      }
      continue;
    }
    const T shift = m + log(s), inverse = T(1) / s;
    T* out = y + row * cols;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * group;
      V r;
#pragma unroll
      for (int c = 0; c < W; ++c)
        component<T>(r, c) = OP == ROW_SOFTMAX ? component<T>(v[k], c) * inverse : component<T>(v[k], c) - shift;
      if (vec) {
        if (j < vectors) reinterpret_cast<V*>(out)[j] = r;
      } else {
#pragma unroll
        for (int c = 0; c < W; ++c)
          if (W * j + c < n) out[W * j + c] = component<T>(r, c);
      }
    }
  }
  if (prefetch) row_copies_wait();   // no copy may land after the block has gone
}

// ---- rows longer than the registers hold ---------------------------------------------

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
