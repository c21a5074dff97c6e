// Matrix multiplication: C[M,N] = A[M,K] @ B[K,N], row-major, any M, N, K.
//
// sgemm_f32: float32 on the CUDA cores. A 128x128 block tile is built from
// 16-deep slices of A and B staged in shared memory (A transposed so that a
// thread reads four consecutive rows with one float4); each of the 256
// threads accumulates an 8x8 register tile (two 4x4 quads in each
// direction, spread across its warp's 64x32 tile so that the float4 reads of
// a warp hit few distinct addresses). While one slice is multiplied, the next
// one is loaded into registers (double buffering: one barrier per slice).
// `vec` says that K and N are multiples of 4 and the arrays are 16-byte
// aligned: then loads and stores that lie inside the matrices are float4;
// everything at an edge goes element by element with zero fill.
//
// hgemm<T, OUT>: half (T = __half) or bfloat16 (T = unsigned short holding its
// bits) inputs, float32 accumulation, output OUT (float, or the input type
// rounded to nearest even), on the tensor cores
// (mma.sync m16n8k16). 128x256 block tiles, 32-deep slices of half in padded
// shared memory (conflict-free ldmatrix), four slices in flight (cp.async,
// dynamic shared memory), 8 warps of 64x64. Edges are zero-filled on load and guarded on
// store; `vec` (K and N multiples of 8, 16-byte aligned arrays) selects the
// 16-byte copies. The CPU simulator has no tensor cores: there (__WBSIM__) the
// same kernel is a plain loop that converts each half to float and
// accumulates in float, which is the same arithmetic in another order. On a
// Hopper GPU (compute capability 9.0) matmul.sm90.cu's wgmma kernel runs instead.
#include <cuda_fp16.h>

#define SG_BM 128
#define SG_BN 128
#define SG_BK 16
#define SG_THREADS 256
#define SG_APAD 4

extern "C" __global__ void __launch_bounds__(SG_THREADS, 2)
sgemm_f32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
          int M, int N, int K, int vec)
{
    __shared__ __align__(16) float As[2][SG_BK][SG_BM + SG_APAD];
    __shared__ __align__(16) float Bs[2][SG_BK][SG_BN];

    const int t = threadIdx.x;
    const int m0 = blockIdx.y * SG_BM;
    const int n0 = blockIdx.x * SG_BN;

    // this thread's place in the block tile: warp (2 x 4 warps of 64x32), lane (8 x 4)
    const int warp = t / 32, lane = t % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    const int lr = lane / 4, lc = lane % 4;
    const int rowBase = wm + lr * 4;      // rows rowBase + {0..3} and rowBase + 32 + {0..3}
    const int colBase = wn + lc * 4;      // cols colBase + {0..3} and colBase + 16 + {0..3}

    // what this thread loads of each slice: two float4 of A, two of B
    int aRow[2], aK[2], bK[2], bCol[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int idx = t + i * SG_THREADS;
        aRow[i] = idx / 4;  aK[i] = (idx % 4) * 4;
        bK[i] = idx / 32;   bCol[i] = (idx % 32) * 4;
    }

    float4 aReg[2], bReg[2];
    auto loadSlice = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int gm = m0 + aRow[i], gk = k0 + aK[i];
            if (vec && gm < M && gk < K) {
                aReg[i] = *reinterpret_cast<const float4*>(A + (size_t)gm * K + gk);
            } else {
                float v[4];
                for (int j = 0; j < 4; ++j)
                    v[j] = (gm < M && gk + j < K) ? A[(size_t)gm * K + gk + j] : 0.0f;
                aReg[i] = make_float4(v[0], v[1], v[2], v[3]);
            }
            const int bk = k0 + bK[i], gn = n0 + bCol[i];
            if (vec && bk < K && gn < N) {
                bReg[i] = *reinterpret_cast<const float4*>(B + (size_t)bk * N + gn);
            } else {
                float v[4];
                for (int j = 0; j < 4; ++j)
                    v[j] = (bk < K && gn + j < N) ? B[(size_t)bk * N + gn + j] : 0.0f;
                bReg[i] = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
    };
    auto storeSlice = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            As[buf][aK[i] + 0][aRow[i]] = aReg[i].x;
            As[buf][aK[i] + 1][aRow[i]] = aReg[i].y;
            As[buf][aK[i] + 2][aRow[i]] = aReg[i].z;
            As[buf][aK[i] + 3][aRow[i]] = aReg[i].w;
            *reinterpret_cast<float4*>(&Bs[buf][bK[i]][bCol[i]]) = bReg[i];
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
            acc[i][j] = 0.0f;

    const int slices = (K + SG_BK - 1) / SG_BK;
    if (slices > 0) {
        loadSlice(0);
        storeSlice(0);
    }
    __syncthreads();

    int buf = 0;
    for (int s = 0; s < slices; ++s) {
        const bool more = s + 1 < slices;
        if (more)
            loadSlice((s + 1) * SG_BK);
#pragma unroll
        for (int k = 0; k < SG_BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][rowBase]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][rowBase + 32]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][colBase]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][colBase + 16]);
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
    for (int i = 0; i < 8; ++i) {
        const int gm = m0 + rowBase + (i / 4) * 32 + (i % 4);
        if (gm >= M)
            continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gn = n0 + colBase + h * 16;
            float* out = C + (size_t)gm * N + gn;
            if (vec && gn + 3 < N) {
                *reinterpret_cast<float4*>(out) =
                    make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (gn + j < N)
                        out[j] = acc[i][h * 4 + j];
            }
        }
    }
}

#define HG_BM 128
#define HG_BN 256
#define HG_BK 32
#define HG_WM 64        // warp tile: 2 x 4 warps of 64 x 64
#define HG_WN 64
#define HG_THREADS 256
#define HG_APAD 8
#define HG_BPAD 8
#define HG_ALOADS (HG_BM * HG_BK / 8 / HG_THREADS)   // 16-byte pieces per thread per slice
#define HG_BLOADS (HG_BK * HG_BN / 8 / HG_THREADS)
#define HG_STAGES 4     // slices in flight; the launch passes their dynamic shared memory

// The two input types: __half, and bfloat16 as its bits in an unsigned short (the
// same kernels serve both; NVRTC's bfloat16 header is not needed, and the simulator,
// which has no bfloat16 type, converts the bits itself).
__device__ __forceinline__ float hg_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float hg_float(unsigned short bf16) { return __uint_as_float((unsigned)bf16 << 16); }
__device__ __forceinline__ __half hg_zero(__half) { return __float2half(0.0f); }
__device__ __forceinline__ unsigned short hg_zero(unsigned short) { return 0; }

// float -> the output type: float as is, half and bfloat16 rounded to nearest even
__device__ __forceinline__ unsigned short hg_bf16_bits(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((u >> 16) | 0x40u);     // a NaN stays a (quiet) NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void hg_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void hg_store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void hg_store(unsigned short* p, float v) { *p = hg_bf16_bits(v); }

#ifdef __WBSIM__

// The simulator's hgemm: no tensor cores on the CPU, so each thread computes
// 64 outputs of the block's tile with the inputs converted to float and a
// float accumulator (the launch configuration is the GPU kernel's).
template <typename T, typename OUT>
__global__ void __launch_bounds__(HG_THREADS)
hgemm(const T* __restrict__ A, const T* __restrict__ B, OUT* __restrict__ C,
      int M, int N, int K, int vec)
{
    wbsim_stand_in();   // the profiler: this is not the GPU's tensor-core kernel
    const int m0 = blockIdx.y * HG_BM, n0 = blockIdx.x * HG_BN;
    for (int idx = threadIdx.x; idx < HG_BM * HG_BN; idx += HG_THREADS) {
        const int gm = m0 + idx / HG_BN, gn = n0 + idx % HG_BN;
        if (gm >= M || gn >= N)
            continue;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += hg_float(A[(size_t)gm * K + k]) * hg_float(B[(size_t)k * N + gn]);
        hg_store(C + (size_t)gm * N + gn, acc);
    }
}

#else

// Tensor cores through PTX: mma.sync m16n8k16 (half in, float32 accumulate),
// fragments read from shared memory with ldmatrix, slices copied from global
// memory with cp.async (16 bytes at a time, zero-filled past the edges).
__device__ __forceinline__ unsigned shared_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(shared_address(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void mma_16816(float* c, const unsigned* a, const unsigned* b, __half)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_16816(float* c, const unsigned* a, const unsigned* b, unsigned short)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void hg_store_pair(float* p, float x, float y)
{
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
}
__device__ __forceinline__ void hg_store_pair(__half* p, float x, float y)
{
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
}
__device__ __forceinline__ void hg_store_pair(unsigned short* p, float x, float y)
{
    *reinterpret_cast<unsigned*>(p) = hg_bf16_bits(x) | ((unsigned)hg_bf16_bits(y) << 16);
}

template <typename T, typename OUT>
__global__ void __launch_bounds__(HG_THREADS, 1)
hgemm(const T* __restrict__ A, const T* __restrict__ B, OUT* __restrict__ C,
      int M, int N, int K, int vec)
{
    constexpr int A_LD = HG_BK + HG_APAD, B_LD = HG_BN + HG_BPAD;   // rows of 80 and 528 bytes
    constexpr int A_ELEMS = HG_BM * A_LD, B_ELEMS = HG_BK * B_LD;
    constexpr int MI = HG_WM / 16, NJ = HG_WN / 8;                  // m16 x n8 blocks per warp
    // HG_STAGES * (A_ELEMS + B_ELEMS) elements (108544 bytes), from the launch
    extern __shared__ __align__(128) unsigned char hg_dynamic_shared[];
    T* smem = reinterpret_cast<T*>(hg_dynamic_shared);

    const int t = threadIdx.x;
    const int warp = t / 32, lane = t % 32;
    const int m0 = blockIdx.y * HG_BM, n0 = blockIdx.x * HG_BN;
    const int wm = (warp / (HG_BN / HG_WN)) * HG_WM, wn = (warp % (HG_BN / HG_WN)) * HG_WN;

    // 8-element (16-byte) pieces of the slice: piece idx of A is row idx / 4, columns
    // (idx % 4) * 8 ...; piece idx of B is row idx / 32, columns (idx % 32) * 8 ...
    auto loadSlice = [&](int k0, int buf) {
        T* As = smem + buf * (A_ELEMS + B_ELEMS);
        T* Bs = As + A_ELEMS;
#pragma unroll
        for (int i = 0; i < HG_ALOADS; ++i) {
            const int idx = t + i * HG_THREADS;
            const int row = idx / (HG_BK / 8), col = (idx % (HG_BK / 8)) * 8;
            const int gm = m0 + row, gk = k0 + col;
            T* d = As + row * A_LD + col;
            if (vec) {   // K and N multiples of 8: a piece lies wholly inside or wholly outside
                const bool in = gm < M && gk < K;
                copy16_async(d, in ? A + (size_t)gm * K + gk : A, in);
            } else {
                for (int j = 0; j < 8; ++j)
                    d[j] = (gm < M && gk + j < K) ? A[(size_t)gm * K + gk + j] : hg_zero(T());
            }
        }
#pragma unroll
        for (int i = 0; i < HG_BLOADS; ++i) {
            const int idx = t + i * HG_THREADS;
            const int row = idx / (HG_BN / 8), col = (idx % (HG_BN / 8)) * 8;
            const int gk = k0 + row, gn = n0 + col;
            T* d = Bs + row * B_LD + col;
            if (vec) {
                const bool in = gk < K && gn < N;
                copy16_async(d, in ? B + (size_t)gk * N + gn : B, in);
            } else {
                for (int j = 0; j < 8; ++j)
                    d[j] = (gk < K && gn + j < N) ? B[(size_t)gk * N + gn + j] : hg_zero(T());
            }
        }
    };

    float acc[MI][NJ][4];   // [m16 block][n8 block][fragment element]
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    // a pipeline of HG_STAGES slices: slice s is in stage s % HG_STAGES; one commit group per
    // slice (empty past the end) so that "all but the newest HG_STAGES - 2 groups" is slice s
    const int slices = (K + HG_BK - 1) / HG_BK;
#pragma unroll
    for (int st = 0; st < HG_STAGES - 1; ++st) {
        if (st < slices)
            loadSlice(st * HG_BK, st);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }

    for (int s = 0; s < slices; ++s) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(HG_STAGES - 2) : "memory");
        __syncthreads();   // slice s is visible, and every warp is done with slice s - 1
        const int next = s + HG_STAGES - 1;
        if (next < slices)
            loadSlice(next * HG_BK, next % HG_STAGES);   // into the stage of slice s - 1
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        const T* As = smem + (s % HG_STAGES) * (A_ELEMS + B_ELEMS);
        const T* Bs = As + A_ELEMS;
#pragma unroll
        for (int kk = 0; kk < HG_BK; kk += 16) {
            unsigned a[MI][4], b[NJ][2];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const T* p = As + (wm + i * 16 + lane % 16) * A_LD + kk + (lane / 16) * 8;
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3])
                             : "r"(shared_address(p)) : "memory");
            }
#pragma unroll
            for (int j = 0; j < NJ / 2; ++j) {
                const T* p = Bs + (kk + lane % 16) * B_LD + wn + j * 16 + (lane / 16) * 8;
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(b[2 * j][0]), "=r"(b[2 * j][1]),
                               "=r"(b[2 * j + 1][0]), "=r"(b[2 * j + 1][1])
                             : "r"(shared_address(p)) : "memory");
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NJ; ++j)
                    mma_16816(acc[i][j], a[i], b[j], T());
        }
    }

    // fragment element e of block (i, j): row g (+8 for e >= 2), columns 2q and 2q + 1
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gm = m0 + wm + i * 16 + g + h * 8;
            if (gm >= M)
                continue;
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                const int gn = n0 + wn + j * 8 + 2 * q;
                OUT* out = C + (size_t)gm * N + gn;
                if (vec && gn < N) {
                    hg_store_pair(out, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    if (gn < N)
                        hg_store(out, acc[i][j][2 * h]);
                    if (gn + 1 < N)
                        hg_store(out + 1, acc[i][j][2 * h + 1]);
                }
            }
        }
    }
}

#endif
