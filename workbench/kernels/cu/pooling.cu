// 2-D pooling, NCHW: each output y[n, c, p, q] is the maximum or the mean of
// the window x[n, c, p*sh - ph + (0..kh-1), q*sw - pw + (0..kw-1)].
//
// Blocks of 32 x 8 threads on a 32 x 32 patch of a plane's outputs: thread (tx, ty)
// computes the outputs (p0 + ty + 8 r, q0 + tx) for r = 0..3 (threads of a warp on
// consecutive q, so a window row's reads are coalesced across the warp; no division
// to find p and q): grid.x and grid.y cover the Q x P outputs, grid.z walks the
// (n, c) planes. pool2d<T, MAX, KS> with KS = 2 or 3 knows a square window's size at
// compile time: when the four windows lie wholly inside the image, their 4 KS^2 loads
// are unrolled and all in flight at once (4 x 9 x 4 bytes a thread for 3 x 3 floats:
// with one output a thread, a block lived one memory latency and too few bytes were in
// flight, ~82% of the copy bandwidth). Windows that reach into the padding, and other
// sizes (KS = 0), take the bounded loops. The overlap of neighbouring windows is
// served by L1, so each input is read from memory about once. The launch bounds (4
// blocks of 256 an SM in float) give ptxas the 64 registers that the 36 loads need
// side by side; without them it keeps 32 and issues the loads in waves.
// Max pooling skips the padding (as if it were -infinity; a NaN wins, as in
// NumPy's max); average pooling divides by kh*kw, padding included
// (count_include_pad), or by the number of image elements in the window when
// count_pad is 0.

#define POOL_ROWS 4   // outputs a thread, 8 rows apart

template <typename T, int MAX>
__device__ __forceinline__ T pool_combine(T acc, T v) {
  if (MAX) return (v > acc || v != v) ? v : acc;
  return acc + v;
}

template <typename T, int MAX>
__device__ __forceinline__ T pool_finish(T acc, int count, int window, int count_pad) {
  if (MAX) return acc;
  count = count_pad ? window : count;
  return count > 0 ? acc / T(count) : T(0);
}

template <typename T, int MAX, int KS>
__global__ void __launch_bounds__(256, sizeof(T) == 8 ? 2 : 4)
pool2d(const T* __restrict__ x, T* __restrict__ y, int NC, int H, int W, int P, int Q,
       int kh, int kw, int sh, int sw, int ph, int pw, int count_pad)
{
    const int q = blockIdx.x * 32 + threadIdx.x;
    const int p0 = blockIdx.y * (8 * POOL_ROWS) + threadIdx.y;
    if (p0 >= P || q >= Q)
        return;
    if (KS) {
        kh = KS;
        kw = KS;
    }
    const int rows = min(POOL_ROWS, (P - p0 + 7) / 8);   // this thread's outputs in the image
    const int w0 = q * sw - pw;
    const int h_first = p0 * sh - ph, h_last = (p0 + 8 * (rows - 1)) * sh - ph;
    const bool inside = rows == POOL_ROWS && h_first >= 0 && w0 >= 0 && h_last + kh <= H
                        && w0 + kw <= W;
    const T empty = MAX ? T(-__int_as_float(0x7f800000)) : T(0);   // -infinity, or 0
    for (int plane = blockIdx.z; plane < NC; plane += gridDim.z) {
        const T* img = x + (size_t)plane * H * W;
        T* out = y + (size_t)plane * P * Q + q;
        if (KS && inside) {
            T v[POOL_ROWS][KS > 0 ? KS * KS : 1];
#pragma unroll
            for (int r = 0; r < POOL_ROWS; ++r) {
                const T* at = img + (size_t)((p0 + 8 * r) * sh - ph) * W + w0;
#pragma unroll
                for (int i = 0; i < KS; ++i)
#pragma unroll
                    for (int j = 0; j < KS; ++j)
                        v[r][i * KS + j] = at[(size_t)i * W + j];
            }
#pragma unroll
            for (int r = 0; r < POOL_ROWS; ++r) {
                T acc = empty;
#pragma unroll
                for (int i = 0; i < KS * KS; ++i)
                    acc = pool_combine<T, MAX>(acc, v[r][i]);
                out[(size_t)(p0 + 8 * r) * Q] = pool_finish<T, MAX>(acc, KS * KS, KS * KS, count_pad);
            }
        } else {
            for (int r = 0; r < rows; ++r) {
                const int h0 = (p0 + 8 * r) * sh - ph;
                const int hs = max(h0, 0), he = min(h0 + kh, H);
                const int ws = max(w0, 0), we = min(w0 + kw, W);
                T acc = empty;
                for (int h = hs; h < he; ++h)
                    for (int w = ws; w < we; ++w)
                        acc = pool_combine<T, MAX>(acc, img[(size_t)h * W + w]);
                out[(size_t)(p0 + 8 * r) * Q] =
                    pool_finish<T, MAX>(acc, (he - hs) * (we - ws), kh * kw, count_pad);
            }
        }
    }
}
