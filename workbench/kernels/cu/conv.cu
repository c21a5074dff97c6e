// 2-D convolution, NCHW, float32: y[n,k,p,q] = sum_{c,r,s} w[k,c,r,s] *
// x[n, c, p*stride - pad + r, q*stride - pad + s] (zero outside the image).
//
// conv2d_direct<FR, FS>: the convolution read straight from x, as an implicit matrix
// product Y[k, (n,p,q)] = W[k, (c,r,s)] @ X[(c,r,s), (n,p,q)] where the
// columns of X are gathered from the image while they are loaded (no im2col
// matrix in memory). The tiling is matmul.cu's sgemm: 128 output channels x
// 128 output pixels per block, 8-deep slices staged in shared memory (double
// buffered), 8x8 outputs per thread.
//
// im2col: the matrix X written out (cols[(c,r,s), (n,p,q)]) and
// nkpq_from_knpq: the product back in NCHW order, for conv2d_im2col (im2col,
// sgemm, reorder).

#define CV_BM 128
#define CV_BN 128
#define CV_BK 8
#define CV_THREADS 256
#define CV_APAD 4
#define CV_WLOADS (CV_BM * CV_BK / 4 / CV_THREADS)   // float4 of w per thread per slice
#define CV_XLOADS (CV_BK * CV_BN / CV_THREADS)       // elements of x per thread per slice
#define CV_XSTEP (CV_THREADS / CV_BN)                // rows between them

template <int FR, int FS>
__global__ void __launch_bounds__(CV_THREADS, 2)
conv2d_direct(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
              int N, int C, int H, int W, int K, int Rrun, int Srun, int P, int Q,
              int stride, int pad, int vec)
{
    // FR x FS filters are compiled for (the divisions that gather the image become
    // multiplications); FR = FS = 0 takes the filter size from Rrun, Srun
    const int R = FR > 0 ? FR : Rrun, S = FS > 0 ? FS : Srun;
    __shared__ __align__(16) float Ws[2][CV_BK][CV_BM + CV_APAD];
    __shared__ __align__(16) float Xs[2][CV_BK][CV_BN];

    const int t = threadIdx.x;
    const int k0 = blockIdx.y * CV_BM;                 // output channels
    const int j0 = blockIdx.x * CV_BN;   // output pixels (n, p, q) flattened (N P Q < 2^31)
    const int CRS = C * R * S, RS = R * S, PQ = P * Q;
    const int NPQ = N * PQ;

    const int warp = t / 32, lane = t % 32;
    const int rowBase = (warp / 4) * 64 + (lane / 4) * 4;
    const int colBase = (warp % 4) * 32 + (lane % 4) * 4;

    // weights: two float4 (along c,r,s) per thread per slice
    int wRow[CV_WLOADS], wCol[CV_WLOADS];
#pragma unroll
    for (int i = 0; i < CV_WLOADS; ++i) {
        const int idx = t + i * CV_THREADS;
        wRow[i] = idx / (CV_BK / 4);  wCol[i] = (idx % (CV_BK / 4)) * 4;
    }
    // image: one pixel column per thread, eight rows of the slice (t / 128 + 2 i)
    const int xCol = t % CV_BN, xRow = t / CV_BN;
    const int jx = j0 + xCol;
    const bool colInside = jx < NPQ;
    const int nImg = colInside ? jx / PQ : 0;
    const int pq = colInside ? jx % PQ : 0;
    const int ih0 = (pq / Q) * stride - pad, iw0 = (pq % Q) * stride - pad;
    const float* xImg = x + (size_t)nImg * C * H * W;

    float4 wReg[CV_WLOADS];
    float xReg[CV_XLOADS];
    auto loadSlice = [&](int c0) {
#pragma unroll
        for (int i = 0; i < CV_WLOADS; ++i) {
            const int gk = k0 + wRow[i], gc = c0 + wCol[i];
            if (vec && gk < K && gc < CRS) {
                wReg[i] = *reinterpret_cast<const float4*>(w + (size_t)gk * CRS + gc);
            } else {
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    v[j] = (gk < K && gc + j < CRS) ? w[(size_t)gk * CRS + gc + j] : 0.0f;
                wReg[i] = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
#pragma unroll
        for (int i = 0; i < CV_XLOADS; ++i) {
            const int crs = c0 + xRow + CV_XSTEP * i;
            float v = 0.0f;
            if (colInside && crs < CRS) {
                const int c = crs / RS, rs = crs - c * RS;   // by constants when FR, FS > 0
                const int ih = ih0 + rs / S, iw = iw0 + rs % S;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    v = xImg[((size_t)c * H + ih) * W + iw];
            }
            xReg[i] = v;
        }
    };
    auto storeSlice = [&](int buf) {
#pragma unroll
        for (int i = 0; i < CV_WLOADS; ++i) {
            Ws[buf][wCol[i] + 0][wRow[i]] = wReg[i].x;
            Ws[buf][wCol[i] + 1][wRow[i]] = wReg[i].y;
            Ws[buf][wCol[i] + 2][wRow[i]] = wReg[i].z;
            Ws[buf][wCol[i] + 3][wRow[i]] = wReg[i].w;
        }
#pragma unroll
        for (int i = 0; i < CV_XLOADS; ++i)
            Xs[buf][xRow + CV_XSTEP * i][xCol] = xReg[i];
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
            acc[i][j] = 0.0f;

    const int slices = (CRS + CV_BK - 1) / CV_BK;
    if (slices > 0) {
        loadSlice(0);
        storeSlice(0);
    }
    __syncthreads();

    int buf = 0;
    for (int s = 0; s < slices; ++s) {
        const bool more = s + 1 < slices;
        if (more)
            loadSlice((s + 1) * CV_BK);
#pragma unroll
        for (int kk = 0; kk < CV_BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&Ws[buf][kk][rowBase]);
            const float4 a1 = *reinterpret_cast<const float4*>(&Ws[buf][kk][rowBase + 32]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Xs[buf][kk][colBase]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Xs[buf][kk][colBase + 16]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more)
            storeSlice(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = j0 + colBase + h * 16 + j;
            if (col >= NPQ)
                continue;
            const int n = col / PQ, pix = col % PQ;
            float* out = y + (size_t)n * K * PQ + pix;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int gk = k0 + rowBase + (i / 4) * 32 + (i % 4);
                if (gk < K)
                    out[(size_t)gk * PQ] = acc[i][h * 4 + j];
            }
        }
    }
}

// cols[(c, r, s), (n, p, q)]: blocks along y walk the rows (c, r, s), along x
// the N*P*Q columns (consecutive threads on consecutive output pixels).
extern "C" __global__ void
im2col(const float* __restrict__ x, float* __restrict__ cols,
       int N, int C, int H, int W, int R, int S, int P, int Q, int stride, int pad)
{
    const int PQ = P * Q, NPQ = N * PQ, CRS = C * R * S;
    for (int row = blockIdx.y; row < CRS; row += gridDim.y) {
        const int c = row / (R * S), rs = row - c * (R * S);
        const int r = rs / S, s = rs - r * S;
        float* out = cols + (size_t)row * NPQ;
        for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < NPQ; col += gridDim.x * blockDim.x) {
            const int n = col / PQ, pix = col - n * PQ;
            const int ih = (pix / Q) * stride - pad + r, iw = (pix % Q) * stride - pad + s;
            out[col] = (ih >= 0 && ih < H && iw >= 0 && iw < W)
                       ? x[(((size_t)n * C + c) * H + ih) * W + iw] : 0.0f;
        }
    }
}

// y[n, k, (p, q)] = out[k, (n, p, q)]: the product back in NCHW order; blocks along y
// walk the (n, k) planes, along x the P*Q pixels.
extern "C" __global__ void
nkpq_from_knpq(const float* __restrict__ out, float* __restrict__ y, int N, int K, int PQ)
{
    for (int plane = blockIdx.y; plane < N * K; plane += gridDim.y) {
        const int n = plane / K, k = plane - n * K;
        const float* src = out + ((size_t)k * N + n) * PQ;
        float* dst = y + (size_t)plane * PQ;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < PQ; i += gridDim.x * blockDim.x)
            dst[i] = src[i];
    }
}
