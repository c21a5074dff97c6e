"""Numba kernels of tests/capabilities/test_languages.py (a module: Numba's simulator
swaps the ``cuda`` global of a kernel's module, so it must be a global)."""
import numpy as np
from numba import cuda
from numba.cuda.random import xoroshiro128p_uniform_float32


@cuda.jit
def scale(x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = a * x[i]


@cuda.jit
def block_sum(x, out, n):
    s = cuda.shared.array(128, dtype=np.float32)
    i = cuda.grid(1)
    s[cuda.threadIdx.x] = x[i] if i < n else 0.0
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        t = 0.0
        for j in range(cuda.blockDim.x):
            t += s[j]
        cuda.atomic.add(out, 0, t)


#: A module-level global scale_by_global reads: compiled in (frozen) at its first compile.
SCALE = 2.0


@cuda.jit
def scale_by_global(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = SCALE * x[i]


@cuda.jit("void(int32[:, ::1])")
def typed_fill(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = i * a.shape[1] + j


@cuda.jit
def uniform_samples(states, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        for d in range(out.shape[1]):
            out[i, d] = xoroshiro128p_uniform_float32(states, i)
