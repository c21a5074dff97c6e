"""Host cost per launch of a Numba and a Triton kernel through the workbench
(``wb.python_kernel(fn)(...)``: checks, two timing events, the log record) next to
calling the kernel directly.

Target (on a GPU): the workbench call costs at most 1.2x the direct call.
The direct calls are the languages' usual ones on the same device memory:
Numba's ``fn[grid, block](...)`` on the CuPy arrays themselves (Numba then
imports them through ``__cuda_array_interface__`` on every call) and, for
reference, on Numba device arrays made once; Triton's ``fn[grid](...)`` on
PyTorch tensors over the same memory (Triton's native argument). On the
simulator the rows time Numba's CUDA simulator and Triton's interpreter,
whose launches cost milliseconds: the ratio is shown, the target is the GPU's.
Run: ``python benchmarks/python_kernels.py``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import paired_per_call_us, per_call_us, print_table  # noqa: E402

import workbench as wb  # noqa: E402

# Numba warns on every launch of a small grid; the check stays, the message goes
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

TARGET = 1.2


def _row(what, direct_us, wb_us, gpu, ratio=None):
    ratio = wb_us / direct_us if ratio is None else ratio
    verdict = ("PASS" if ratio <= TARGET else "below target") if gpu else "(target is for the GPU)"
    return [what, f"{direct_us:.2f}", f"{wb_us:.2f}", f"{ratio:.2f}x", verdict]


def numba_rows(x, y, n, calls, gpu):
    # imported after setup() (the simulator or the GPU), as a global: Numba's
    # simulator swaps the kernel module's global `cuda`
    global cuda
    from numba import cuda

    @cuda.jit
    def touch(x, y, a, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = a * x[i]

    k = wb.python_kernel(touch)
    grid, block = 1, 32
    for _ in range(20):
        k(x, y, 2.0, n, grid=grid, block=block)
        touch[grid, block](x, y, 2.0, n) if gpu else None
    wb.timings()
    rows = []
    if gpu:
        direct_call = lambda: touch[grid, block](x, y, 2.0, n)  # noqa: E731
        nx, ny = cuda.as_cuda_array(x), cuda.as_cuda_array(y)
        direct_numba_arrays = per_call_us(lambda: touch[grid, block](nx, ny, 2.0, n), calls)
    else:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        hx, hy = FakeCUDAArray(np.asarray(x).view(np.ndarray)), FakeCUDAArray(np.asarray(y).view(np.ndarray))
        direct_call = lambda: touch[grid, block](hx, hy, 2.0, n)  # noqa: E731
        direct_numba_arrays = None
    direct, through, ratio = paired_per_call_us(
        direct_call, lambda: k(x, y, 2.0, n, grid=grid, block=block), calls)
    wb.timings()
    rows.append(_row("numba: fn[grid, block](cupy arrays) vs wb" if gpu else
                     "numba (CUDA simulator): direct vs wb", direct, through, gpu, ratio))
    if direct_numba_arrays is not None:
        rows.append(["numba: fn[grid, block](numba device arrays made once)",
                     f"{direct_numba_arrays:.2f}", "", "", "(reference)"])
    return rows


def triton_rows(x, y, n, calls, gpu):
    global tl  # Triton's interpreter patches the kernel module's global `tl`
    import triton
    import triton.language as tl

    @triton.jit
    def touch(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=m), mask=m)

    k = wb.python_kernel(touch)
    for _ in range(20):
        k(x, y, 2.0, n, grid=(1,), BLOCK=256)
    wb.timings()
    if gpu:
        import torch
        tx, ty = torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")
        touch[(1,)](tx, ty, 2.0, n, BLOCK=256)
        direct_call = lambda: touch[(1,)](tx, ty, 2.0, n, BLOCK=256)  # noqa: E731
        what = "triton: fn[grid](torch tensors) vs wb"
    else:
        from workbench.languages.triton import _HostArray
        hx, hy = _HostArray(np.asarray(x).view(np.ndarray)), _HostArray(np.asarray(y).view(np.ndarray))
        direct_call = lambda: touch[(1,)](hx, hy, 2.0, n, BLOCK=256)  # noqa: E731
        what = "triton (interpreter): direct vs wb"
    direct, through, ratio = paired_per_call_us(
        direct_call, lambda: k(x, y, 2.0, n, grid=(1,), BLOCK=256), calls)
    wb.timings()
    return [_row(what, direct, through, gpu, ratio)]


def main() -> None:
    support = wb.languages.setup()
    b = wb.backend()
    gpu = not b.simulated
    calls = 2000 if gpu else 10
    n = 256
    x = wb.to_device(np.ones(n, np.float32))
    y = wb.xp.zeros(n, dtype=np.float32)
    rows = []
    for language, make in (("numba", numba_rows), ("triton", triton_rows)):
        status = support[language]
        if not status.available:
            rows.append([f"{language}: {status.reason}", "", "", "", "skipped"])
            continue
        try:
            rows += make(x, y, n, calls, gpu)
        except Exception as exc:  # one language failing leaves the other's figures
            rows.append([f"{language}: failed: {type(exc).__name__}: {exc}".splitlines()[0][:150],
                         "", "", "", "failed"])
    print_table(f"Host cost per launch, µs ({b.name}: {b.device_name()}; target: wb <= {TARGET}x direct)",
                ["launch", "direct µs", "wb µs", "wb / direct", "verdict"], rows)


if __name__ == "__main__":
    main()
