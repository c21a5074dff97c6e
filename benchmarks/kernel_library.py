"""The kernel library against its ceilings, measured side by side in one run:
every kernel of ``wb.kernels`` as a fraction of its roofline (the measured copy
bandwidth, or for fma_chain the lower of the measured FMA peak and the copy
bandwidth times its intensity), the GEMMs against cuBLAS, attention against
PyTorch's flash attention and the direct convolution against im2col + matmul.

    python benchmarks/kernel_library.py                 # the active backend (GPU when there is one)
    python benchmarks/kernel_library.py --report kernels.json   # also wb.report's JSON (or .csv)
    python benchmarks/kernel_library.py --only sum,softmax,sgemm
    python benchmarks/kernel_library.py --only gemm_half,gemm_bf16,attention

Targets (H100 / H200; PASS or below is printed beside each):

    elementwise and reductions, 256 MiB float32  >= 85% of the copy bandwidth
        (sum, max, axpy, gelu: >= 90%)
    softmax, log_softmax, rows of 1k to 32k        >= 85% of the copy bandwidth
    layer_norm, cross_entropy                      >= 80% of the copy bandwidth
    pooling, optimiser steps, transpose            >= 85% of the copy bandwidth
    fma_chain (64 FMAs an element)                 >= 85% of min(FMA peak, copy x 16 FLOP/B)
    SGEMM float32 4096^3 (CUDA C)                  >= 70% of cuBLAS float32
    hgemm half and bfloat16, 4096^3 and 8192^3    >= 70% of cuBLAS (stretch 85%)
    attention 4x16x4096x128, causal and not        >= 50% of torch SDPA (flash backend)
    conv2d, 3x3 ResNet layer, NCHW                 within 2x of im2col + matmul

The copy bandwidth is a device-to-device copy of the same 256 MiB, counting
bytes read and written. The tensor-core rows also print the variant that ran
and the largest error against float64 NumPy on sampled rows and columns
(relative to the reference's largest value). On the simulator every size is
scaled down (CPU times say nothing of a GPU) and the table is labelled simulated.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import workbench as wb
from workbench.kernels.baselines import device_args

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402
from _tensor_core_rows import attention_rows, gemm_rows as tensor_core_gemm_rows  # noqa: E402

#: kernel -> fraction of its roofline it must reach
BANDWIDTH_TARGETS = {
    **{k: 0.85 for k in ("add", "scale", "fma", "relu", "leaky_relu", "gelu_erf", "sigmoid",
                         "tanh", "softplus", "silu", "mean", "min", "argmax", "dot", "norm",
                         "softmax", "log_softmax", "max_pool2d", "avg_pool2d", "sgd_momentum",
                         "adam", "adamw", "transpose", "fma_chain")},
    "sum": 0.90, "max": 0.90, "axpy": 0.90, "gelu": 0.90,
    "layer_norm": 0.80, "cross_entropy": 0.80}
#: kernels measured against a compute ceiling rather than the copy bandwidth
COMPUTE_BOUND = ("fma_chain",)
SOFTMAX_COLUMNS = (1024, 2048, 4096, 8192, 16384, 32768)
#: --only aliases for the tensor-core rows
ALIASES = {"gemm_half": ("hgemm", "float16"), "gemm_bf16": ("hgemm", "bfloat16"),
           "attention_half": ("attention", "float16"), "attention_bf16": ("attention", "bfloat16")}


def _sizes(simulated: bool) -> dict:
    if simulated:
        return {"elements": 1 << 18, "gemm": 256, "hgemm": (256,), "conv": (1, 32, 28, 28, 32),
                "softmax_elements": 1 << 18, "attention": (1, 2, 256, 64)}
    return {"elements": 1 << 26, "gemm": 4096, "hgemm": (4096, 8192),
            "conv": (32, 128, 56, 56, 128), "softmax_elements": 1 << 26,
            "attention": (4, 16, 4096, 128)}


def _verdict(fraction, target) -> str:
    if target is None or fraction is None:
        return ""
    return "PASS" if fraction >= target else "below"


def _copy_gbps(nbytes: int, max_time: float) -> float:
    xp = wb.xp
    src = xp.ones(nbytes // 4, dtype=np.float32)
    dst = xp.empty_like(src)
    r = wb.bench(xp.copyto, dst, src, name="copy (ceiling)", bytes=2 * src.nbytes,
                 max_time=max_time)
    return r.gbps


def _bench_spec(spec, args, elements, dtype, max_time, name=None):
    dev = device_args(args)
    return wb.bench(spec.function, *dev, name=name or spec.name, max_time=max_time,
                    bytes=spec.bytes_for(dtype) * elements or None,
                    flops=spec.flops_per_element * elements)


def _row(name, dtype, elements, r, ceiling_name, ceiling, achieved, target):
    fraction = achieved / ceiling if achieved and ceiling else None
    return [name, dtype, elements, r.median * 1e3, achieved, ceiling_name, ceiling, fraction,
            target or "", _verdict(fraction, target)]


def bandwidth_rows(specs, sizes, copy, max_time, only) -> list[list]:
    """Every memory-bound kernel at the large size against the copy bandwidth
    (fma_chain against its compute roofline)."""
    rng = np.random.default_rng(0)
    rows = []
    fma_peak = None
    for name, spec in specs.items():
        if spec.family in ("matmul", "conv", "attention") or (only and name not in only):
            continue
        dtype = spec.dtypes[0]
        args, elements = spec.example(sizes["elements"], dtype, rng)
        r = _bench_spec(spec, args, elements, dtype, max_time)
        target = BANDWIDTH_TARGETS.get(name)
        if name in COMPUTE_BOUND:
            if fma_peak is None:
                fma_peak = wb.ceilings().fma_gflops or float("nan")
            intensity = spec.flops_per_element / spec.bytes_for(dtype)
            roof = min(fma_peak, copy * intensity)
            rows.append(_row(name, dtype, elements, r, "min(FMA peak, copy x intensity) GFLOP/s",
                             roof, r.gflops, target))
        else:
            rows.append(_row(name, dtype, elements, r, "copy GB/s", copy, r.gbps, target))
    if "softmax" in specs and (not only or "softmax" in only):
        spec = specs["softmax"]
        for cols in SOFTMAX_COLUMNS:
            rows_count = max(1, sizes["softmax_elements"] // cols)
            x = rng.standard_normal((rows_count, cols)).astype(np.float32)
            r = _bench_spec(spec, (x,), x.size, "float32", max_time, name=f"softmax cols={cols}")
            rows.append(_row(f"softmax {rows_count}x{cols}", "float32", x.size, r, "copy GB/s",
                             copy, r.gbps, BANDWIDTH_TARGETS["softmax"]))
    return rows


def gemm_rows(specs, sizes, max_time, only) -> list[list]:
    """sgemm against the backend's float32 matmul, conv2d against im2col + matmul."""
    xp = wb.xp
    rng = np.random.default_rng(1)
    rows = []
    n = sizes["gemm"]
    flops = 2.0 * n ** 3
    if "sgemm" in specs and (not only or "sgemm" in only):
        a = wb.to_device(rng.standard_normal((n, n)).astype(np.float32))
        b = wb.to_device(rng.standard_normal((n, n)).astype(np.float32))
        ours = wb.bench(specs["sgemm"].function, a, b, name="sgemm", flops=flops, max_time=max_time)
        theirs = wb.bench(xp.matmul, a, b, name="matmul float32", flops=flops, max_time=max_time)
        fraction = theirs.median / ours.median
        rows.append([f"sgemm {n}^3", "float32", n * n, ours.median * 1e3, ours.gflops,
                     "matmul float32", theirs.gflops, fraction, 0.70, _verdict(fraction, 0.70)])
    if "conv2d" in specs and (not only or "conv2d" in only):
        N, C, H, W, K = sizes["conv"]
        x = wb.to_device(rng.standard_normal((N, C, H, W)).astype(np.float32))
        w = wb.to_device(rng.standard_normal((K, C, 3, 3)).astype(np.float32))
        flops = 2.0 * N * K * H * W * C * 9
        ours = wb.bench(specs["conv2d"].function, x, w, 1, 1, name="conv2d", flops=flops,
                        max_time=max_time)
        references = [("im2col + matmul", specs["conv2d"].library_equivalent)]
        if "conv2d_im2col" in specs:
            references.append(("conv2d_im2col", specs["conv2d_im2col"].function))
        for label, fn in references:
            if fn is None:
                continue
            theirs = wb.bench(fn, x, w, 1, 1, name=label, flops=flops, max_time=max_time)
            fraction = theirs.median / ours.median  # >= 0.5: within 2x
            rows.append([f"conv2d {N}x{C}x{H}x{W}, K={K}", "float32", N * K * H * W,
                         ours.median * 1e3, ours.gflops, label, theirs.gflops, fraction, 0.5,
                         _verdict(fraction, 0.5)])
    return rows


def _inputs_wanted(only: set, kernel: str) -> tuple[str, ...]:
    """The input types of ``kernel``'s tensor-core rows that --only asks for."""
    if not only or kernel in only:
        return ("float16", "bfloat16")
    return tuple(inputs for alias, (k, inputs) in ALIASES.items() if k == kernel and alias in only)


def _percent(value, target=False) -> str:
    if isinstance(value, float):
        return f"{value:.0%}" if target else f"{value:.1%}"
    return "N/A" if value is None else str(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated kernel names (and gemm_half, "
                        "gemm_bf16, attention_half, attention_bf16)")
    parser.add_argument("--max-time", type=float, default=0.5, help="seconds of timing per kernel")
    parser.add_argument("--report", default=None, help="write wb.report to this .json or .csv")
    args = parser.parse_args(argv)
    b = wb.backend()
    simulated = bool(b.simulated)
    sizes = _sizes(simulated)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    specs = wb.kernels.specs()
    device = b.device_properties().name
    label = " [simulated: CPU wall-clock times, sizes scaled down]" if simulated else ""
    plain = [k for k in only if k not in ALIASES and k not in ("hgemm", "attention")]
    rows = []
    if not only or plain:
        copy = _copy_gbps(sizes["elements"] * 4, args.max_time)
        rows = bandwidth_rows(specs, sizes, copy, args.max_time, only)
        rows += gemm_rows(specs, sizes, args.max_time, only)
    if rows:
        print_table(f"wb.kernels on {device} ({b.name}){label}",
                    ["kernel", "dtype", "elements", "ms", "GB/s or GFLOP/s", "ceiling",
                     "ceiling value", "fraction", "target", "result"],
                    [[*r[:7], _percent(r[7]), _percent(r[8], True), r[9]] for r in rows])
        print("\nfraction: of the ceiling named on the row (GB/s rows: the copy bandwidth, bytes "
              "read and written; sgemm and conv rows: the backend's own operation's time over ours).")
    tensor_rows = []
    gemm_inputs, attention_inputs = _inputs_wanted(only, "hgemm"), _inputs_wanted(only, "attention")
    if gemm_inputs:
        tensor_rows += tensor_core_gemm_rows(sizes["hgemm"], args.max_time, gemm_inputs, _verdict)
    if attention_inputs:
        tensor_rows += attention_rows(sizes["attention"], args.max_time, attention_inputs, _verdict)
    if tensor_rows:
        print_table(f"tensor-core kernels on {device} ({b.name}){label}",
                    ["kernel", "inputs", "ms", "TFLOP/s", "baseline", "baseline TFLOP/s",
                     "fraction", "target", "result", "variant", "max error"],
                    [[*r[:5], _percent(r[5]) if r[5] is None else r[5], _percent(r[6]),
                      _percent(r[7], True), r[8], r[9], f"{r[10]:.1e}"] for r in tensor_rows])
        print("\nfraction: the baseline's time over ours (same FLOP count; causal attention counts "
              "half the products). max error: largest |ours - float64 NumPy| on sampled rows and "
              "columns over the reference's largest value (half output ~1e-3, bfloat16 ~1e-2).")
    if args.report:
        wb.report(args.report)
        print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
