// Matrix transpose out[c, r] = in[r, c] of a (rows, cols) row-major array.
//
// A block of 32 x 8 threads moves one 32 x 32 tile through shared memory:
// it reads rows of the tile (consecutive threads, consecutive addresses),
// then writes columns of the tile as rows of the output, so both the global
// reads and the global writes are coalesced. The tile has one extra column
// (33 per row), so the 32 threads of a warp reading a tile column hit 32
// different shared-memory banks. Each thread moves 4 elements; tiles beyond
// the grid's y extent (65535 blocks) are visited in a loop.
#define TILE 32
#define BLOCK_ROWS 8

template <typename T>
__global__ void transpose_kernel(const T* __restrict__ in, T* __restrict__ out,
                                 long long rows, long long cols) {
  __shared__ T tile[TILE][TILE + 1];
  const long long col0 = (long long)blockIdx.x * TILE;
  for (long long row0 = (long long)blockIdx.y * TILE; row0 < rows; row0 += (long long)gridDim.y * TILE) {
    const long long c = col0 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
      const long long r = row0 + threadIdx.y + k;
      if (r < rows && c < cols) tile[threadIdx.y + k][threadIdx.x] = in[r * cols + c];
    }
    __syncthreads();
    const long long out_col = row0 + threadIdx.x;   // a row of the input
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
      const long long out_row = col0 + threadIdx.y + k;  // a column of the input
      if (out_row < cols && out_col < rows) out[out_row * rows + out_col] = tile[threadIdx.x][threadIdx.y + k];
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}
