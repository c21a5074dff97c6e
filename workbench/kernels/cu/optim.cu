// Optimiser steps, in place, float32, one thread per parameter (grid-stride
// loops). The arithmetic is PyTorch's (torch.optim.SGD, Adam, AdamW); the
// bias corrections of Adam are computed once on the host and passed in.

// SGD with momentum: g = grad + wd * param; buf = momentum * buf + (1 - dampening) * g;
// param -= lr * (nesterov ? g + momentum * buf : buf).
extern "C" __global__ void
sgd_momentum_step(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ buf,
                  long long n, float lr, float momentum, float dampening, float weight_decay,
                  int nesterov)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float p = param[i];
        const float g = grad[i] + weight_decay * p;
        const float b = momentum * buf[i] + (1.0f - dampening) * g;
        buf[i] = b;
        param[i] = p - lr * (nesterov ? g + momentum * b : b);
    }
}

// Adam (decoupled = 0: weight decay added to the gradient) and AdamW (decoupled = 1:
// param *= 1 - lr * wd first). m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// param -= step_size * m / (sqrt(v) / sqrt_correction2 + eps), with
// step_size = lr / (1 - b1^t) and sqrt_correction2 = sqrt(1 - b2^t).
extern "C" __global__ void
adam_step(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ m,
          float* __restrict__ v, long long n, float step_size, float sqrt_correction2,
          float beta1, float beta2, float eps, float lr, float weight_decay, int decoupled)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float p = param[i];
        float g = grad[i];
        if (decoupled)
            p *= 1.0f - lr * weight_decay;
        else
            g += weight_decay * p;
        const float mi = beta1 * m[i] + (1.0f - beta1) * g;
        const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * mi / (sqrtf(vi) / sqrt_correction2 + eps);
    }
}
