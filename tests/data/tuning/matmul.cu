// A tiled matrix product C = A B of WIDTH x WIDTH floats, written for the tests in the style of
// Kernel Tuner's examples: the tuned parameters are macros (block_size_x/y: the block,
// tile_size_x/y: outputs per thread along each axis), the grid comes from the problem size
// divided by block_size * tile_size. Each block computes a (block_size_y * tile_size_y) x
// (block_size_x * tile_size_x) tile of C, stepping through k in chunks of block_size_x staged
// in shared memory; WIDTH must be a multiple of both tile sides and of block_size_x.
#ifndef WIDTH
#define WIDTH 4096
#endif
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif

#define TILE_ROWS (block_size_y * tile_size_y)
#define TILE_COLS (block_size_x * tile_size_x)
#define STEP block_size_x

extern "C" __global__ void matmul_kernel(float* C, const float* A, const float* B) {
    __shared__ float a_tile[TILE_ROWS][STEP];
    __shared__ float b_tile[STEP][TILE_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int thread = ty * block_size_x + tx, threads = block_size_x * block_size_y;
    const int row0 = blockIdx.y * TILE_ROWS, col0 = blockIdx.x * TILE_COLS;
    float sum[tile_size_y][tile_size_x] = {};
    for (int k0 = 0; k0 < WIDTH; k0 += STEP) {
        for (int i = thread; i < TILE_ROWS * STEP; i += threads)
            a_tile[i / STEP][i % STEP] = A[(row0 + i / STEP) * WIDTH + k0 + i % STEP];
        for (int i = thread; i < STEP * TILE_COLS; i += threads)
            b_tile[i / TILE_COLS][i % TILE_COLS] = B[(k0 + i / TILE_COLS) * WIDTH + col0 + i % TILE_COLS];
        __syncthreads();
        for (int k = 0; k < STEP; ++k)
            for (int y = 0; y < tile_size_y; ++y)
                for (int x = 0; x < tile_size_x; ++x)
                    sum[y][x] += a_tile[ty + y * block_size_y][k] * b_tile[k][tx + x * block_size_x];
        __syncthreads();
    }
    for (int y = 0; y < tile_size_y; ++y)
        for (int x = 0; x < tile_size_x; ++x)
            C[(row0 + ty + y * block_size_y) * WIDTH + col0 + tx + x * block_size_x] = sum[y][x];
}
