// Optimiser steps, in place, float32, grid-stride loops. The arithmetic is
// PyTorch's (torch.optim.SGD, Adam, AdamW); the bias corrections of Adam are
// computed once on the host and passed in.
//
// Speed: each step reads three or four arrays and writes two or three, so
// what matters is bytes in flight: a thread moves float4 vectors (one 16-byte
// load per array) when every array is 16-byte aligned, the last n % 4
// parameters (and unaligned arrays) taking the scalar loop.

// SGD with momentum: g = grad + wd * param; buf = momentum * buf + (1 - dampening) * g;
// param -= lr * (nesterov ? g + momentum * buf : buf).
struct SgdStep {
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    __device__ __forceinline__ void operator()(float& p, float g, float& b) const {
        g += weight_decay * p;
        b = momentum * b + (1.0f - dampening) * g;
        p -= lr * (nesterov ? g + momentum * b : b);
    }
};

// Adam (decoupled = 0: weight decay added to the gradient) and AdamW (decoupled = 1:
// param *= 1 - lr * wd first). m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// param -= step_size * m / (sqrt(v) / sqrt_correction2 + eps), with
// step_size = lr / (1 - b1^t) and sqrt_correction2 = sqrt(1 - b2^t).
struct AdamStep {
    float step_size, sqrt_correction2, beta1, beta2, eps, lr, weight_decay;
    int decoupled;
    __device__ __forceinline__ void operator()(float& p, float g, float& m, float& v) const {
        if (decoupled)
            p *= 1.0f - lr * weight_decay;
        else
            g += weight_decay * p;
        m = beta1 * m + (1.0f - beta1) * g;
        v = beta2 * v + (1.0f - beta2) * g * g;
        p -= step_size * m / (sqrtf(v) / sqrt_correction2 + eps);
    }
};

__device__ __forceinline__ bool aligned16(const void* a, const void* b, const void* c, const void* d)
{
    return (((unsigned long long)a | (unsigned long long)b | (unsigned long long)c
             | (unsigned long long)d) & 15) == 0;
}

extern "C" __global__ void
sgd_momentum_step(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ buf,
                  long long n, float lr, float momentum, float dampening, float weight_decay,
                  int nesterov)
{
    const SgdStep step = {lr, momentum, dampening, weight_decay, nesterov};
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long scalar_from = 0;
    if (aligned16(param, grad, buf, param)) {
        float4* p4 = reinterpret_cast<float4*>(param);
        const float4* g4 = reinterpret_cast<const float4*>(grad);
        float4* b4 = reinterpret_cast<float4*>(buf);
        for (long long i = first; i < n / 4; i += stride) {
            float4 p = p4[i], b = b4[i];
            const float4 g = g4[i];
            step(p.x, g.x, b.x); step(p.y, g.y, b.y); step(p.z, g.z, b.z); step(p.w, g.w, b.w);
            p4[i] = p;
            b4[i] = b;
        }
        scalar_from = n / 4 * 4;
    }
    for (long long i = scalar_from + first; i < n; i += stride)
        step(param[i], grad[i], buf[i]);
}

extern "C" __global__ void
adam_step(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ m,
          float* __restrict__ v, long long n, float step_size, float sqrt_correction2,
          float beta1, float beta2, float eps, float lr, float weight_decay, int decoupled)
{
    const AdamStep step = {step_size, sqrt_correction2, beta1, beta2, eps, lr, weight_decay, decoupled};
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long scalar_from = 0;
    if (aligned16(param, grad, m, v)) {
        float4* p4 = reinterpret_cast<float4*>(param);
        const float4* g4 = reinterpret_cast<const float4*>(grad);
        float4* m4 = reinterpret_cast<float4*>(m);
        float4* v4 = reinterpret_cast<float4*>(v);
        for (long long i = first; i < n / 4; i += stride) {
            float4 p = p4[i], mi = m4[i], vi = v4[i];
            const float4 g = g4[i];
            step(p.x, g.x, mi.x, vi.x); step(p.y, g.y, mi.y, vi.y);
            step(p.z, g.z, mi.z, vi.z); step(p.w, g.w, mi.w, vi.w);
            p4[i] = p;
            m4[i] = mi;
            v4[i] = vi;
        }
        scalar_from = n / 4 * 4;
    }
    for (long long i = scalar_from + first; i < n; i += stride)
        step(param[i], grad[i], m[i], v[i]);
}
