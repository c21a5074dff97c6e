// Matrix transpose out[c, r] = in[r, c] of a (rows, cols) row-major array.
//
// A block of 32 x 8 threads moves one 64 x 64 tile through shared memory. It
// reads rows of the tile, each thread two neighbouring elements at once (a
// warp reads 64 consecutive elements), then writes columns of the tile as
// rows of the output, again two elements a thread. Both the global reads and
// the global writes are coalesced and twice as wide as one element a thread,
// which is what brings a tiled transpose close to a plain copy on an H100
// (measured: 64 x 64 tiles with pairs 96% of the copy bandwidth, 32 x 32
// tiles with single elements 93%, the same with a grid-stride loop over tile
// rows 83%). The tile has one extra column (65 per row), so the threads of a
// warp reading a tile column spread over the shared-memory banks.
//
// Tiles are numbered along a 1-D grid, tile columns fastest, so there is no
// 65535 limit and no loop. `I` is the index type: int when the array has
// fewer than 2^31 elements (cheaper address arithmetic), long long otherwise.
// Tiles cut by the array's edge take the element path, and so does every tile
// when `pairs` is 0: the caller sets it when both sides are even and both
// arrays start on a pair boundary (a pair must not straddle two rows or be
// misaligned).
#define TILE 64
#define BLOCK_ROWS 8

template <typename T> struct Pair;
template <> struct Pair<float> { typedef float2 type; };
template <> struct Pair<double> { typedef double2 type; };

template <typename T, typename I>
__global__ void __launch_bounds__(256)
transpose_kernel(const T* __restrict__ in, T* __restrict__ out, I rows, I cols, int pairs) {
  typedef typename Pair<T>::type T2;
  __shared__ T tile[TILE][TILE + 1];
  const I tile_cols = (cols + TILE - 1) / TILE;
  const I col0 = ((I)blockIdx.x % tile_cols) * TILE;
  const I row0 = ((I)blockIdx.x / tile_cols) * TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  if (pairs && row0 + TILE <= rows && col0 + TILE <= cols) {
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
      const T2 v = *reinterpret_cast<const T2*>(&in[(row0 + ty + k) * cols + col0 + 2 * tx]);
      tile[ty + k][2 * tx] = v.x;
      tile[ty + k][2 * tx + 1] = v.y;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
      const int j = ty + k;  // a column of the tile, a row of the output
      T2 v;
      v.x = tile[2 * tx][j];
      v.y = tile[2 * tx + 1][j];
      *reinterpret_cast<T2*>(&out[(col0 + j) * rows + row0 + 2 * tx]) = v;
    }
  } else {
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
      for (int h = 0; h < 2; ++h) {
        const I r = row0 + ty + k, c = col0 + 2 * tx + h;
        if (r < rows && c < cols) tile[ty + k][2 * tx + h] = in[r * cols + c];
      }
    __syncthreads();
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
      for (int h = 0; h < 2; ++h) {
        const I out_row = col0 + ty + k, out_col = row0 + 2 * tx + h;
        if (out_row < cols && out_col < rows) out[out_row * rows + out_col] = tile[2 * tx + h][ty + k];
      }
  }
}
