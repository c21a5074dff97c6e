// Row-wise kernels over a (rows, cols) array: softmax, log-softmax, layer norm and
// cross-entropy, for float and double.
//
// One reduction a row. Each thread first reduces its own values (held in registers)
// to partial statistics, then the row's threads merge those in one tree:
//   softmax, log-softmax, cross-entropy: (m, s), this thread's maximum and the sum of
//     exp(x - m) over its values; two pairs merge as (max, s_a e^(m_a - m) + s_b e^(m_b - m)).
//     Softmax keeps each e^(x - m_t) and scales it by e^(m_t - M) / S at the end.
//   layer norm: (n, mean, M2), the count, mean and sum of squared deviations of this
//     thread's values (two passes over registers: exact); triples merge by Chan's formula.
// A block-wide reduction thus costs one barrier a row; its shared slots alternate
// between two sets from one row to the next, so no second barrier guards their reuse.
//
// Three kernels, chosen by the host (rowwise.py):
//  * rowwise_staged_kernel: rows of over 4k (layer norm 2k), up to 16k floats, whole
//    16-byte vectors, on Hopper and later GPUs (and on the simulator, which imitates
//    the copies). A persistent grid; each block streams its rows through a ring of
//    shared-memory stages filled by the copy engine (below), so that the next rows'
//    reads are always in flight while this row is reduced and written.
//  * rowwise_kernel: rows of up to 32k floats read straight into registers: a warp a
//    row up to 2048 floats, a block of 256 or 512 threads beyond (where the staged
//    kernel cannot run or was measured slower: unaligned rows, GPUs before Hopper,
//    shorter rows, rows of more than 16k floats, cross-entropy).
//  * cross_entropy_stream_kernel: cross-entropy on whole, aligned 16-byte vectors, any
//    length: a warp streams its row into a running (max, sum of exp), nothing kept.
//  * softmax_kernel, layer_norm_kernel, cross_entropy_kernel: longer rows, a block a
//    row, two reads (online softmax; layer norm from sums of x - x[0]).

template <typename T> __device__ __forceinline__ T infinity();
template <> __device__ __forceinline__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

enum RowOp { ROW_SOFTMAX = 0, ROW_LOG_SOFTMAX = 1, ROW_LAYER_NORM = 2, ROW_CROSS_ENTROPY = 3 };

template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; static const int width = 4; };
template <> struct Vec<double> { typedef double2 type; static const int width = 2; };

template <typename T, typename V>
__device__ __forceinline__ T& component(V& v, int c) { return reinterpret_cast<T*>(&v)[c]; }

// ---- partial statistics and how two merge ----------------------------------------------
// Both merges are symmetric (merge(a, b) == merge(b, a) bit for bit), so every lane of
// a butterfly reduction ends with the same result.

template <typename T> struct MaxSum { T m; T s; };        // a maximum, the sum of exp(x - m)
template <typename T> struct Moments { T n; T mean; T m2; };  // count, mean, sum of (x - mean)^2
template <typename T> struct Sums { T a; T b; };          // two plain sums

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
__device__ __forceinline__ Moments<T> merge(Moments<T> a, Moments<T> b) {
  Moments<T> r;
  r.n = a.n + b.n;
  const T inverse = r.n > T(0) ? T(1) / r.n : T(0);
  const T delta = b.mean - a.mean;
  r.mean = (a.n * a.mean + b.n * b.mean) * inverse;
  r.m2 = a.m2 + b.m2 + delta * delta * (a.n * b.n) * inverse;
  return r;
}

template <typename T>
__device__ __forceinline__ Sums<T> merge(Sums<T> a, Sums<T> b) {
  Sums<T> r;
  r.a = a.a + b.a;
  r.b = a.b + b.b;
  return r;
}

// What a thread with no values contributes.
template <typename T> __device__ __forceinline__ void make_empty(MaxSum<T>& v) { v.m = -infinity<T>(); v.s = T(0); }
template <typename T> __device__ __forceinline__ void make_empty(Moments<T>& v) { v.n = v.mean = v.m2 = T(0); }
template <typename T> __device__ __forceinline__ void make_empty(Sums<T>& v) { v.a = v.b = T(0); }

// A statistics structure, shuffled field by field (all fields are of type T).
template <typename T, typename S>
__device__ __forceinline__ S shuffle_xor(S v, int offset) {
  const int fields = sizeof(S) / sizeof(T);
  T* f = reinterpret_cast<T*>(&v);
#pragma unroll
  for (int i = 0; i < fields; ++i) f[i] = __shfl_xor_sync(0xffffffffu, f[i], offset);
  return v;
}

template <typename T, typename S>
__device__ __forceinline__ S warp_reduce(S v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = merge(v, shuffle_xor<T>(v, offset));
  return v;
}

// The block's statistics in every thread, with one barrier: `slots` holds two sets of
// 32; call i uses set i & 1 (a thread already in the next row writes the other set).
template <typename T, typename S>
__device__ __forceinline__ S block_reduce(S v, S* slots, long long call) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  S* set = slots + 32 * (int)(call & 1);
  v = warp_reduce<T>(v);
  if (lane == 0) set[warp] = v;
  __syncthreads();
  if (lane < (int)(blockDim.x >> 5)) v = set[lane]; else make_empty(v);
  return warp_reduce<T>(v);
}

// The statistics type of an operation.
template <typename T, int OP> struct RowStats { typedef MaxSum<T> type; };
template <typename T> struct RowStats<T, ROW_LAYER_NORM> { typedef Moments<T> type; };

// This thread's partial statistics of its VPT vectors; `valid(k, c)` says whether
// component c of vector k is in the row (values outside are -inf, or 0 for layer norm).
// For softmax the values become their exponentials e^(x - m_t).
template <typename T, int OP, int VPT, typename V, typename Valid>
__device__ __forceinline__ typename RowStats<T, OP>::type thread_stats(V (&v)[VPT], Valid valid) {
  const int W = Vec<T>::width;
  typename RowStats<T, OP>::type r;
  if (OP == ROW_LAYER_NORM) {
    T* p = reinterpret_cast<T*>(&r);   // n, mean, m2
    T n = T(0), sum = T(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) {
        n += valid(k, c) ? T(1) : T(0);
        sum += component<T>(v[k], c);
      }
    const T mean = n > T(0) ? sum / n : T(0);
    T m2 = T(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) {
        const T d = valid(k, c) ? component<T>(v[k], c) - mean : T(0);
        m2 = fma(d, d, m2);
      }
    p[0] = n; p[1] = mean; p[2] = m2;
  } else {
    T* p = reinterpret_cast<T*>(&r);   // m, s
    T m = -infinity<T>();
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) m = fmax(m, component<T>(v[k], c));
    const T base = m == -infinity<T>() ? T(0) : m;   // no -inf - -inf for a thread of -infs
    T s = T(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int c = 0; c < W; ++c) {   // exp(-inf) = 0 past the row's end
        const T e = exp(component<T>(v[k], c) - base);
        s += e;
        if (OP == ROW_SOFTMAX) component<T>(v[k], c) = e;
      }
    p[0] = m; p[1] = s;
  }
  return r;
}

// The outputs of one vector v of a row: softmax v scale (v holds e^(x - m_t)),
// log-softmax v - shift, layer norm (v - shift) scale g + b.
template <typename T, int OP, typename V>
__device__ __forceinline__ V row_output(V v, T scale, T shift, V g, V b) {
  V r;
#pragma unroll
  for (int c = 0; c < Vec<T>::width; ++c) {
    const T x = component<T>(v, c);
    component<T>(r, c) = OP == ROW_SOFTMAX ? x * scale
                       : OP == ROW_LOG_SOFTMAX ? x - shift
                       : fma((x - shift) * scale, component<T>(g, c), component<T>(b, c));
  }
  return r;
}

// (scale, shift) of row_output: softmax e^(m_t - M) / S and -; log-softmax - and
// M + log S; layer norm rstd and the mean.
template <typename T, int OP, typename S>
__device__ __forceinline__ void output_terms(const S& row, const S& mine, T eps, T& scale, T& shift) {
  const T* r = reinterpret_cast<const T*>(&row);
  const T* t = reinterpret_cast<const T*>(&mine);
  if (OP == ROW_LAYER_NORM) {
    shift = r[1];
    scale = T(1) / sqrt(r[2] / r[0] + eps);
  } else {
    scale = exp(t[0] - r[0]) / r[1];
    shift = r[0] + log(r[1]);
  }
}

// Cross-entropy's loss from the row's (M, S) and the target's logit; a target outside
// 0..cols-1 gives NaN rather than reading past the row.
template <typename T>
__device__ __forceinline__ T cross_entropy_loss(MaxSum<T> row, long long t, long long cols,
                                                const T* in) {
  return (t >= 0 && t < cols) ? row.m + log(row.s) - in[t] : infinity<T>() - infinity<T>();
}

// ---- rows streamed through shared memory by the copy engine ---------------------------
//
// rowwise_staged_kernel<T, OP, THREADS, VPT>: a persistent grid (`blocks per SM` x SMs);
// block b takes rows b, b + gridDim.x, ... Thread 0 keeps `stages` of them in flight:
// each stage is one row's buffer in dynamic shared memory, filled by one bulk copy
// (cp.async.bulk, Hopper's Tensor Memory Accelerator, no tensor map needed for a
// contiguous row) that completes on the stage's mbarrier with the row's byte count.
// The block waits on the stage's phase, copies the row into registers (thread t holds
// 16-byte vectors t, t + THREADS, ...: VPT of them), reduces it with one barrier,
// after which every thread has read the stage, so thread 0 refills it with the row
// `stages` ahead; then the block computes and writes its outputs from registers while
// the copies run.
//
// Why: a row in flight only while its block waits for it (rowwise_kernel) leaves the
// memory idle during the reductions and the writes, and registers limit an 8k-16k
// float row to one or two blocks per SM: 61-77% of the copy bandwidth on an H200
// (at 4k floats the register kernel reached 93% for softmax, layer norm 62%).
// Little's law: ~4.8 TB/s x ~0.7 us is ~3.4 MB in flight, ~26 KB per SM; the host
// sizes the ring to keep 2 or more rows ahead (16k floats: 3 stages of 64 KB, one
// 512-thread block an SM; 4k: 6 stages of 16 KB in each of 2 blocks of 256), far
// above that, whatever the block is doing. The 32k-float row (128 KB) fits one stage:
// its next row loads while this one is finished.

#define ROW_MAX_STAGES 8

#if defined(__WBSIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
// Without the copy engine (the CPU simulator; GPUs before Hopper, where the host never
// chooses this kernel) thread 0 copies the row itself and counts completed fills; a
// waiter sees the same phase parity an mbarrier would give. On the simulator these are
// its imitation of the copy engine, not the kernel's own shared-memory accesses: the
// profiler does not count them (as ncu counts no LSU access for a bulk copy or a wait).
#ifdef __WBSIM__
#define ROW_STAGE_FN static __attribute__((noinline)) WBSIM_UNCOUNTED
#else
#define ROW_STAGE_FN __device__ __forceinline__
#endif
typedef unsigned int stage_barrier;
ROW_STAGE_FN void stage_init(stage_barrier* bar) { *bar = 0; }
ROW_STAGE_FN void stage_fill(void* dst, const void* src, unsigned bytes, stage_barrier* bar) {
#ifdef __WBSIM__
  if (wbsim_bulk_read) wbsim_bulk_read(src, bytes);   // DRAM traffic, as the copy engine's
#endif
  memcpy(dst, src, bytes);
  __threadfence_block();
  *(volatile stage_barrier*)bar = *bar + 1;
}
ROW_STAGE_FN void stage_wait(stage_barrier* bar, unsigned parity) {
  while ((*(volatile stage_barrier*)bar & 1u) == parity) {
#if defined(__WBSIM__) || __CUDA_ARCH__ >= 700
    __nanosleep(32);
#endif
  }
  __threadfence_block();
}
#else
typedef unsigned long long stage_barrier;   // an mbarrier
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void stage_init(stage_barrier* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(shared_address(bar)));
}
// Arm the barrier with the byte count, then start the copy that completes it.
__device__ __forceinline__ void stage_fill(void* dst, const void* src, unsigned bytes,
                                           stage_barrier* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(shared_address(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1], %2, [%3];\n"
               :: "r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}
// Wait until the phase of parity `parity` has completed (a fresh barrier is in phase 0).
__device__ __forceinline__ void stage_wait(stage_barrier* bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n .reg .pred p;\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
  }
}
#endif

extern __shared__ __align__(16) unsigned char row_dynamic_shared[];

template <typename T, int OP, int THREADS, int VPT>
__global__ void __launch_bounds__(THREADS, THREADS <= 256 ? 2 : 1) rowwise_staged_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
    const long long* __restrict__ targets, T* __restrict__ y, long long rows, long long cols,
    int stages, T eps) {
  typedef typename Vec<T>::type V;
  typedef typename RowStats<T, OP>::type S;
  const int W = Vec<T>::width;
  __shared__ stage_barrier full[ROW_MAX_STAGES];
  __shared__ S slots[64];
  V* ring = reinterpret_cast<V*>(row_dynamic_shared);   // stages x vectors
  const int vectors = (int)(cols / W);                   // the host checks cols % W == 0
  const unsigned row_bytes = (unsigned)(cols * sizeof(T));
  const int lane = threadIdx.x;
  const long long first = blockIdx.x, stride = gridDim.x;
  const long long mine = first < rows ? (rows - 1 - first) / stride + 1 : 0;
  const T filler = OP == ROW_LAYER_NORM ? T(0) : -infinity<T>();   // past the row's end

  // layer norm: gamma and beta of this thread's columns stay in registers when few
  const bool keep = OP == ROW_LAYER_NORM && VPT <= 4;
  V g[keep ? VPT : 1], b[keep ? VPT : 1];
  if (keep)
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * THREADS;
      if (j < vectors) {
        g[keep ? k : 0] = reinterpret_cast<const V*>(gamma)[j];
        b[keep ? k : 0] = reinterpret_cast<const V*>(beta)[j];
      }
    }

  if (lane == 0)
    for (int s = 0; s < stages; ++s) stage_init(&full[s]);
  __syncthreads();
  if (lane == 0)
    for (int s = 0; s < stages && s < mine; ++s)
      stage_fill(ring + (size_t)s * vectors, x + (first + s * stride) * cols, row_bytes, &full[s]);

  int s = 0;
  unsigned phase = 0;
  for (long long i = 0; i < mine; ++i) {
    const long long row = first + i * stride;
    T target_logit = T(0);
    long long t = -1;
    if (OP == ROW_CROSS_ENTROPY && lane == 0) {   // early: its latency hides behind the row
      t = targets[row];
      if (t >= 0 && t < cols) target_logit = x[row * cols + t];
    }
    stage_wait(&full[s], phase);
    const V* staged = ring + (size_t)s * vectors;
    V v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * THREADS;
      if (j < vectors) {
        v[k] = staged[j];
      } else {
#pragma unroll
        for (int c = 0; c < W; ++c) component<T>(v[k], c) = filler;
      }
    }
    const S partial = thread_stats<T, OP, VPT>(
        v, [&](int k, int) { return lane + k * THREADS < vectors; });
    const S whole = block_reduce<T>(partial, slots, i);
    // every thread has read stage s: it takes the row `stages` ahead
    if (lane == 0 && i + stages < mine)
      stage_fill(ring + (size_t)s * vectors, x + (row + stages * stride) * cols, row_bytes, &full[s]);
    if (++s == stages) { s = 0; phase ^= 1; }

    if (OP == ROW_CROSS_ENTROPY) {
      if (lane == 0) {
        const MaxSum<T>& r = reinterpret_cast<const MaxSum<T>&>(whole);
        y[row] = (t >= 0 && t < cols) ? r.m + log(r.s) - target_logit : infinity<T>() - infinity<T>();
      }
      continue;
    }
    T scale, shift;
    output_terms<T, OP>(whole, partial, eps, scale, shift);
    V* out = reinterpret_cast<V*>(y + row * cols);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * THREADS;
      if (j < vectors) {
        V gk = v[k], bk = v[k];
        if (OP == ROW_LAYER_NORM) {
          gk = keep ? g[keep ? k : 0] : reinterpret_cast<const V*>(gamma)[j];
          bk = keep ? b[keep ? k : 0] : reinterpret_cast<const V*>(beta)[j];
        }
        out[j] = row_output<T, OP>(v[k], scale, shift, gk, bk);
      }
    }
  }
}

// ---- rows held in registers, read straight from memory ----------------------------------
//
// rowwise_kernel<T, OP, VPT>: a group of `group` threads (a warp, or the whole block)
// takes a row in a grid-stride loop; thread `lane` of the group holds the row's 16-byte
// vectors lane, lane + group, ... (VPT of them), all loads unrolled and in flight
// together, so the row is read once and written once. `vec` says rows are whole
// vectors on 16-byte boundaries; otherwise the same vectors are gathered element by
// element. (For double the launch bounds promise one block of 512 an SM: without it
// ptxas keeps the kernels, whose double math has out-of-line slow paths, at 64
// registers and spills.)
template <typename T, int OP, int VPT, int GROUP>
__global__ void __launch_bounds__(512, sizeof(T) == 8 ? 1 : 0) rowwise_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
    const long long* __restrict__ targets, T* __restrict__ y, long long rows, long long cols,
    int threads_per_row, int vec, T eps) {
  typedef typename Vec<T>::type V;
  typedef typename RowStats<T, OP>::type S;
  // GROUP, when not 0, is the threads per row as a constant (VPT = 16: a warp, or the
  // whole block of 512): the unrolled addresses are then immediate offsets from one base
  const int group = GROUP ? GROUP : threads_per_row;
  const int W = Vec<T>::width;
  __shared__ S slots[64];
  const int lane = threadIdx.x % group;
  const int rows_per_block = blockDim.x / group;
  const long long stride = (long long)gridDim.x * rows_per_block;
  const long long first = (long long)blockIdx.x * rows_per_block + threadIdx.x / group;
  const T filler = OP == ROW_LAYER_NORM ? T(0) : -infinity<T>();
  const int n = (int)cols;                 // the host keeps rows under 2^31 values
  const int vectors = (n + W - 1) / W;

  long long call = 0;
  for (long long row = first; row < rows; row += stride, ++call) {
    const T* in = x + row * cols;
    V v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * group;   // vector j: columns W j .. W j + W - 1
      if (vec) {
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
    const S partial = thread_stats<T, OP, VPT>(
        v, [&](int k, int c) { return W * (lane + k * group) + c < n; });
    const S whole = group > 32 ? block_reduce<T>(partial, slots, call) : warp_reduce<T>(partial);
    if (OP == ROW_CROSS_ENTROPY) {
      if (lane == 0)
        y[row] = cross_entropy_loss(reinterpret_cast<const MaxSum<T>&>(whole), targets[row], cols, in);
      continue;
    }
    T scale, shift;
    output_terms<T, OP>(whole, partial, eps, scale, shift);
    T* out = y + row * cols;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int j = lane + k * group;
      if (vec) {
        if (j < vectors) {
          V gk = v[k], bk = v[k];
          if (OP == ROW_LAYER_NORM) {
            gk = reinterpret_cast<const V*>(gamma)[j];
            bk = reinterpret_cast<const V*>(beta)[j];
          }
          reinterpret_cast<V*>(out)[j] = row_output<T, OP>(v[k], scale, shift, gk, bk);
        }
      } else {
        V gk = v[k], bk = v[k];
        if (OP == ROW_LAYER_NORM)
#pragma unroll
          for (int c = 0; c < W; ++c) {
            const int col = W * j + c;
            component<T>(gk, c) = col < n ? gamma[col] : T(0);
            component<T>(bk, c) = col < n ? beta[col] : T(0);
          }
        V r = row_output<T, OP>(v[k], scale, shift, gk, bk);
#pragma unroll
        for (int c = 0; c < W; ++c)
          if (W * j + c < n) out[W * j + c] = component<T>(r, c);
      }
    }
  }
}

// ---- cross-entropy: rows streamed by a warp ---------------------------------------------
//
// cross_entropy_stream_kernel<T, VPT>: cross-entropy needs only a row's (max, sum of
// exp), not its values afterwards, so a warp streams its row in chunks of 32 x VPT
// 16-byte vectors (all of a chunk's loads in flight together) into a running (m, s),
// and nothing is written but the loss: a read-only stream as a plain reduction is,
// with no barrier. Rows of whole vectors on 16-byte boundaries; a grid-stride loop
// over rows, a warp each.
template <typename T, int VPT>
__global__ void __launch_bounds__(256) cross_entropy_stream_kernel(
    const T* __restrict__ x, const long long* __restrict__ targets, T* __restrict__ losses,
    long long rows, long long cols) {
  typedef typename Vec<T>::type V;
  const int W = Vec<T>::width;
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  const int vectors = (int)(cols / W);   // the host checks cols % W == 0, cols < 2^31
  for (long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
       row < rows; row += warps) {
    const V* in = reinterpret_cast<const V*>(x + row * cols);
    MaxSum<T> running;
    make_empty(running);
    for (int base = 0; base < vectors; base += 32 * VPT) {
      V v[VPT];
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int j = base + lane + 32 * k;
        if (j < vectors) {
          v[k] = in[j];
        } else {
#pragma unroll
          for (int c = 0; c < W; ++c) component<T>(v[k], c) = -infinity<T>();
        }
      }
      running = merge(running, thread_stats<T, ROW_CROSS_ENTROPY, VPT>(
          v, [&](int k, int) { return base + lane + 32 * k < vectors; }));
    }
    running = warp_reduce<T>(running);
    if (lane == 0) losses[row] = cross_entropy_loss(running, targets[row], cols, x + row * cols);
  }
}

// ---- rows longer than the registers hold: a block a row --------------------------------

template <typename T>
__device__ __forceinline__ void add_value(MaxSum<T>& a, T x) {
  if (x > a.m) {
    a.s = a.s * exp(a.m - x) + T(1);
    a.m = x;
  } else {
    a.s += exp(x - a.m);
  }
}

// Online softmax: each thread keeps a running maximum m and the sum s of exp(x - m),
// rescaling s when m grows; one read for the statistics, one more for the result.
template <typename T, bool LOG>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, long long rows,
                               long long cols) {
  __shared__ MaxSum<T> slots[64];
  long long call = 0;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x, ++call) {
    const T* in = x + row * cols;
    T* out = y + row * cols;
    MaxSum<T> v;
    make_empty(v);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) add_value(v, in[j]);
    v = block_reduce<T>(v, slots, call);
    if (LOG) {
      const T shift = v.m + log(v.s);
      for (long long j = threadIdx.x; j < cols; j += blockDim.x) out[j] = in[j] - shift;
    } else {
      const T inverse = T(1) / v.s;
      for (long long j = threadIdx.x; j < cols; j += blockDim.x) out[j] = exp(in[j] - v.m) * inverse;
    }
  }
}

// Layer norm from the sums of d = x - x[0] and d^2 (the shift keeps the variance accurate).
template <typename T>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                  const T* __restrict__ beta, T* __restrict__ y, long long rows,
                                  long long cols, T eps) {
  __shared__ Sums<T> slots[64];
  long long call = 0;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x, ++call) {
    const T* in = x + row * cols;
    T* out = y + row * cols;
    const T shift = in[0];
    Sums<T> sums;
    make_empty(sums);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
      const T d = in[j] - shift;
      sums.a += d;
      sums.b = fma(d, d, sums.b);
    }
    sums = block_reduce<T>(sums, slots, call);
    const T mean_shifted = sums.a / T(cols);
    T variance = sums.b / T(cols) - mean_shifted * mean_shifted;
    variance = variance > T(0) ? variance : T(0);
    const T mean = shift + mean_shifted;
    const T rstd = T(1) / sqrt(variance + eps);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      out[j] = fma((in[j] - mean) * rstd, gamma[j], beta[j]);
  }
}

template <typename T>
__global__ void cross_entropy_kernel(const T* __restrict__ logits,
                                     const long long* __restrict__ targets,
                                     T* __restrict__ losses, long long rows, long long cols) {
  __shared__ MaxSum<T> slots[64];
  long long call = 0;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x, ++call) {
    const T* in = logits + row * cols;
    MaxSum<T> v;
    make_empty(v);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) add_value(v, in[j]);
    v = block_reduce<T>(v, slots, call);
    if (threadIdx.x == 0) losses[row] = cross_entropy_loss(v, targets[row], cols, in);
  }
}
