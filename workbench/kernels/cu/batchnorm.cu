// Batch normalisation over the channels of NCHW (or NC) input.
//
// Training statistics, in two passes over x with double accumulators (no
// cancellation) and a fixed summation order (the same result every run):
//   bn_partial<T, 0>: block (b, c) sums its share of channel c's N*HW values;
//   bn_mean: per channel, mean = (sum of the partial sums) / count;
//   bn_partial<T, 1>: block (b, c) sums its share of (x - mean)^2;
//   bn_finalize: per channel, the batch mean and (biased) variance in T, and
//     the running statistics updated in place, running = (1 - momentum) *
//     running + momentum * batch, with the unbiased variance (n / (n - 1))
//     for the running one.
// Each channel is split over `chunks` blocks so that a few channels of many
// values still fill the device.
//
// bn_scale + bn_apply: y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] +
// bias[c], as (x - mean[c]) * scale[c] + bias[c], with the batch statistics
// (training) or the running ones (inference).

#define BN_THREADS 256

template <typename T, int SQUARES>
__global__ void __launch_bounds__(BN_THREADS)
bn_partial(const T* __restrict__ x, double* __restrict__ partial, const double* __restrict__ mean,
           int N, int C, int HW, int chunks)
{
    __shared__ __align__(16) double warp_sums[BN_THREADS / 32];
    const int c = blockIdx.y, chunk = blockIdx.x;
    const int count = N * HW;   // values of one channel (< 2^31: checked on the host)
    const double m = SQUARES ? mean[c] : 0.0;
    double s = 0.0;
    for (int e = chunk * BN_THREADS + threadIdx.x; e < count; e += chunks * BN_THREADS) {
        const int n = e / HW, i = e - n * HW;
        const double v = (double)x[((size_t)n * C + c) * HW + i];
        s += SQUARES ? (v - m) * (v - m) : v;
    }
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {   // (two sums a 16-byte load, as nvcc would merge them anyway)
        const double2* pairs = reinterpret_cast<const double2*>(warp_sums);
        double total = 0.0;
        for (int w = 0; w < BN_THREADS / 64; ++w) {
            const double2 pair = pairs[w];
            total += pair.x;
            total += pair.y;
        }
        partial[(size_t)c * chunks + chunk] = total;
    }
}

__global__ void bn_mean(const double* __restrict__ partial, double* __restrict__ mean, int C,
                        int chunks, double count)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int k = 0; k < chunks; ++k)
            s += partial[(size_t)c * chunks + k];
        mean[c] = s / count;
    }
}

template <typename T>
__global__ void bn_finalize(const double* __restrict__ partial, const double* __restrict__ mean64,
                            T* __restrict__ mean, T* __restrict__ var,
                            T* __restrict__ running_mean, T* __restrict__ running_var,
                            int C, int chunks, double count, double momentum)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int k = 0; k < chunks; ++k)
            s += partial[(size_t)c * chunks + k];
        const double m = mean64[c], v = s / count;
        mean[c] = (T)m;
        var[c] = (T)v;
        const double unbiased = count > 1.0 ? v * count / (count - 1.0) : v;
        running_mean[c] = (T)((1.0 - momentum) * (double)running_mean[c] + momentum * m);
        running_var[c] = (T)((1.0 - momentum) * (double)running_var[c] + momentum * unbiased);
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

// the same for small planes (HW below a block, e.g. (N, C) input): one flat loop
template <typename T>
__global__ void bn_apply_flat(const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ mean,
                              const T* __restrict__ scale, const T* __restrict__ bias,
                              int total, int C, int HW)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int c = (i / HW) % C;
        y[i] = (x[i] - mean[c]) * scale[c] + bias[c];
    }
}
