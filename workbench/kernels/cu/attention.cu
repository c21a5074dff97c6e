// Fused attention, O = softmax(scale * Q K^T [+ causal mask]) V, for one (batch, head)
// slice per blockIdx.y: Q (Sq x D), K and V (Sk x D), O (Sq x D), all row-major, half
// (T = __half) or bfloat16 (T = unsigned short holding its bits), D = 64 or 128.
// The causal mask lets query i see keys 0..i (top-left aligned, as PyTorch's is_causal).
//
// The FlashAttention-2 scheme: the Sq x Sk matrix of scores is never stored. A block
// of 8 warps takes 128 query rows (16 per warp) and walks K and V in tiles of 64 keys:
//
//   S  = Q K^T for its 16 rows x 64 keys          (tensor cores, mma.sync m16n8k16)
//   m' = max(m, rowmax(S)), P = exp(S - m')       (online softmax, in registers)
//   l  = l exp(m - m') + rowsum(P)
//   O  = O exp(m - m') + P V                      (P rounded to T: the A operand)
//
// and divides O by l at the end. Scores are in units of log2 (scale * log2(e) folded
// into one multiply) so that each exponential is one exp2. Q's fragments stay in
// registers for the whole walk; K and V tiles are double-buffered in shared memory
// (cp.async, zero-filled past Sk): the next tile is in flight while this one is used.
// Shared-memory rows are padded by 16 bytes so that ldmatrix, which reads 8 rows of 16
// bytes at once, hits 8 different bank groups. A thread's S fragment of two adjacent
// n8 blocks is exactly the A fragment of one k16 step of P V, so P never leaves the
// registers. With the causal mask a block stops at the tile holding its last row's
// diagonal, and the blocks are handed out last rows first (the heaviest ones early).
//
// On the CPU simulator (and GPUs before sm_80, which lack these mma shapes) the same
// launch runs a plain version: one query row per thread, the same online softmax in
// float, P not rounded.
#include <cuda_fp16.h>

#define AT_BR 128            // query rows per block
#define AT_BC 64             // keys per tile
#define AT_WARPS 8
#define AT_THREADS (32 * AT_WARPS)
#define AT_PAD 8             // elements of padding per shared-memory row

__device__ __forceinline__ float at_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float at_float(unsigned short bf16) { return __uint_as_float((unsigned)bf16 << 16); }
__device__ __forceinline__ unsigned short at_bf16_bits(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void at_store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void at_store(unsigned short* p, float v) { *p = at_bf16_bits(v); }

#if defined(__WBSIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)

template <typename T, int D>
__global__ void __launch_bounds__(AT_THREADS)
attention_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                 T* __restrict__ O, int Sq, int Sk, float scale_log2, int causal)
{
#ifdef __WBSIM__
    wbsim_stand_in();   // the profiler: an sm_80+ GPU runs the mma.sync kernel below instead
#endif
    const int row = blockIdx.x * AT_BR + threadIdx.x;
    if (threadIdx.x >= AT_BR || row >= Sq)
        return;
    const size_t head = blockIdx.y;
    const T* q = Q + (head * Sq + row) * D;
    const T* k = K + head * Sk * D;
    const T* v = V + head * Sk * D;
    float qf[D], o[D];
    for (int d = 0; d < D; ++d) {
        qf[d] = at_float(q[d]);
        o[d] = 0.0f;
    }
    float m = -__int_as_float(0x7f800000), l = 0.0f;
    const int keys = causal ? min(Sk, row + 1) : Sk;
    for (int j = 0; j < keys; ++j) {
        float s = 0.0f;
        for (int d = 0; d < D; ++d)
            s += qf[d] * at_float(k[(size_t)j * D + d]);
        s *= scale_log2;
        const float m_new = fmaxf(m, s);
        const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
        l = l * alpha + p;
        for (int d = 0; d < D; ++d)
            o[d] = o[d] * alpha + p * at_float(v[(size_t)j * D + d]);
        m = m_new;
    }
    T* out = O + (head * Sq + row) * D;
    for (int d = 0; d < D; ++d)
        at_store(out + d, o[d] / l);
}

#else

__device__ __forceinline__ unsigned at_smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void at_copy16(void* dst, const void* src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(at_smem(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void at_ldmatrix_x4(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at_smem(p)));
}

__device__ __forceinline__ void at_ldmatrix_x4_trans(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at_smem(p)));
}

__device__ __forceinline__ void at_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, __half)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void at_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, unsigned short)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to one register of T, lo in the low half.
__device__ __forceinline__ unsigned at_pack(float lo, float hi, __half)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned at_pack(float lo, float hi, unsigned short)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// rows x D of a (Sx x D) matrix, from row `first`, into shared memory with padded rows;
// rows at or past `limit` are zero-filled
template <typename T, int D, int ROWS>
__device__ __forceinline__ void at_load_tile(T* dst, const T* src, int first, int limit)
{
    constexpr int CHUNKS = D / 8;                    // 16-byte pieces per row
#pragma unroll
    for (int i = threadIdx.x; i < ROWS * CHUNKS; i += AT_THREADS) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
        const bool in = first + r < limit;
        at_copy16(dst + r * (D + AT_PAD) + c, in ? src + (size_t)(first + r) * D + c : src, in);
    }
}

// D = 64: two blocks per multiprocessor (at most 128 registers a thread); D = 128: one
template <typename T, int D>
__global__ void __launch_bounds__(AT_THREADS, D == 64 ? 2 : 1)
attention_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                 T* __restrict__ O, int Sq, int Sk, float scale_log2, int causal)
{
    constexpr int LD = D + AT_PAD;
    constexpr int DK = D / 16;          // k16 steps of Q K^T
    constexpr int NS = AT_BC / 8;       // n8 blocks of S
    constexpr int ND = D / 8;           // n8 blocks of O
    extern __shared__ __align__(16) unsigned char at_dynamic_shared[];
    T* sQ = reinterpret_cast<T*>(at_dynamic_shared);          // AT_BR x LD
    T* sK = sQ + AT_BR * LD;                                   // 2 x AT_BC x LD
    T* sV = sK + 2 * AT_BC * LD;                               // 2 x AT_BC x LD

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, q4 = lane % 4;
    // the heaviest causal blocks (the last rows) first
    const int qblock = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int q0 = qblock * AT_BR;
    const size_t head = blockIdx.y;
    const T* Qh = Q + head * Sq * D;
    const T* Kh = K + head * Sk * D;
    const T* Vh = V + head * Sk * D;

    int tiles = (Sk + AT_BC - 1) / AT_BC;
    if (causal)
        tiles = min(tiles, (min(q0 + AT_BR, Sq) + AT_BC - 1) / AT_BC);

    at_load_tile<T, D, AT_BR>(sQ, Qh, q0, Sq);
    at_load_tile<T, D, AT_BC>(sK, Kh, 0, Sk);
    at_load_tile<T, D, AT_BC>(sV, Vh, 0, Sk);
    asm volatile("cp.async.commit_group;\n" ::: "memory");

    unsigned qf[DK][4];
    float o[ND][4];
#pragma unroll
    for (int j = 0; j < ND; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            o[j][e] = 0.0f;
    float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};   // rows g, g + 8
    float l[2] = {0.0f, 0.0f};                 // this thread's part of the row sums
    const int row_g = q0 + 16 * warp + g;       // the query rows of this thread

    for (int t = 0; t < tiles; ++t) {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();                        // tile t is in; everyone is done with t - 1
        if (t == 0) {
#pragma unroll
            for (int kk = 0; kk < DK; ++kk)
                at_ldmatrix_x4(qf[kk], sQ + (16 * warp + lane % 16) * LD + 16 * kk + (lane / 16) * 8);
        }
        if (t + 1 < tiles) {                    // the next tile into the other buffer
            const int nb = (t + 1) & 1;
            at_load_tile<T, D, AT_BC>(sK + nb * AT_BC * LD, Kh, (t + 1) * AT_BC, Sk);
            at_load_tile<T, D, AT_BC>(sV + nb * AT_BC * LD, Vh, (t + 1) * AT_BC, Sk);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        const T* k = sK + (t & 1) * AT_BC * LD;
        const T* v = sV + (t & 1) * AT_BC * LD;

        // S = Q K^T: 16 rows x 64 keys per warp
        float s[NS][4];
#pragma unroll
        for (int j = 0; j < NS; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
#pragma unroll
            for (int j = 0; j < NS; j += 2) {   // keys 8j .. 8j + 15, d 16kk .. 16kk + 15
                unsigned b[4];
                at_ldmatrix_x4(b, k + (8 * j + lane % 8 + 8 * (lane / 16)) * LD + 16 * kk + 8 * ((lane / 8) % 2));
                at_mma(s[j], qf[kk], b[0], b[1], T());
                at_mma(s[j + 1], qf[kk], b[2], b[3], T());
            }
        }

        // mask (past Sk; with causal, keys after the row) and the online softmax
        const int key0 = t * AT_BC;
        const bool edge = key0 + AT_BC > Sk || (causal && key0 + AT_BC - 1 > q0 + 16 * warp);
        float tile_max[2] = {m[0], m[1]};
#pragma unroll
        for (int j = 0; j < NS; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float x = s[j][e] * scale_log2;
                if (edge) {
                    const int key = key0 + 8 * j + 2 * q4 + (e & 1);
                    const int row = row_g + 8 * (e >> 1);
                    if (key >= Sk || (causal && key > row))
                        x = -__int_as_float(0x7f800000);
                }
                s[j][e] = x;
                tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
            }
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
            // a row with no key seen yet keeps m = -inf: use 0 so that exp2 gives 0, not NaN
            const float base = tile_max[h] == -__int_as_float(0x7f800000) ? 0.0f : tile_max[h];
            alpha[h] = exp2f(m[h] - base);
            m[h] = tile_max[h];
            l[h] *= alpha[h];
            tile_max[h] = base;
        }
#pragma unroll
        for (int j = 0; j < ND; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                o[j][e] *= alpha[e >> 1];

        // P = exp2(S - m), rounded to T as the A fragments of P V (keys 16kk .. 16kk + 15)
        unsigned p[AT_BC / 16][4];
#pragma unroll
        for (int j = 0; j < NS; ++j) {
            float e0 = exp2f(s[j][0] - tile_max[0]), e1 = exp2f(s[j][1] - tile_max[0]);
            float e2 = exp2f(s[j][2] - tile_max[1]), e3 = exp2f(s[j][3] - tile_max[1]);
            l[0] += e0 + e1;
            l[1] += e2 + e3;
            p[j / 2][(j % 2) * 2 + 0] = at_pack(e0, e1, T());
            p[j / 2][(j % 2) * 2 + 1] = at_pack(e2, e3, T());
        }

        // O += P V: 16 rows x D per warp
#pragma unroll
        for (int kk = 0; kk < AT_BC / 16; ++kk) {
#pragma unroll
            for (int j = 0; j < ND; j += 2) {   // keys 16kk .. 16kk + 15, d 8j .. 8j + 15
                unsigned b[4];
                at_ldmatrix_x4_trans(b, v + (16 * kk + lane % 16) * LD + 8 * j + 8 * (lane / 16));
                at_mma(o[j], p[kk], b[0], b[1], T());
                at_mma(o[j + 1], p[kk], b[2], b[3], T());
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");

    // O / l, the row sums completed across the 4 threads of each row
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = row_g + 8 * h;
        if (row >= Sq)
            continue;
        const float inverse = 1.0f / l[h];
        T* out = O + (head * Sq + row) * D + 2 * q4;
#pragma unroll
        for (int j = 0; j < ND; ++j)
            *reinterpret_cast<unsigned*>(out + 8 * j) =
                at_pack(o[j][2 * h] * inverse, o[j][2 * h + 1] * inverse, T());
    }
}

#endif
