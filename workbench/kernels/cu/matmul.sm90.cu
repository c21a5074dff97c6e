// Hopper GEMM: C[M,N] = A[M,K] @ B[K,N], half or bfloat16 in, float32 accumulation,
// row-major A, B and C. Built for sm_90a only (wgmma and setmaxnreg exist on Hopper
// alone); matmul.cu's hgemm runs everywhere else.
//
// How it works, from the outside in:
//
// * Tiles and schedule. C is cut into 128 x 256 tiles. The grid is persistent: one
//   block per multiprocessor walks the tiles blockIdx.x, blockIdx.x + gridDim.x, ...
//   in "grouped" order (16 tile rows at a time, column by column inside a group), so
//   that the blocks working at the same moment share rows of A and columns of B in L2.
//
// * Tensor Memory Accelerator (TMA). Tiles of A and B are copied from global to
//   shared memory by the copy engine, one instruction per box
//   (cp.async.bulk.tensor.2d), described by two tensor maps that the host encodes
//   with cuTensorMapEncodeTiled and copies to device memory (`maps`: A's, then B's;
//   the kernel reads them there after a tensormap acquire fence). The maps ask for
//   the 128-byte swizzle, the layout in which wgmma reads shared memory without bank
//   conflicts, and zero-fill everything outside the matrices, so that edges in M, N
//   and K need no code here. A 64-deep slice of K is one box of A (64 x 128 rows)
//   and four boxes of B (64 rows x 64 columns each: a box row is at most 128 bytes
//   under that swizzle).
//
// * A pipeline of STAGES slices in shared memory, each with two mbarriers: `full`
//   (the copy engine completes it when the slice's bytes have landed: the producer
//   arms it with arrive.expect_tx and the byte count) and `empty` (each consumer warp
//   arrives on it once the tensor cores are done reading the slice). Waits are on the
//   barrier's phase parity, which flips each time the ring wraps around.
//
// * Warp specialisation. 384 threads = 3 warpgroups of 128. Warpgroup 0 is the
//   producer: one thread issues all the copies, the rest idle; it gives back
//   registers (setmaxnreg.dec) so that the two consumer warpgroups can take more
//   (setmaxnreg.inc). Consumer warpgroup w computes rows 64w .. 64w + 63 of the tile:
//   per slice, four wgmma.mma_async m64n256k16 (K = 16 each) reading A and B straight
//   from shared memory through 64-bit matrix descriptors, accumulating 64 x 256
//   floats in registers (128 per thread). wgmma is asynchronous: a consumer keeps one
//   slice's group in flight and releases the slice before it.
//
// * Epilogue. Each consumer converts its accumulators (float, or rounded to the
//   input type) and stores them straight to C, guarded at the M and N edges, while
//   the producer already loads the next tile's slices.
//
// Requirements the host checks (else it runs matmul.cu's hgemm): a device of compute
// capability 9.0, K and N multiples of 8 (TMA wants 16-byte row strides), 16-byte
// aligned A and B, K > 0.
#include <cuda_fp16.h>

#define HP_BM 128
#define HP_BN 256
#define HP_BK 64
#define HP_STAGES 4
#define HP_CONSUMERS 2
#define HP_THREADS (128 * (HP_CONSUMERS + 1))
#define HP_GROUP_M 16
#define HP_A_BYTES (HP_BM * HP_BK * 2)                  // 16 KiB: one box of 64 x 128
#define HP_B_BOX_BYTES (HP_BK * 64 * 2)                 // 8 KiB: 64 rows x 64 columns
#define HP_B_BYTES (HP_BK * HP_BN * 2)                  // 32 KiB: four boxes
#define HP_STAGE_BYTES (HP_A_BYTES + HP_B_BYTES)
// dynamic shared memory the launch passes: the stages, and 1 KiB to align them to 1024
#define HP_SHARED_BYTES (HP_STAGES * HP_STAGE_BYTES + 1024)
// B's descriptor offsets (bytes): from one 64-column box to the next along N, and from
// one group of 8 K rows to the next (see smem_descriptor); defines, so that a check on
// a GPU can try another encoding without editing the file
#ifndef HP_B_LEADING
#define HP_B_LEADING 8192
#endif
#ifndef HP_B_STRIDE
#define HP_B_STRIDE 1024
#endif
#define HP_PRODUCER_REGISTERS 40
#define HP_CONSUMER_REGISTERS 232

typedef unsigned long long u64;

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// -- mbarriers -----------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(u64* bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u64* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}

// Wait until the phase of parity `parity` has completed. A fresh barrier is in phase 0,
// so waiting for parity 1 returns at once: the producer's first pass over the ring.
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity)
{
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    }
}

// -- TMA -------------------------------------------------------------------------------
// The tensor maps live in global memory, written by a host copy before the launch: the
// acquire fence makes them visible to the copy engine's proxy.
__device__ __forceinline__ void tensormap_acquire(const void* map)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" :: "l"(map) : "memory");
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(map) : "memory");
}

// Box (c0, c1) of the map (c0 the column, the innermost coordinate) into shared memory,
// completing on `bar` with its byte count.
__device__ __forceinline__ void tma_load(void* dst, const void* map, u64* bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}

// -- wgmma -----------------------------------------------------------------------------
// A shared-memory matrix descriptor: start address, leading and stride byte offsets
// (all in 16-byte units) and the layout, 1 = the 128-byte swizzle.
//   A (K-major: a row of 64 K values is one 128-byte line): the stride offset is
//     1024 bytes, from one group of 8 rows to the next; the leading offset is unused.
//   B (MN-major, read transposed: a line holds 64 N values of one K row): the
//     leading offset, 8192 bytes, steps from one 64-column box to the next along N;
//     the stride offset, 1024 bytes, from one group of 8 K rows to the next.
__device__ __forceinline__ u64 smem_descriptor(const void* p, unsigned leading, unsigned stride)
{
    return (u64)((smem_u32(p) & 0x3FFFF) >> 4) | ((u64)(leading >> 4) << 16)
         | ((u64)(stride >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

// The compiler must neither read the accumulators before wgmma_wait nor move their
// use across it: an empty asm that "changes" each register pins them in place.
__device__ __forceinline__ void fence_accumulators(float (&d)[128])
{
#pragma unroll
    for (int i = 0; i < 128; ++i)
        asm volatile("" : "+f"(d[i]) :: "memory");
}

#define HP_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                 "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define HP_D32(i) HP_D8(i), HP_D8(i + 8), HP_D8(i + 16), HP_D8(i + 24)
#define HP_D_REGS                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// D (64 x 256, float) = A (64 x 16) * B (16 x 256) + (accumulate ? D : 0); B transposed
// (MN-major, the last immediate). Accumulator element i of a thread in warp w of the
// warpgroup is row 16 w + lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2.
#define HP_WGMMA(TYPE)                                                                      \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                           \
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "          \
                 HP_D_REGS ", %128, %129, p, 1, 1, 0, 1;\n}\n"                               \
                 : HP_D32(0), HP_D32(32), HP_D32(64), HP_D32(96)                            \
                 : "l"(a), "l"(b), "r"(accumulate))

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 a, u64 b, int accumulate, __half)
{
    HP_WGMMA("f16");
}

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 a, u64 b, int accumulate,
                                                 unsigned short)
{
    HP_WGMMA("bf16");
}

// -- epilogue ----------------------------------------------------------------------------
__device__ __forceinline__ void store_pair(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }
__device__ __forceinline__ void store_pair(__half* p, float x, float y) { *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y); }
__device__ __forceinline__ void store_pair(unsigned short* p, float x, float y)
{
    unsigned packed;   // two bfloat16, rounded to nearest even; x in the low half
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(y), "f"(x));
    *reinterpret_cast<unsigned*>(p) = packed;
}

// Tile t of the grouped order: HP_GROUP_M tile rows at a time, down each column.
__device__ __forceinline__ void tile_position(int t, int tiles_m, int tiles_n, int& tm, int& tn)
{
    const int per_group = HP_GROUP_M * tiles_n;
    const int first = (t / per_group) * HP_GROUP_M;
    const int rows = min(tiles_m - first, HP_GROUP_M);
    const int in_group = t % per_group;
    tm = first + in_group % rows;
    tn = in_group / rows;
}

template <typename T, typename OUT>
__global__ void __launch_bounds__(HP_THREADS, 1)
hgemm_sm90(const u64* __restrict__ maps, OUT* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(8) u64 full[HP_STAGES], empty[HP_STAGES];
    extern __shared__ __align__(1024) unsigned char hp_dynamic_shared[];
    // the 128-byte swizzle repeats every 1024 bytes: stages start on such a boundary
    unsigned char* stages = hp_dynamic_shared + ((1024 - (smem_u32(hp_dynamic_shared) & 1023)) & 1023);

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = (M + HP_BM - 1) / HP_BM, tiles_n = (N + HP_BN - 1) / HP_BN;
    const int tiles = tiles_m * tiles_n;
    const int slices = (K + HP_BK - 1) / HP_BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < HP_STAGES; ++s) {
            mbar_init(&full[s], 1);                       // the producer's arrive (+ bytes)
            mbar_init(&empty[s], HP_CONSUMERS * 4);       // one arrive per consumer warp
        }
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer ----
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(HP_PRODUCER_REGISTERS));
        if (threadIdx.x == 0) {
            const void* map_a = maps;
            const void* map_b = maps + 16;
            tensormap_acquire(map_a);
            tensormap_acquire(map_b);
            int stage = 0;
            unsigned phase = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                tile_position(t, tiles_m, tiles_n, tm, tn);
                for (int s = 0; s < slices; ++s) {
                    mbar_wait(&empty[stage], phase ^ 1);   // the consumers are done with it
                    unsigned char* a = stages + stage * HP_STAGE_BYTES;
                    unsigned char* b = a + HP_A_BYTES;
                    mbar_arrive_expect_tx(&full[stage], HP_STAGE_BYTES);
                    tma_load(a, map_a, &full[stage], s * HP_BK, tm * HP_BM);
#pragma unroll
                    for (int j = 0; j < HP_BN / 64; ++j)
                        tma_load(b + j * HP_B_BOX_BYTES, map_b, &full[stage], tn * HP_BN + 64 * j, s * HP_BK);
                    if (++stage == HP_STAGES) { stage = 0; phase ^= 1; }
                }
            }
        }
    } else {
        // ---- consumers ----
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(HP_CONSUMER_REGISTERS));
        const int w = warpgroup - 1;                      // rows 64 w .. 64 w + 63 of the tile
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i)
            d[i] = 0.0f;
        int stage = 0;
        unsigned phase = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int tm, tn;
            tile_position(t, tiles_m, tiles_n, tm, tn);
            int previous = -1;
            for (int s = 0; s < slices; ++s) {
                mbar_wait(&full[stage], phase);
                const unsigned char* a = stages + stage * HP_STAGE_BYTES + w * (64 * HP_BK * 2);
                const unsigned char* b = stages + stage * HP_STAGE_BYTES + HP_A_BYTES;
                const u64 da = smem_descriptor(a, 16, 1024);
                const u64 db = smem_descriptor(b, HP_B_LEADING, HP_B_STRIDE);
                wgmma_fence();
#pragma unroll
                for (int k = 0; k < HP_BK / 16; ++k)     // 16 K values: 32 bytes of A, 16 rows of B
                    wgmma_m64n256k16(d, da + 2 * k, db + 128 * k, s > 0 || k > 0, T());
                wgmma_commit();
                wgmma_wait<1>();                          // the slice before this one is read
                if (previous >= 0 && lane == 0)
                    mbar_arrive(&empty[previous]);
                previous = stage;
                if (++stage == HP_STAGES) { stage = 0; phase ^= 1; }
            }
            wgmma_wait<0>();
            fence_accumulators(d);
            if (previous >= 0 && lane == 0)
                mbar_arrive(&empty[previous]);

            const int row0 = tm * HP_BM + 64 * w + 16 * warp + lane / 4;
            const int col0 = tn * HP_BN + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < HP_BN / 8; ++j) {
                const int col = col0 + 8 * j;            // even, and N is even: col + 1 < N too
                if (col >= N)
                    continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = row0 + 8 * h;
                    if (row < M)
                        store_pair(C + (size_t)row * N + col, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                }
            }
        }
    }
}
