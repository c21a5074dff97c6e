// A 2-D convolution with its filter in constant memory, written for the tests in the style of
// Kernel Tuner's examples (which feed d_filter through cmem_args): output is image_height x
// image_width, input is (image_height + filter_height - 1) x (image_width + filter_width - 1).
// Tuned macros: block_size_x/y, tile_size_x/y (outputs per thread along each axis), use_padding
// (a shared-memory row padded by one word), read_only (loads through the read-only cache).
#ifndef image_height
#define image_height 4096
#endif
#ifndef image_width
#define image_width 4096
#endif
#ifndef filter_height
#define filter_height 17
#endif
#ifndef filter_width
#define filter_width 17
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
#ifndef use_padding
#define use_padding 0
#endif
#ifndef read_only
#define read_only 0
#endif

#define INPUT_WIDTH (image_width + filter_width - 1)
#define SHARED_ROWS (block_size_y * tile_size_y + filter_height - 1)
#define SHARED_COLS (block_size_x * tile_size_x + filter_width - 1)
#if read_only
#define LOAD(p) __ldg(p)
#else
#define LOAD(p) (*(p))
#endif

__constant__ float d_filter[filter_height * filter_width];

extern "C" __global__ void convolution_kernel(float* output, const float* __restrict__ input,
                                              const float* filter) {
    __shared__ float window[SHARED_ROWS][SHARED_COLS + use_padding];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * block_size_x * tile_size_x, y0 = blockIdx.y * block_size_y * tile_size_y;
    for (int r = ty; r < SHARED_ROWS; r += block_size_y)
        for (int c = tx; c < SHARED_COLS; c += block_size_x) {
            const int y = y0 + r, x = x0 + c;
            window[r][c] = (y < image_height + filter_height - 1 && x < INPUT_WIDTH)
                           ? LOAD(input + y * INPUT_WIDTH + x) : 0.0f;
        }
    __syncthreads();
    for (int ty2 = 0; ty2 < tile_size_y; ++ty2)
        for (int tx2 = 0; tx2 < tile_size_x; ++tx2) {
            const int r = ty + ty2 * block_size_y, c = tx + tx2 * block_size_x;
            const int y = y0 + r, x = x0 + c;
            if (y >= image_height || x >= image_width) continue;
            float sum = 0.0f;
            for (int i = 0; i < filter_height; ++i)
                for (int j = 0; j < filter_width; ++j)
                    sum += window[r + i][c + j] * d_filter[i * filter_width + j];
            output[y * image_width + x] = sum;
        }
}
