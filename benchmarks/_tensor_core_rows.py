"""The tensor-core rows of benchmarks/kernel_library.py: hgemm (half and
bfloat16) against cuBLAS, and fused attention against PyTorch's
scaled_dot_product_attention with its flash backend. Each row also checks the
kernel's result against float64 NumPy on sampled rows and columns (the whole
product would take minutes on the host), and says which variant ran.

PyTorch, where installed, gives the bfloat16 matmul (cuBLAS) and the attention
baseline; without it those rows print N/A for the baseline.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

import workbench as wb
from workbench.kernels import matmul

attention_module = importlib.import_module("workbench.kernels.attention")

#: (rows a kernel row has): name, dtype, ms, TFLOP/s, baseline, baseline TFLOP/s,
#: fraction, target, result, variant, max error (relative to the reference's largest value)
GEMM_TARGET, ATTENTION_TARGET = 0.70, 0.50


def torch_or_none():
    """PyTorch on the GPU, or None (not installed, no GPU, or the simulator)."""
    if wb.backend().simulated:
        return None
    try:
        import torch  # lazy: optional, the baselines of the bfloat16 and attention rows
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _as_bits(torch, t):
    """A CuPy uint16 view of a torch bfloat16 tensor (its bit patterns)."""
    return wb.xp.from_dlpack(t.view(torch.int16)).view(np.uint16)


def _host_floats(a, inputs: str) -> np.ndarray:
    host = wb.to_host(a)
    return (matmul.bfloat16_values(host) if inputs == "bfloat16" else host).astype(np.float64)


def _gemm_error(a, b, c, inputs: str, rng, sample: int = 128) -> float:
    """Largest |ours - float64| over sampled rows and columns, over the largest |reference|."""
    M, N = c.shape
    rows = np.sort(rng.choice(M, min(sample, M), replace=False))
    cols = np.sort(rng.choice(N, min(sample, N), replace=False))
    ha, hb = _host_floats(a[rows], inputs), _host_floats(b[:, cols], inputs)
    ref = ha @ hb
    got = _host_floats(c[rows][:, cols], inputs if c.dtype == np.uint16 else "float16")
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def gemm_rows(sizes, max_time: float, inputs_list, verdict) -> list[list]:
    """hgemm at each size for each input type, output in the input type (as
    cuBLAS returns it), against the backend's matmul (half) or PyTorch's (bfloat16)."""
    torch = torch_or_none()
    rng = np.random.default_rng(2)
    rows = []
    for inputs in inputs_list:
        for n in sizes:
            flops = 2.0 * n ** 3
            if inputs == "float16":
                a = wb.to_device(rng.standard_normal((n, n)).astype(np.float16))
                b = wb.to_device(rng.standard_normal((n, n)).astype(np.float16))
                theirs_fn, label = (lambda: wb.xp.matmul(a, b)), "cuBLAS half (CuPy matmul)"
            else:
                if torch is not None:
                    ta, tb = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                    a, b = _as_bits(torch, ta), _as_bits(torch, tb)
                    theirs_fn, label = (lambda: torch.matmul(ta, tb)), "cuBLAS bf16 (torch.matmul)"
                else:
                    a, b = (wb.to_device(matmul.bfloat16_bits(rng.standard_normal((n, n))))
                            for _ in range(2))
                    theirs_fn, label = None, "N/A (no PyTorch)"
            c = wb.kernels.hgemm(a, b, inputs=inputs, out_dtype=inputs)
            variant = wb.kernels.last_variant("hgemm")
            error = _gemm_error(a, b, c, inputs, rng)
            ours = wb.bench(wb.kernels.hgemm, a, b, inputs=inputs, out_dtype=inputs,
                            name=f"hgemm {inputs} {n}", flops=flops, max_time=max_time)
            theirs_tflops, fraction = None, None
            if theirs_fn is not None:
                theirs = wb.bench(theirs_fn, name=f"{label} {n}", flops=flops, max_time=max_time)
                theirs_tflops, fraction = theirs.gflops / 1e3, theirs.median / ours.median
            rows.append([f"hgemm {n}^3", inputs, ours.median * 1e3, ours.gflops / 1e3, label,
                         theirs_tflops, fraction, GEMM_TARGET, verdict(fraction, GEMM_TARGET),
                         variant, error])
    return rows


def _attention_error(q, k, v, o, inputs: str, causal: bool, rng, sample: int = 16) -> float:
    """Largest |ours - float64| over sampled query rows of the first head."""
    Sq = q.shape[-2]
    picks = np.sort(rng.choice(Sq, min(sample, Sq), replace=False))
    hq, hk, hv = (_host_floats(t[(0,) * (t.ndim - 2)], inputs) for t in (q, k, v))
    got = _host_floats(o[(0,) * (o.ndim - 2)][picks], inputs)
    scale = 1.0 / math.sqrt(hq.shape[-1])
    worst = 0.0
    for i, r in enumerate(picks):
        s = hk @ hq[r] * scale
        if causal:
            s[r + 1:] = -np.inf
        w = np.exp(s - s.max())
        ref = (w / w.sum()) @ hv
        worst = max(worst, float(np.abs(got[i] - ref).max() / max(np.abs(ref).max(), 1e-30)))
    return worst


def attention_rows(shape, max_time: float, inputs_list, verdict) -> list[list]:
    """Fused attention, causal and not, against PyTorch's flash attention."""
    torch = torch_or_none()
    rng = np.random.default_rng(3)
    B, H, S, D = shape
    rows = []
    for inputs in inputs_list:
        for causal in (False, True):
            flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            theirs_fn, label = None, "N/A (no PyTorch)"
            if torch is not None:
                tdtype = torch.float16 if inputs == "float16" else torch.bfloat16
                tq, tk, tv = (torch.randn(B, H, S, D, device="cuda", dtype=tdtype) for _ in range(3))
                if inputs == "float16":
                    q, k, v = (wb.xp.from_dlpack(t) for t in (tq, tk, tv))
                else:
                    q, k, v = (_as_bits(torch, t) for t in (tq, tk, tv))
                from torch.nn.attention import SDPBackend, sdpa_kernel  # lazy: optional, as torch

                def theirs_fn(tq=tq, tk=tk, tv=tv, causal=causal):
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return torch.nn.functional.scaled_dot_product_attention(
                            tq, tk, tv, is_causal=causal)
                label = "torch SDPA, flash"
            else:
                host = [rng.standard_normal((B, H, S, D)) for _ in range(3)]
                if inputs == "float16":
                    q, k, v = (wb.to_device(h.astype(np.float16)) for h in host)
                else:
                    q, k, v = (wb.to_device(matmul.bfloat16_bits(h)) for h in host)
            o = wb.kernels.attention(q, k, v, causal=causal, inputs=inputs)
            variant = wb.kernels.last_variant("attention")
            error = _attention_error(q, k, v, o, inputs, causal, rng)
            ours = wb.bench(wb.kernels.attention, q, k, v, causal=causal, inputs=inputs,
                            name=f"attention {inputs} causal={causal}", flops=flops,
                            max_time=max_time)
            theirs_tflops, fraction = None, None
            if theirs_fn is not None:
                theirs = wb.bench(theirs_fn, name=f"{label} causal={causal}", flops=flops,
                                  max_time=max_time)
                theirs_tflops, fraction = theirs.gflops / 1e3, theirs.median / ours.median
            rows.append([f"attention {B}x{H}x{S}x{D}{' causal' if causal else ''}", inputs,
                         ours.median * 1e3, ours.gflops / 1e3, label, theirs_tflops, fraction,
                         ATTENTION_TARGET, verdict(fraction, ATTENTION_TARGET), variant, error])
    return rows
