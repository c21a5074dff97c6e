"""A first look at the kernel library's new GPU kernels, each call under its own
short timeout by the caller (gpu/kernels.sh): the Hopper GEMM at a small awkward
size against float64 (and, if it is wrong, where: which rows and columns, and
whether B's descriptor with its two offsets swapped is right), attention causal
and not against float64, and the row kernels at 32k columns. Prints one line each."""
from __future__ import annotations

import importlib
import sys

import numpy as np

import workbench as wb
from workbench.kernels import library, matmul

attention = importlib.import_module("workbench.kernels.attention")
rng = np.random.default_rng(0)


def gemm(M=300, N=264, K=136, defines=()):
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    da, db = wb.to_device(a), wb.to_device(b)
    if defines:   # the same kernel built with other descriptor offsets
        compiled = library.module("matmul", defines=defines, variant="sm90", arch="sm_90a",
                                  instantiate=matmul.SM90_INSTANTIATE)
        c = wb.xp.zeros((M, N), dtype=np.float32)
        maps = matmul._tensor_maps("float16", da, db, M, N, K)
        compiled["hgemm_sm90<__half, float>"](maps, c, M, N, K, grid=4, block=384,
                                               shared_mem=matmul._SM90_SHARED)
    else:
        c = wb.kernels.hgemm(da, db, variant="sm90")
    got = wb.to_host(c).astype(np.float64)
    wrong = np.abs(got - ref) > 1e-3 * np.abs(ref).max()
    return wrong, got, ref


def main() -> int:
    what = sys.argv[1]
    props = wb.backend().device_properties()
    if what == "gemm":
        wrong, got, ref = gemm()
        print(f"hgemm sm90 300x264x136: {wrong.mean():.1%} wrong, max error "
              f"{np.abs(got - ref).max():.2e}, variant {wb.kernels.last_variant('hgemm')!r}, "
              f"cc {props.compute_capability}")
        if wrong.any():
            rows, cols = np.nonzero(wrong)
            print(f"  wrong rows mod 128: {np.unique(rows % 128)[:20]}; cols mod 256: "
                  f"{np.unique(cols % 256)[:20]}; zeros in ours: {(got == 0).mean():.1%}")
            swapped, _, _ = gemm(defines=("HP_B_LEADING=1024", "HP_B_STRIDE=8192"))
            print(f"  with B's offsets swapped: {swapped.mean():.1%} wrong")
        return int(wrong.any())
    if what == "attention":
        bad = 0
        for inputs in ("float16", "bfloat16"):
            for causal in (False, True):
                for D in (64, 128):
                    shape = (2, 2, 300, D)
                    made = [rng.standard_normal(shape) for _ in range(3)]
                    host = ([m.astype(np.float16) for m in made] if inputs == "float16"
                            else [matmul.bfloat16_bits(m) for m in made])
                    out = wb.to_host(attention.attention(*map(wb.to_device, host), causal=causal,
                                                         inputs=inputs))
                    got = (matmul.bfloat16_values(out) if inputs == "bfloat16" else out).astype(np.float64)
                    ref = attention.attention_reference(*host, causal, None, inputs)
                    error = np.abs(got - ref).max()
                    ok = error < (3e-3 if inputs == "float16" else 2e-2)
                    bad += not ok
                    print(f"attention {inputs} causal={causal} D={D}: max error {error:.2e} "
                          f"{'ok' if ok else 'WRONG'}")
        return int(bad > 0)
    if what == "rows":
        x = rng.standard_normal((300, 32768)).astype(np.float32)
        ref = np.exp(x - x.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        error = np.abs(wb.to_host(wb.kernels.softmax(wb.to_device(x))) - ref).max()
        print(f"softmax 300x32768 (prefetched rows): max error {error:.2e}")
        return int(error > 1e-6)
    raise SystemExit(f"unknown check {what!r}")


if __name__ == "__main__":
    raise SystemExit(main())
