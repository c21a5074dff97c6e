"""The elementwise kernels' paths (``cu/elementwise.cu``): four vectors a thread for
one input and two for two or three, at sizes that end anywhere in a step and on
unaligned views; the activations' short forms (softplus's series, the divisions
by a reciprocal) over their whole range; and the multiply-add chain kernel, whose
loads run one step ahead of its arithmetic.

Tolerances against float64 NumPy: the activations ``rtol 1e-5`` (a few float ulp:
the GPU's exponential, the 2-ulp reciprocal, the series) with ``atol 1e-36`` for
the far tails, where exp overflows float and x / (1 + exp) gives 0 for ~1e-37;
the chain ``rtol 1e-5`` (NumPy's reference rounds after each multiply, the
kernel's FMA once).
"""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking.checks import compare_arrays
from workbench.kernels import library

SPECS = library.specs()
#: float64 forms without cancellation (1 + tanh(u) loses the far negative tail)
F64 = {
    "softplus": lambda x: np.logaddexp(0.0, x),
    "gelu": lambda x: x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
}


@pytest.mark.parametrize("name", sorted(F64))
def test_activations_over_their_whole_range(backend, name):
    x = np.concatenate([np.linspace(-120, 120, 4001), [-np.inf, np.inf, 0.0, -0.0, 1e-30, -1e-30],
                        np.random.default_rng(1).standard_normal(1003) * 8]).astype(np.float32)
    got = wb.to_host(getattr(wb.kernels, name)(wb.to_device(x)))
    with np.errstate(all="ignore"):
        expected = F64[name](x.astype(np.float64))
    both_nan = np.isnan(got) & np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=name)
    # atol: a GPU's expf gives 0 below float's smallest normal (1.18e-38), so silu(x) for
    # x < -87.3 is 0 where float64 gives up to |x| * 1.18e-38, about 1.03e-36
    np.testing.assert_allclose(got[~both_nan], expected[~both_nan], rtol=1e-5, atol=2e-36,
                               err_msg=name)
    nan = wb.to_host(getattr(wb.kernels, name)(wb.to_device(np.full(5, np.nan, np.float32))))
    assert np.isnan(nan).all()


@pytest.mark.parametrize("size", [5, 4 * 4 * 256 + 3, 1000003])
@pytest.mark.parametrize("name", ["scale", "softplus", "add", "axpy", "fma"])
def test_map_kernel_at_sizes_ending_anywhere_in_a_step(backend, name, size):
    spec = SPECS[name]
    args, _ = spec.example(size, "float32", np.random.default_rng(size))
    device = [wb.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    got = wb.to_host(spec.function(*device))
    compare_arrays(got, spec.reference(*args), rtol=1e-5, atol=1e-6, what=f"{name} {size}")


@pytest.mark.parametrize("name", ["softplus", "add", "fma"])
def test_map_kernel_on_unaligned_views(backend, name):
    """A view one float into an allocation: the scalar loop, the same results."""
    spec = SPECS[name]
    args, _ = spec.example(4099, "float32", np.random.default_rng(2))
    device = []
    for a in args:
        if isinstance(a, np.ndarray):
            flat = wb.to_device(np.concatenate([[0], a]).astype(a.dtype))
            device.append(flat[1:])
        else:
            device.append(a)
    got = wb.to_host(spec.function(*device))
    compare_arrays(got, spec.reference(*args), rtol=1e-5, atol=1e-6, what=f"{name} unaligned")


@pytest.mark.parametrize("steps", [0, 1, 5, 64, 67])
@pytest.mark.parametrize("size", [1, 33, 4 * 4 * 256 * 3 + 5, 1000003])
def test_fma_chain_at_any_length_and_size(backend, steps, size):
    x = np.random.default_rng(steps + size).uniform(-1, 1, size).astype(np.float32)
    got = wb.to_host(wb.kernels.fma_chain(wb.to_device(x), 0.5, 0.25, steps))
    expected = SPECS["fma_chain"].reference(x.astype(np.float64), 0.5, 0.25, steps)
    compare_arrays(got, expected.astype(np.float32), rtol=1e-5, atol=1e-6,
                   what=f"fma_chain steps={steps} size={size}")


def test_fma_chain_on_an_unaligned_view_and_in_double(backend):
    x = np.random.default_rng(3).uniform(-1, 1, 5001)
    flat = wb.to_device(np.concatenate([[0], x]).astype(np.float32))
    got = wb.to_host(wb.kernels.fma_chain(flat[1:], 0.9, 0.1, 9))
    expected = SPECS["fma_chain"].reference(x, 0.9, 0.1, 9)
    compare_arrays(got, expected.astype(np.float32), rtol=1e-5, atol=1e-6, what="unaligned")
    got = wb.to_host(wb.kernels.fma_chain(wb.to_device(x), 0.9, 0.1, 9))
    compare_arrays(got, expected, rtol=1e-12, atol=1e-14, what="double")
