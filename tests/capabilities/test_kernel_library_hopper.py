"""The Hopper GEMM (``cu/matmul.sm90.cu``): when hgemm chooses it, its tensor
maps (the host side, driven by a stand-in libcuda here), its build for sm_90a
with real NVRTC (registers, no spills, the instructions it must use), and on a
GPU of compute capability 9.0 its results against float64 NumPy at awkward
sizes (gpu-marked).

Tolerances of the GPU checks: float32 output, ``1e-3`` relative to the largest
reference value (products of halves are exact, float32 sums of K terms);
half output adds its rounding (``2e-3``), bfloat16 output ``1e-2``.
"""
from __future__ import annotations

import ctypes
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import workbench as wb
from workbench.backends.contract import CompileOptions
from workbench.kernels import library, matmul, tensor_maps

rng = np.random.default_rng(20261124)


# -- which variant runs ---------------------------------------------------------------

@pytest.mark.parametrize("capability,shape,aligned,expected", [
    ((9, 0), (4096, 4096, 4096), True, None),
    ((9, 0), (1000, 136, 72), True, None),                   # awkward M, N and K: TMA fills edges
    ((9, 0), (64, 100, 64), True, "multiples of 8"),          # N not a multiple of 8
    ((9, 0), (64, 64, 30), True, "multiples of 8"),           # K not a multiple of 8
    ((9, 0), (64, 64, 64), False, "aligned"),
    ((9, 0), (0, 64, 64), True, "empty"),
    ((8, 0), (4096, 4096, 4096), True, "9.0 only"),
    ((10, 0), (4096, 4096, 4096), True, "9.0 only"),          # Blackwell has no wgmma
    (None, (4096, 4096, 4096), True, "simulator"),
])
def test_sm90_is_chosen_only_where_it_can_run(capability, shape, aligned, expected):
    M, N, K = shape
    reason = matmul.sm90_refusal(capability, M, N, K, aligned)
    if expected is None:
        assert reason is None
    else:
        assert expected in reason


def test_simulator_runs_the_portable_kernel_and_the_catalog_says_so(private_simulator):
    private_simulator()
    a = wb.to_device(rng.standard_normal((40, 24)).astype(np.float16))
    b = wb.to_device(rng.standard_normal((24, 16)).astype(np.float16))
    wb.kernels.hgemm(a, b)
    assert wb.kernels.last_variant("hgemm") == "plain loop (CPU simulator)"
    (row,) = [r for r in wb.kernels.catalog("matmul").rows() if r["name"] == "hgemm"]
    assert row["variant"] == "ran: plain loop (CPU simulator)"
    assert "cu/matmul.sm90.cu" in row["source"]
    with pytest.raises(ValueError, match="simulator has no tensor cores"):
        wb.kernels.hgemm(a, b, variant="sm90")
    with pytest.raises(ValueError, match="out_dtype"):
        wb.kernels.hgemm(a, b, out_dtype="bfloat16")


def test_the_hopper_source_is_shown_and_explained():
    src = wb.kernels.source("hgemm", variant="sm90")
    assert src.path.endswith("cu/matmul.sm90.cu")
    for idea in ("Tensor Memory Accelerator", "mbarrier", "setmaxnreg", "wgmma", "persistent"):
        assert idea in str(src)
    assert library.variant_sources("matmul") == ["sm90"]
    assert "matmul.sm90" not in library.families()
    with pytest.raises(ValueError, match="no variant"):
        library.source_text("matmul", "sm80")


# -- tensor maps ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in driver")
    folder = tmp_path_factory.mktemp("fake_driver")
    path = folder / "libfakecuda.so"
    source = str(pathlib.Path(__file__).resolve().parents[1] / "fake_tensor_map.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(path), source], check=True)
    return ctypes.CDLL(str(path))


def test_encode_tiled_passes_the_driver_what_tma_needs(fake_driver):
    ctypes.c_int.in_dll(fake_driver, "fake_status").value = 0
    words = tensor_maps.encode_tiled(0x7F0000001000, "bfloat16", (1000, 136), (128, 64),
                                     driver=fake_driver)
    assert words.dtype == np.uint64 and words.shape == (16,)
    (misalignment, dtype, rank, address, dim0, dim1, stride, box0, box1, step0, step1,
     interleave, swizzle, promotion, fill, mark) = (int(w) for w in words)
    assert mark == 0x7E57 and misalignment == 0           # the map buffer is 64-byte aligned
    assert (dtype, rank, address) == (9, 2, 0x7F0000001000)
    assert (dim0, dim1, stride) == (136, 1000, 136 * 2)   # innermost first, the row stride in bytes
    assert (box0, box1, step0, step1) == (64, 128, 1, 1)
    assert (interleave, swizzle, promotion, fill) == (0, 3, 3, 0)   # 128-byte swizzle, zero fill


def test_encode_tiled_refuses_what_tma_cannot_describe(fake_driver):
    with pytest.raises(ValueError, match="16-byte aligned"):
        tensor_maps.encode_tiled(0x1008, "float16", (64, 64), (64, 64), driver=fake_driver)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        tensor_maps.encode_tiled(0x1000, "float16", (64, 60), (64, 60), driver=fake_driver)
    with pytest.raises(ValueError, match="wider than the 128-byte swizzle"):
        tensor_maps.encode_tiled(0x1000, "float16", (64, 256), (64, 128), driver=fake_driver)
    with pytest.raises(ValueError, match="take"):
        tensor_maps.encode_tiled(0x1000, "int8", (64, 64), (64, 64), driver=fake_driver)
    status = ctypes.c_int.in_dll(fake_driver, "fake_status")
    status.value = 1
    try:
        with pytest.raises(tensor_maps.TensorMapUnavailable, match="CUDA_ERROR_INVALID_VALUE"):
            tensor_maps.encode_tiled(0x1000, "float16", (64, 64), (64, 64), driver=fake_driver)
    finally:
        status.value = 0


def test_tensor_map_cache_encodes_once_per_matrix():
    copies, made = [], []
    cache = tensor_maps.TensorMapCache(lambda host: copies.append(host) or host.copy(), size=2)

    def make(tag):
        made.append(tag)
        return np.full(32, tag, dtype=np.uint64)
    first = cache.get(("a",), lambda: make(1))
    assert cache.get(("a",), lambda: make(2)) is first and made == [1]
    cache.get(("b",), lambda: make(3))
    cache.get(("c",), lambda: make(4))          # ("a",) is the least recently used: dropped
    assert len(cache) == 2
    assert int(cache.get(("a",), lambda: make(5))[0]) == 5 and made == [1, 3, 4, 5]


# -- the build for sm_90a, with real NVRTC ---------------------------------------------------

@pytest.fixture(scope="module")
def sm90_build():
    from workbench.backends.nvrtc import bindings
    from workbench.backends.nvrtc.check import check_with_nvrtc
    if bindings.library() is None:
        pytest.skip("NVRTC is not installed")
    return check_with_nvrtc(library.source_text("matmul", "sm90"),
                            CompileOptions(name_expressions=matmul.SM90_INSTANTIATE), [],
                            arch="sm_90a")


def test_hopper_gemm_builds_for_sm90a_without_spills(sm90_build):
    assert set(sm90_build.resources) == set(matmul.SM90_INSTANTIATE)
    for name, r in sm90_build.resources.items():
        assert r.local_bytes == 0, name                    # no spills, no stack
        assert r.registers <= 168, name                    # 384 threads, one block per SM
        assert r.max_threads_per_block >= 384, name


def test_hopper_gemm_uses_wgmma_tma_and_mbarriers(sm90_build):
    ptx = sm90_build.ptx
    for instruction in ("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
                        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                        "cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity",
                        "mbarrier.arrive.expect_tx", "setmaxnreg.inc", "setmaxnreg.dec",
                        "fence.proxy.tensormap"):
        assert instruction in ptx, instruction


# -- on a Hopper GPU ----------------------------------------------------------------------

def _hopper_or_skip():
    b = wb.backend()
    if b.simulated or tuple(b.device_properties().compute_capability) != (9, 0):
        pytest.skip("the Hopper kernel needs a device of compute capability 9.0")


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(1000, 136, 72), (128, 256, 64), (257, 520, 1000),
                                   (1, 8, 8), (3000, 2056, 200)])
@pytest.mark.parametrize("inputs,out_dtype", [("float16", "float32"), ("float16", "float16"),
                                              ("bfloat16", "float32"), ("bfloat16", "bfloat16")])
def test_hopper_gemm_matches_float64(backend, M, N, K, inputs, out_dtype):
    _hopper_or_skip()
    if inputs == "float16":
        a, b = (rng.standard_normal(s).astype(np.float16) for s in ((M, K), (K, N)))
        fa, fb = a.astype(np.float64), b.astype(np.float64)
    else:
        a, b = (matmul.bfloat16_bits(rng.standard_normal(s)) for s in ((M, K), (K, N)))
        fa, fb = (matmul.bfloat16_values(x).astype(np.float64) for x in (a, b))
    c = wb.kernels.hgemm(wb.to_device(a), wb.to_device(b), inputs=inputs, out_dtype=out_dtype,
                         variant="sm90")
    assert wb.kernels.last_variant("hgemm").startswith("wgmma")
    got = wb.to_host(c)
    got = matmul.bfloat16_values(got) if out_dtype == "bfloat16" else got.astype(np.float64)
    expected = fa @ fb
    tolerance = {"float32": 1e-3, "float16": 2e-3, "bfloat16": 1e-2}[out_dtype]
    assert np.abs(got - expected).max() <= tolerance * max(np.abs(expected).max(), 1.0)


@pytest.mark.gpu
def test_hopper_gemm_is_the_default_on_hopper_and_reuses_its_tensor_maps(backend):
    _hopper_or_skip()
    a = wb.to_device(rng.standard_normal((512, 256)).astype(np.float16))
    b = wb.to_device(rng.standard_normal((256, 512)).astype(np.float16))
    first = wb.to_host(wb.kernels.hgemm(a, b))
    assert wb.kernels.last_variant("hgemm").startswith("wgmma")
    again = wb.to_host(wb.kernels.hgemm(a, b))
    np.testing.assert_array_equal(first, again)
    portable = wb.to_host(wb.kernels.hgemm(a, b, variant="mma"))
    assert wb.kernels.last_variant("hgemm").startswith("mma.sync")
    np.testing.assert_allclose(first, portable, rtol=1e-4, atol=1e-3)
