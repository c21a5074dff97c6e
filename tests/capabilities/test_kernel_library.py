"""The kernel library (``wb.kernels``): every kernel against its NumPy
reference on every backend, awkward sizes, clear errors, the catalog, the
source view and the CPU baselines."""
from __future__ import annotations

import subprocess
import sys
from importlib import resources

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking.checks import compare_arrays
from workbench.kernels import library
from workbench.kernels.baselines import device_args

from helpers import new_timings

SPECS = library.specs()
CASES = [(name, dtype) for name, spec in SPECS.items() for dtype in spec.dtypes]
SIZES = (0, 1, 31, 33, 1000)
#: Kernels also run on 1000003 elements (not a multiple of any block or vector width).
LARGE = ("relu", "axpy", "gelu", "sum", "max", "argmax", "dot")


def run_case(spec, dtype, size, seed=0):
    """(result on the device, reference) for ``spec``'s example of ``size``,
    or None when the example does not take that size."""
    try:
        args, _ = spec.example(size, dtype, np.random.default_rng(seed))
    except ValueError:
        return None
    try:
        expected = spec.reference(*args)
    except ValueError:  # no result, e.g. the max of nothing: the kernel must refuse too
        with pytest.raises(ValueError):
            spec.function(*device_args(args))
        return None
    return wb.to_host(spec.function(*device_args(args))), np.asarray(expected)


def check_case(spec, dtype, size):
    case = run_case(spec, dtype, size)
    if case is None:
        return
    got, expected = case
    assert got.shape == expected.shape, (spec.name, dtype, size)
    assert got.dtype == expected.dtype, (spec.name, dtype, size)
    compare_arrays(got, expected, rtol=spec.rtol, atol=spec.atol,
                   what=f"{spec.name} {dtype} size {size}")


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_kernel_matches_reference(backend, name, dtype):
    spec = SPECS[name]
    for size in SIZES:
        check_case(spec, dtype, size)


@pytest.mark.parametrize("name", LARGE)
def test_kernel_matches_reference_on_a_large_awkward_size(backend, name):
    check_case(SPECS[name], "float32", 1000003)


@pytest.mark.parametrize("shape", [(3, 1025), (2, 5000), (1, 40000), (7, 33), (5, 1), (2, 3, 70)])
def test_rowwise_kernels_on_short_and_long_rows(backend, shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    for name in ("softmax", "log_softmax"):
        got = wb.to_host(getattr(wb.kernels, name)(wb.to_device(x)))
        compare_arrays(got, SPECS[name].reference(x), rtol=1e-4, atol=1e-6, what=name)
    gamma, beta = rng.standard_normal((2, shape[-1])).astype(np.float32)
    got = wb.to_host(wb.kernels.layer_norm(*device_args((x, gamma, beta))))
    compare_arrays(got, SPECS["layer_norm"].reference(x, gamma, beta), rtol=1e-4, atol=1e-4,
                   what="layer_norm")
    if len(shape) == 2:
        targets = rng.integers(0, shape[1], shape[0]).astype(np.int32)
        got = wb.to_host(wb.kernels.cross_entropy(*device_args((x, targets))))
        compare_arrays(got, SPECS["cross_entropy"].reference(x, targets), rtol=1e-5, atol=1e-5,
                       what="cross_entropy")


@pytest.mark.parametrize("cols", [1025, 2048, 20000, 33000])
def test_softmax_paths_for_long_rows_in_both_dtypes(backend, cols):
    """Rows in registers (float32 up to 32768 columns, float64 up to 16384; staged
    through shared memory over 4k floats or 2k doubles) and the online one-pass
    kernel beyond."""
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((3, cols)) * 4).astype(dtype)
        for name in ("softmax", "log_softmax"):
            got = wb.to_host(getattr(wb.kernels, name)(wb.to_device(x)))
            compare_arrays(got, SPECS[name].reference(x), rtol=None, atol=None, what=name)


def test_softmax_rows_sum_to_one_and_survive_large_values(backend):
    x = np.array([[1000.0, 1000.0, -1000.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    y = wb.to_host(wb.kernels.softmax(wb.to_device(x)))
    np.testing.assert_allclose(y, [[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)


def test_cross_entropy_target_out_of_range_is_nan(backend):
    logits = wb.to_device(np.zeros((2, 4), dtype=np.float32))
    losses = wb.to_host(wb.kernels.cross_entropy(logits, wb.to_device(np.array([1, 4]))))
    assert np.isclose(losses[0], np.log(4)) and np.isnan(losses[1])


@pytest.mark.parametrize("shape", [(1, 1), (31, 33), (33, 31), (64, 64), (100, 7), (0, 3),
                                   (128, 130), (65, 129), (200, 256)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transpose_shapes(backend, shape, dtype):
    # whole 64x64 tiles (the paired path), cut tiles and odd sides (the element path)
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    got = wb.to_host(wb.kernels.transpose(wb.to_device(x)))
    assert got.shape == x.T.shape and np.array_equal(got, x.T)


def test_transpose_misaligned_view_and_64_bit_indices(backend):
    from workbench.kernels import library
    x = np.random.default_rng(8).standard_normal(1 + 64 * 128).astype(np.float32)
    view = wb.to_device(x)[1:].reshape(64, 128)  # one element past a pair boundary
    assert np.array_equal(wb.to_host(wb.kernels.transpose(view)), x[1:].reshape(64, 128).T)
    # the long long instantiation (chosen for 2^31 elements and more) on a small array
    a = wb.to_device(x[:64 * 128].reshape(128, 64))
    out = wb.to_device(np.zeros((64, 128), dtype=np.float32))
    library.module("transpose")["transpose_kernel<float, long long>"](a, out, 128, 64, 1, grid=2,
                                                                      block=(32, 8))
    assert np.array_equal(wb.to_host(out), x[:64 * 128].reshape(128, 64).T)


def test_reductions_propagate_nan_and_pick_the_first_maximum(backend):
    x = np.array([1.0, 5.0, 2.0, 5.0, -3.0] * 20, dtype=np.float32)
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(x)))) == 1
    x[57] = x[91] = np.nan
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(x)))) == np.argmax(x) == 57
    assert np.isnan(wb.to_host(wb.kernels.max(wb.to_device(x))))
    assert np.isnan(wb.to_host(wb.kernels.min(wb.to_device(x))))


def test_unaligned_views_take_the_scalar_path(backend):
    x = np.random.default_rng(2).standard_normal(1001).astype(np.float32)
    d = wb.to_device(x)[1:]  # 4 bytes past a 16-byte boundary
    np.testing.assert_array_equal(wb.to_host(wb.kernels.relu(d)), np.maximum(x[1:], 0))
    np.testing.assert_allclose(wb.to_host(wb.kernels.sum(d)), x[1:].astype(np.float64).sum(),
                               rtol=1e-5)


def test_clear_errors_for_wrong_arguments(backend):
    x = wb.to_device(np.ones(8, dtype=np.float32))
    with pytest.raises(wb.KernelArgumentError, match="host NumPy array.*wb.to_device"):
        wb.kernels.relu(np.ones(8, dtype=np.float32))
    with pytest.raises(wb.KernelArgumentError, match="float32 or float64, got int32.*astype"):
        wb.kernels.relu(wb.to_device(np.ones(8, dtype=np.int32)))
    with pytest.raises(wb.KernelArgumentError, match="same dtype"):
        wb.kernels.add(x, wb.to_device(np.ones(8)))
    with pytest.raises(wb.KernelArgumentError, match="same shape"):
        wb.kernels.add(x, wb.to_device(np.ones(9, dtype=np.float32)))
    with pytest.raises(wb.KernelArgumentError, match="as many"):
        wb.kernels.dot(x, wb.to_device(np.ones(9, dtype=np.float32)))
    with pytest.raises(wb.KernelArgumentError, match="strided view"):
        wb.kernels.relu(wb.to_device(np.ones((4, 4), dtype=np.float32))[:, 1])
    with pytest.raises(wb.KernelArgumentError, match="2 dimensions"):
        wb.kernels.transpose(x)
    with pytest.raises(wb.KernelArgumentError, match=r"shape \(8,\)"):
        wb.kernels.layer_norm(x.reshape(2, 4), x, x[:4])
    with pytest.raises(wb.KernelArgumentError, match="one class per row"):
        wb.kernels.cross_entropy(x.reshape(2, 4), wb.to_device(np.zeros(3, dtype=np.int64)))
    with pytest.raises(ValueError, match="no identity"):
        wb.kernels.max(wb.to_device(np.ones(0, dtype=np.float32)))
    with pytest.raises(ValueError, match="steps"):
        wb.kernels.fma_chain(x, 1.0, 1.0, -1)


def test_launches_are_timed_and_the_module_is_registered(backend):
    x = wb.to_device(np.ones(100, dtype=np.float32))
    with new_timings() as added:
        wb.kernels.sigmoid(x)
    assert len(added.frame) >= 1
    compiled = library.module("elementwise")
    assert compiled is library.module("elementwise")
    assert wb.modules["wb.kernels.elementwise"] is compiled
    assert "map_kernel<float, 14>" in compiled.kernel_names()
    assert "fma_chain_kernel<float>" in compiled.kernel_names()


def test_catalog_lists_every_kernel_with_its_roofline_numbers():
    table = wb.kernels.catalog()
    names = {row["name"] for row in table.rows()}
    assert {"relu", "gelu", "gelu_erf", "sum", "argmax", "softmax", "transpose"} <= names
    assert "sum" in repr(table) and "<table>" in table._repr_html_()
    frame = table.to_pandas()
    assert list(frame.columns)[:5] == ["name", "family", "dtypes", "bytes/element", "FLOPs/element"]
    assert len(wb.kernels.catalog("reductions")) == 7
    with pytest.raises(ValueError, match="no kernel family"):
        wb.kernels.catalog("nonsense")


def test_source_shows_the_cuda_file():
    src = wb.kernels.source("relu")
    assert "map_kernel" in str(src) and src.family == "elementwise"
    assert "<span" in src._repr_html_()  # highlighted
    assert str(wb.kernels.source("reductions")) == library.source_text("reductions")
    with pytest.raises(ValueError, match="catalog"):
        wb.kernels.source("nonsense")


def test_baseline_times_kernel_library_and_numpy_for_the_report(backend):
    result = wb.kernels.baseline("relu", 4096, max_time=0.01)
    assert [r.params["variant"] for r in result.results] == ["workbench", "library", "numpy"]
    (row,) = result.speedups()
    assert row["speedup_vs_numpy"] > 0 and row["speedup_vs_library"] > 0
    report = wb.report().rows()
    assert {"relu", "relu (library)", "relu (numpy)"} <= {r["name"] for r in report}
    assert "x vs numpy" in result._repr_html_()


def test_every_family_ships_its_cu_file():
    shipped = {p.name for p in (resources.files("workbench.kernels") / "cu").iterdir()}
    assert {f"{family}.cu" for family in library.families()} <= shipped
    assert {"elementwise.cu", "reductions.cu", "rowwise.cu", "transpose.cu"} <= shipped


def test_import_compiles_nothing():
    code = ("import workbench as wb; wb.kernels.catalog(); wb.kernels.relu; "
            "from workbench.runtime.session import session; "
            "assert not session().modules and session().backend is None, session().modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("cols", [16400, 32768])
def test_long_rows_streamed_through_shared_memory(backend, cols):
    """Rows of 16k to 32k floats: 512 threads a row, the block's next rows staged in
    shared memory while this one is reduced; more rows than blocks, so each block
    takes several."""
    rng = np.random.default_rng(4)
    rows = 2 * library.multiprocessors() + 3
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    gamma, beta = rng.standard_normal((2, cols)).astype(np.float32)
    targets = rng.integers(0, cols, rows)
    cases = (("softmax", (x,)), ("log_softmax", (x,)), ("layer_norm", (x, gamma, beta)),
             ("cross_entropy", (x, targets)))
    for name, args in cases:
        got = wb.to_host(getattr(wb.kernels, name)(*device_args(args)))
        compare_arrays(got, SPECS[name].reference(*args), rtol=1e-4, atol=1e-5, what=name)


@pytest.mark.parametrize("cols", [1, 7, 100, 1023, 4093])
def test_rows_of_any_width_take_the_element_path(backend, cols):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((9, cols)) * 2).astype(np.float32)
    gamma, beta = rng.standard_normal((2, cols)).astype(np.float32)
    got = wb.to_host(wb.kernels.layer_norm(*device_args((x, gamma, beta))))
    compare_arrays(got, SPECS["layer_norm"].reference(x, gamma, beta), rtol=1e-4, atol=1e-4,
                   what="layer_norm")
    got = wb.to_host(wb.kernels.softmax(wb.to_device(x)))
    compare_arrays(got, SPECS["softmax"].reference(x), rtol=1e-4, atol=1e-6, what="softmax")


def test_argmax_vector_path_keeps_the_first_of_ties_and_of_nans(backend):
    n = 4 * 3000 + 3
    x = np.full(n, -np.inf, dtype=np.float32)
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(x)))) == 0   # all -inf: the first
    x[[5001, 9002, 7]] = 2.0                                            # ties in other components
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(x)))) == 7
    x[[11000, 6003]] = np.nan
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(x)))) == 6003
    y = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    assert int(wb.to_host(wb.kernels.argmax(wb.to_device(y)))) == int(np.argmax(y))


@pytest.mark.parametrize("kernel_size,stride,padding", [(2, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 1),
                                                        ((3, 2), (1, 2), (1, 0)), (5, 3, 2)])
def test_pooling_windows_inside_and_at_the_edges(backend, kernel_size, stride, padding):
    x = np.random.default_rng(7).standard_normal((2, 3, 37, 45)).astype(np.float32)
    for name in ("max_pool2d", "avg_pool2d"):
        got = wb.to_host(getattr(wb.kernels, name)(wb.to_device(x), kernel_size, stride, padding))
        expected = SPECS[name].reference(x, kernel_size, stride, padding)
        compare_arrays(got, expected, rtol=1e-5, atol=1e-6, what=f"{name} {kernel_size}")
