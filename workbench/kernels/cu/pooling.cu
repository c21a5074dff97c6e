// 2-D pooling, NCHW: each output y[n, c, p, q] is the maximum or the mean of
// the window x[n, c, p*sh - ph + (0..kh-1), q*sw - pw + (0..kw-1)].
//
// One thread per output, blocks of 32 x 8 threads on a 32 x 8 patch of a plane's
// outputs (threads of a warp on consecutive q, so a window row's reads are
// coalesced across the warp; no division to find p and q): grid.x and grid.y cover
// the Q x P outputs, grid.z walks the (n, c) planes. pool2d<T, MAX, KS> with KS = 2
// or 3 knows a square window's size at compile time: a window wholly inside the
// image is then KS x KS unrolled loads, all in flight at once; windows that reach
// into the padding, and other sizes (KS = 0), take the bounded loops.
// Max pooling skips the padding (as if it were -infinity; a NaN wins, as in
// NumPy's max); average pooling divides by kh*kw, padding included
// (count_include_pad), or by the number of image elements in the window when
// count_pad is 0.

template <typename T, int MAX>
__device__ __forceinline__ T pool_combine(T acc, T v) {
  if (MAX) return (v > acc || v != v) ? v : acc;
  return acc + v;
}

template <typename T, int MAX, int KS>
__global__ void __launch_bounds__(256)
pool2d(const T* __restrict__ x, T* __restrict__ y, int NC, int H, int W, int P, int Q,
       int kh, int kw, int sh, int sw, int ph, int pw, int count_pad)
{
    const int q = blockIdx.x * 32 + threadIdx.x;
    const int p = blockIdx.y * 8 + threadIdx.y;
    if (p >= P || q >= Q)
        return;
    if (KS) {
        kh = KS;
        kw = KS;
    }
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    const bool inside = h0 >= 0 && w0 >= 0 && h0 + kh <= H && w0 + kw <= W;
    for (int plane = blockIdx.z; plane < NC; plane += gridDim.z) {
        const T* img = x + (size_t)plane * H * W;
        T acc = MAX ? T(-__int_as_float(0x7f800000)) : T(0);   // -infinity
        int count;
        if (KS && inside) {
            const T* at = img + (size_t)h0 * W + w0;
            T v[KS > 0 ? KS * KS : 1];
#pragma unroll
            for (int r = 0; r < KS; ++r)
#pragma unroll
                for (int s = 0; s < KS; ++s)
                    v[r * KS + s] = at[(size_t)r * W + s];
#pragma unroll
            for (int i = 0; i < KS * KS; ++i)
                acc = pool_combine<T, MAX>(acc, v[i]);
            count = KS * KS;
        } else {
            const int hs = max(h0, 0), he = min(h0 + kh, H);
            const int ws = max(w0, 0), we = min(w0 + kw, W);
            for (int h = hs; h < he; ++h)
                for (int w = ws; w < we; ++w)
                    acc = pool_combine<T, MAX>(acc, img[(size_t)h * W + w]);
            count = (he - hs) * (we - ws);
        }
        if (!MAX) {
            count = count_pad ? kh * kw : count;
            acc = count > 0 ? acc / T(count) : T(0);
        }
        y[((size_t)plane * P + p) * Q + q] = acc;
    }
}
