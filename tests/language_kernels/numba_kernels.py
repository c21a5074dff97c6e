"""Numba kernels of tests/capabilities/test_languages.py (a module: Numba's simulator
swaps the ``cuda`` global of a kernel's module, so it must be a global)."""
import numpy as np
from numba import cuda


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
