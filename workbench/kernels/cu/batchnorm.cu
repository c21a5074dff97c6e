// Batch normalisation over the channels of NCHW (or NC) input.
//
// bn_stats: one block per channel; the batch mean of the N*HW values of the
// channel, then their (biased) variance as the mean of squared deviations
// (two passes, double accumulators: no cancellation). It writes the batch
// mean and variance and updates the running statistics in place:
// running = (1 - momentum) * running + momentum * batch, with the unbiased
// variance (n / (n - 1)) for the running one.
//
// bn_scale + bn_apply: y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] +
// bias[c], as (x - mean[c]) * scale[c] + bias[c], with the batch statistics
// (training) or the running ones (inference).

#define BN_THREADS 256

__device__ double bn_block_sum(double v, double* scratch)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < (int)blockDim.x / 32; ++w)
            total += scratch[w];
        scratch[32] = total;
    }
    __syncthreads();
    total = scratch[32];
    __syncthreads();   // scratch is reused by the next sum
    return total;
}

template <typename T>
__global__ void __launch_bounds__(BN_THREADS)
bn_stats(const T* __restrict__ x, T* __restrict__ mean, T* __restrict__ var,
         T* __restrict__ running_mean, T* __restrict__ running_var,
         int N, int C, int HW, double momentum, int update_running)
{
    __shared__ double scratch[33];
    const int c = blockIdx.x;
    const long long count = (long long)N * HW;
    double s = 0.0;
    for (int n = 0; n < N; ++n) {
        const T* row = x + ((size_t)n * C + c) * HW;
        for (int i = threadIdx.x; i < HW; i += blockDim.x)
            s += (double)row[i];
    }
    const double m = bn_block_sum(s, scratch) / (double)count;
    double d2 = 0.0;
    for (int n = 0; n < N; ++n) {
        const T* row = x + ((size_t)n * C + c) * HW;
        for (int i = threadIdx.x; i < HW; i += blockDim.x) {
            const double d = (double)row[i] - m;
            d2 += d * d;
        }
    }
    const double v = bn_block_sum(d2, scratch) / (double)count;
    if (threadIdx.x == 0) {
        mean[c] = (T)m;
        var[c] = (T)v;
        if (update_running) {
            const double unbiased = count > 1 ? v * (double)count / (double)(count - 1) : v;
            running_mean[c] = (T)((1.0 - momentum) * (double)running_mean[c] + momentum * m);
            running_var[c] = (T)((1.0 - momentum) * (double)running_var[c] + momentum * unbiased);
        }
    }
}

// per channel: scale = weight / sqrt(var + eps), in double
template <typename T>
__global__ void bn_scale(const T* __restrict__ var, const T* __restrict__ weight,
                         T* __restrict__ scale, int C, double eps)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        scale[c] = (T)((double)weight[c] / sqrt((double)var[c] + eps));
}

// y = (x - mean[c]) * scale[c] + bias[c] (the subtraction first: exact for values near the
// mean); blocks along y walk the (n, c) planes, along x the plane
template <typename T>
__global__ void bn_apply(const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ mean,
                         const T* __restrict__ scale, const T* __restrict__ bias,
                         int planes, int C, int HW)
{
    for (int plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const int c = plane % C;
        const T m = mean[c], a = scale[c], b = bias[c];
        const size_t base = (size_t)plane * HW;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < HW; i += gridDim.x * blockDim.x)
            y[base + i] = (x[base + i] - m) * a + b;
    }
}
