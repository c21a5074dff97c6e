"""The row-wise kernels' paths (``cu/rowwise.cu``): the staged kernel (rows
streamed through a ring of shared-memory stages by the copy engine, imitated on
the simulator) at every layout and stage count, with its ring wrapping around
many times; the register kernel for rows it does not take; special values; and
the staged kernels' build for sm_90 with real NVRTC.

Tolerances against float64 NumPy: float32 ``rtol 1e-4`` (softmax's exponentials
rescaled once more than the reference's), float64 ``1e-10``.
"""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.contract import CompileOptions
from workbench.benchmarking.checks import compare_arrays
from workbench.kernels import library, rowwise
from workbench.kernels.baselines import device_args

SPECS = library.specs()
STAGED = rowwise._VARIANTS["staged"]
REGISTERS = rowwise._VARIANTS["registers"]
STREAM = rowwise._VARIANTS["stream"]
TOLERANCE = {np.float32: (1e-4, 1e-5), np.float64: (1e-10, 1e-12)}


def _all_ops(x, rng):
    """(name, args) of the four row kernels over ``x``."""
    cols = x.shape[-1]
    gamma, beta = rng.standard_normal((2, cols)).astype(x.dtype)
    targets = rng.integers(0, cols, x.shape[0])
    return (("softmax", (x,)), ("log_softmax", (x,)), ("layer_norm", (x, gamma, beta)),
            ("cross_entropy", (x, targets)))


def _expected_variant(name, x, variant):
    """Cross-entropy, a read-only stream, takes the warp-stream kernel on whole
    16-byte vectors and never the staged one."""
    if name != "cross_entropy":
        return variant
    if x.shape[-1] % (16 // x.dtype.itemsize) == 0:
        return STREAM
    return REGISTERS if variant == STAGED else variant


def _check(name, args, variant):
    """``name`` over ``args`` against NumPy, run by ``variant`` (see _expected_variant)."""
    got = wb.to_host(getattr(wb.kernels, name)(*device_args(args)))
    expected = _expected_variant(name, args[0], variant)
    assert wb.kernels.last_variant(name) == expected, name
    rtol, atol = TOLERANCE[args[0].dtype.type]
    compare_arrays(got, SPECS[name].reference(*args), rtol=rtol, atol=atol,
                   what=f"{name} {args[0].shape} {args[0].dtype}")


@pytest.mark.parametrize("cols,dtype,ring", [
    (2052, np.float32, 40_000),    # 513 vectors: layer norm (256, 4), 2 stages; the rest in registers
    (4100, np.float32, None),      # 1025 vectors: (256, 8), most of the last vectors empty
    (6000, np.float32, None),      # (256, 8), a part-filled last column of vectors
    (8192, np.float32, 140_000),   # (256, 8), 2 stages
    (8200, np.float32, 70_000),    # (512, 8), 2 stages
    (16384, np.float32, 70_000),   # (512, 8), 1 stage: the row after waits on the same one
    (2050, np.float64, None),      # doubles: 1025 vectors, 6 stages
    (8192, np.float64, 140_000),   # (512, 8), 2 stages
])
def test_staged_rows_match_numpy_as_the_ring_wraps(backend, monkeypatch, cols, dtype, ring):
    """Two or one blocks in all (one multiprocessor), so each block takes many rows
    and its ring of stages wraps around several times (the waits' parity flips)."""
    monkeypatch.setattr(rowwise, "multiprocessors", lambda: 1)
    if ring is not None:
        monkeypatch.setattr(rowwise, "_RING_BYTES", ring)
    threads, vpt, per_sm, stages = rowwise.staged_layout(cols, dtype, rowwise._LAYER_NORM)
    rows = per_sm * (2 * stages + 1) + 1          # not a multiple of the grid
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((rows, cols)) * 3).astype(dtype)
    for name, args in _all_ops(x, rng):
        staged = rowwise.staged_layout(cols, dtype, rowwise._NAMES.index(name))
        _check(name, args, STAGED if staged else REGISTERS)


def test_staged_rows_with_fewer_rows_than_blocks(backend):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 8192)) * 3).astype(np.float32)
    for name, args in _all_ops(x, rng):
        _check(name, args, STAGED)



def test_rows_of_4096_floats_are_staged_for_layer_norm_alone(backend):
    """At 4096 floats the register kernel is the faster for softmax, log-softmax
    and cross-entropy, the staged one for layer norm (which holds its registers
    through two passes); both give NumPy's results."""
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((5, 4096)) * 3).astype(np.float32)
    for name, args in _all_ops(x, rng):
        _check(name, args, STAGED if name == "layer_norm" else REGISTERS)
    assert rowwise.staged_layout(4096, np.float32, rowwise._LAYER_NORM) == (256, 4, 2, 6)

def test_rows_the_staged_kernel_does_not_take(backend):
    """Unaligned rows (a view one float into an allocation), widths that are no
    whole number of 16-byte vectors, rows of 2048 floats or fewer (4096 or fewer but
    for layer norm: above) and rows of more than 16384 floats run the register
    kernel, with the same results."""
    rng = np.random.default_rng(12)
    flat = wb.to_device((rng.standard_normal(5 * 4096 + 1) * 3).astype(np.float32))
    x = flat[1:].reshape(5, 4096)
    got = wb.to_host(wb.kernels.softmax(x))
    assert wb.kernels.last_variant("softmax") == REGISTERS
    compare_arrays(got, SPECS["softmax"].reference(wb.to_host(x)), rtol=1e-4, atol=1e-6,
                   what="softmax, unaligned rows")
    for cols in (4097, 2048, 16388, 32768):
        x = (rng.standard_normal((4, cols)) * 3).astype(np.float32)
        for name, args in _all_ops(x, rng):
            _check(name, args, REGISTERS)


@pytest.mark.parametrize("cols,dtype", [
    (1024, np.float32),    # 256 vectors: one chunk of 32 lanes x 8 exactly
    (1028, np.float32),    # 257: a second chunk with one vector
    (4, np.float32),       # one vector: 31 lanes hold only -inf
    (70_000, np.float32),  # longer than any register layout
    (4098, np.float64),    # doubles: 2049 vectors
])
def test_cross_entropy_streams_rows_of_any_length(backend, cols, dtype):
    rng = np.random.default_rng(cols)
    rows = 37                                      # not a multiple of a block's 8 warps
    x = (rng.standard_normal((rows, cols)) * 3).astype(dtype)
    _check("cross_entropy", (x, rng.integers(0, cols, rows)), STREAM)


@pytest.mark.parametrize("cols", [2052, 4096, 1000])
def test_special_values_in_rows(backend, cols):
    """A row of -inf everywhere but one value (most threads hold only -inf), a row of
    -inf alone (NaN, as NumPy), large values, and a NaN (a row of NaN)."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    x[0] = -np.inf
    x[0, cols - 1] = 2.0
    x[1] = -np.inf
    x[2] *= 1e4
    x[3, 17] = np.nan
    with np.errstate(invalid="ignore"):
        for name in ("softmax", "log_softmax"):
            got = wb.to_host(getattr(wb.kernels, name)(wb.to_device(x)))
            expected = SPECS[name].reference(x)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=name)
            keep = ~np.isnan(expected)
            np.testing.assert_allclose(got[keep], expected[keep], rtol=1e-4, atol=1e-6,
                                       err_msg=name)
    targets = np.array([cols - 1, 0, 5, 1, cols])          # the last is out of range
    losses = wb.to_host(wb.kernels.cross_entropy(*device_args((x, targets))))
    assert np.isclose(losses[0], 0.0, atol=1e-6) and np.isnan(losses[1])
    assert np.isnan(losses[3]) and np.isnan(losses[4])
    expected = SPECS["cross_entropy"].reference(x[2:3], targets[2:3])
    np.testing.assert_allclose(losses[2], expected[0], rtol=1e-5)


def test_layer_norm_of_rows_with_a_large_offset(backend):
    """The per-thread moments merge by Chan's formula: a mean of 1e4 over unit noise
    keeps the variance (sums of squares would lose it in float32)."""
    rng = np.random.default_rng(14)
    cols = 8192
    x = (1e4 + rng.standard_normal((6, cols))).astype(np.float32)
    gamma, beta = np.ones(cols, np.float32), np.zeros(cols, np.float32)
    got = wb.to_host(wb.kernels.layer_norm(*device_args((x, gamma, beta))))
    compare_arrays(got, SPECS["layer_norm"].reference(x, gamma, beta), rtol=1e-3, atol=2e-3,
                   what="layer_norm, offset rows")


def test_staged_layouts_of_the_benchmark_widths():
    assert rowwise.staged_layout(8192, np.float32) == (256, 8, 2, 3)
    assert rowwise.staged_layout(16384, np.float32) == (512, 8, 1, 3)
    assert rowwise.staged_layout(8192, np.float64) == (512, 8, 1, 3)
    assert rowwise.staged_layout(32768, np.float32) is None    # the register kernel's
    assert rowwise.staged_layout(16384, np.float64) is None
    assert rowwise.staged_layout(4096, np.float32) is None     # the register kernel's
    assert rowwise.staged_layout(2048, np.float32) is None
    assert rowwise.staged_layout(4094, np.float32) is None     # not whole vectors
    assert rowwise.staged_layout(32772, np.float32) is None    # past the registers


@pytest.fixture(scope="module")
def sm90_build():
    from workbench.backends.nvrtc import bindings
    from workbench.backends.nvrtc.check import check_with_nvrtc
    if bindings.library() is None:
        pytest.skip("NVRTC is not installed")
    names = tuple(n for n in rowwise.INSTANTIATE if n.startswith("rowwise_staged_kernel"))
    return check_with_nvrtc(library.source_text("rowwise"), CompileOptions(name_expressions=names),
                            [], arch="sm_90")


def test_staged_kernels_build_for_sm90_without_spills(sm90_build):
    assert len(sm90_build.resources) == 24
    for name, r in sm90_build.resources.items():
        assert r.local_bytes == 0, name
        assert r.registers <= 128, name   # two blocks of 256 or one of 512 threads an SM
    for instruction in ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                        "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity"):
        assert instruction in sm90_build.ptx, instruction
