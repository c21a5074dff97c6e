"""The kernel library against its ceilings, measured side by side in one run:
every kernel of ``wb.kernels`` as a fraction of the measured copy bandwidth,
the GEMMs against the backend's own ``matmul`` (cuBLAS on a GPU) and the
direct convolution against im2col + ``matmul``.

    python benchmarks/kernel_library.py                 # the active backend (GPU when there is one)
    python benchmarks/kernel_library.py --report kernels.json   # also wb.report's JSON (or .csv)
    python benchmarks/kernel_library.py --only sum,softmax,sgemm

Targets (H100; PASS or below is printed beside each):

    sum / max reduction, 256 MiB float32      >= 90% of the copy bandwidth (bytes read only)
    elementwise (axpy, gelu), 256 MiB float32 >= 90% of the copy bandwidth
    transpose 8192 x 8192 float32             >= 85% of the copy bandwidth
    softmax, rows of 4k to 32k float32        >= 85% of the copy bandwidth
    SGEMM float32 4096^3 (CUDA C)             >= 70% of the backend's float32 matmul (cuBLAS)
    tensor-core GEMM 4096^3 (half in)         >= 50% of the backend's half matmul (stretch)
    conv2d, 3x3 ResNet layer, NCHW            within 2x of im2col + matmul

The copy bandwidth is a device-to-device copy of the same 256 MiB, counting
bytes read and written. On the simulator every size is scaled down (CPU
times say nothing of a GPU) and the table is labelled simulated.
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

#: kernel -> fraction of the copy bandwidth it must reach
BANDWIDTH_TARGETS = {"sum": 0.90, "max": 0.90, "axpy": 0.90, "gelu": 0.90, "transpose": 0.85,
                     "softmax": 0.85}
SOFTMAX_COLUMNS = (4096, 8192, 16384, 32768)


def _sizes(simulated: bool) -> dict:
    if simulated:
        return {"elements": 1 << 18, "gemm": 256, "conv": (1, 32, 28, 28, 32),
                "softmax_elements": 1 << 18}
    return {"elements": 1 << 26, "gemm": 4096, "conv": (32, 128, 56, 56, 128),
            "softmax_elements": 1 << 26}


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


def bandwidth_rows(specs, sizes, copy, max_time, only) -> list[list]:
    """Every kernel at the large size, as GB/s and its fraction of the copy bandwidth."""
    rng = np.random.default_rng(0)
    rows = []
    for name, spec in specs.items():
        if spec.family in ("matmul", "conv") or (only and name not in only):
            continue
        dtype = spec.dtypes[0]
        args, elements = spec.example(sizes["elements"], dtype, rng)
        r = _bench_spec(spec, args, elements, dtype, max_time)
        target = BANDWIDTH_TARGETS.get(name)
        fraction = r.gbps / copy if r.gbps else None
        rows.append([name, dtype, elements, r.median * 1e3, r.gbps, "copy", copy,
                     fraction, target or "", _verdict(fraction, target)])
    if "softmax" in specs and (not only or "softmax" in only):
        spec = specs["softmax"]
        for cols in SOFTMAX_COLUMNS:
            rows_count = max(1, sizes["softmax_elements"] // cols)
            x = rng.standard_normal((rows_count, cols)).astype(np.float32)
            r = _bench_spec(spec, (x,), x.size, "float32", max_time, name=f"softmax cols={cols}")
            fraction = r.gbps / copy
            rows.append([f"softmax {rows_count}x{cols}", "float32", x.size, r.median * 1e3, r.gbps,
                         "copy", copy, fraction, BANDWIDTH_TARGETS["softmax"],
                         _verdict(fraction, BANDWIDTH_TARGETS["softmax"])])
    return rows


def gemm_rows(specs, sizes, max_time, only) -> list[list]:
    """sgemm and hgemm against the backend's matmul, conv2d against im2col + matmul."""
    xp = wb.xp
    rng = np.random.default_rng(1)
    rows = []
    n = sizes["gemm"]
    flops = 2.0 * n ** 3
    for name, dtype, target in (("sgemm", np.float32, 0.70), ("hgemm", np.float16, 0.50)):
        if name not in specs or (only and name not in only):
            continue
        a = wb.to_device(rng.standard_normal((n, n)).astype(dtype))
        b = wb.to_device(rng.standard_normal((n, n)).astype(dtype))
        ours = wb.bench(specs[name].function, a, b, name=name, flops=flops, max_time=max_time)
        theirs = wb.bench(xp.matmul, a, b, name=f"matmul {np.dtype(dtype).name}", flops=flops,
                          max_time=max_time)
        fraction = theirs.median / ours.median
        rows.append([f"{name} {n}^3", np.dtype(dtype).name, n * n, ours.median * 1e3,
                     ours.gflops, f"matmul {np.dtype(dtype).name}", theirs.gflops, fraction,
                     target, _verdict(fraction, target)])
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated kernel names")
    parser.add_argument("--max-time", type=float, default=0.5, help="seconds of timing per kernel")
    parser.add_argument("--report", default=None, help="write wb.report to this .json or .csv")
    args = parser.parse_args(argv)
    b = wb.backend()
    simulated = bool(b.simulated)
    sizes = _sizes(simulated)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    specs = wb.kernels.specs()
    copy = _copy_gbps(sizes["elements"] * 4, args.max_time)
    rows = bandwidth_rows(specs, sizes, copy, args.max_time, only)
    rows += gemm_rows(specs, sizes, args.max_time, only)
    device = b.device_properties().name
    label = " [simulated: CPU wall-clock times, sizes scaled down]" if simulated else ""
    print_table(f"wb.kernels on {device} ({b.name}){label}",
                ["kernel", "dtype", "elements", "ms", "GB/s or GFLOP/s", "ceiling",
                 "ceiling value", "fraction", "target", "result"],
                [[r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                  f"{r[7]:.1%}" if r[7] is not None else "N/A",
                  f"{r[8]:.0%}" if isinstance(r[8], float) else r[8], r[9]] for r in rows])
    print("\nfraction: of the copy bandwidth (GB/s rows) or of the backend's own operation's "
          "speed (GEMM and conv rows: its time over ours).")
    if args.report:
        wb.report(args.report)
        print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
