// 2-D pooling, NCHW: each output y[n, c, p, q] is the maximum or the mean of
// the window x[n, c, p*sh - ph + (0..kh-1), q*sw - pw + (0..kw-1)].
// One thread per output element: blocks along y walk the (n, c) planes, along x
// the P*Q outputs of a plane (consecutive threads on consecutive q, so reads
// of a window row are coalesced across the warp; 32-bit index arithmetic).
// Max pooling skips the padding (as if it were -infinity); average pooling
// divides by kh*kw, padding included (count_include_pad), or by the number
// of image elements in the window when count_pad is 0.

template <typename T, int MAX>
__global__ void pool2d(const T* __restrict__ x, T* __restrict__ y, int NC, int H, int W,
                       int P, int Q, int kh, int kw, int sh, int sw, int ph, int pw, int count_pad)
{
    const int PQ = P * Q;
    for (int plane = blockIdx.y; plane < NC; plane += gridDim.y) {   // (n, c) planes
        const T* img = x + (size_t)plane * H * W;
        T* out = y + (size_t)plane * PQ;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < PQ; j += gridDim.x * blockDim.x) {
            const int p = j / Q, q = j - p * Q;
            const int h0 = p * sh - ph, w0 = q * sw - pw;
            const int hs = max(h0, 0), he = min(h0 + kh, H);
            const int ws = max(w0, 0), we = min(w0 + kw, W);
            T acc = MAX ? T(-__int_as_float(0x7f800000)) : T(0);   // -infinity
            for (int h = hs; h < he; ++h)
                for (int w = ws; w < we; ++w) {
                    const T v = img[(size_t)h * W + w];
                    if (MAX)
                        acc = (v > acc || v != v) ? v : acc;   // NaN wins, as in NumPy's max
                    else
                        acc += v;
                }
            if (!MAX) {
                const int count = count_pad ? kh * kw : (he - hs) * (we - ws);
                acc = count > 0 ? acc / T(count) : T(0);
            }
            out[j] = acc;
        }
    }
}
