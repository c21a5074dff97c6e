"""Fused attention (``wb.kernels.attention``) against float64 NumPy on every
backend (the simulator runs one query row per thread, the GPU the tensor-core
kernel), half and bfloat16, causal and not, head dims 64 and 128, sequences
that are not multiples of the 128-row or 64-key tiles, Sq != Sk.

Tolerances, absolute, on outputs of magnitude about 1 (weighted means of
standard normal values): half 3e-3 (the output's rounding, and on the GPU P
rounded to half before P V), bfloat16 2e-2 (eight bits of mantissa).
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import workbench as wb
from workbench.kernels import matmul

attention = importlib.import_module("workbench.kernels.attention")
rng = np.random.default_rng(20261125)
TOLERANCE = {"float16": 3e-3, "bfloat16": 2e-2}


def _inputs(shape_q, shape_k, inputs):
    made = [rng.standard_normal(s) for s in (shape_q, shape_k, shape_k)]
    if inputs == "float16":
        return [m.astype(np.float16) for m in made]
    return [matmul.bfloat16_bits(m) for m in made]


def _check(shape_q, shape_k, inputs, causal, scale=None):
    q, k, v = _inputs(shape_q, shape_k, inputs)
    out = attention.attention(*(wb.to_device(a) for a in (q, k, v)), causal=causal,
                              scale=scale, inputs=inputs)
    got = wb.to_host(out)
    assert got.shape == q.shape and got.dtype == q.dtype
    got = matmul.bfloat16_values(got) if inputs == "bfloat16" else got.astype(np.float64)
    expected = attention.attention_reference(q, k, v, causal, scale, inputs)
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE[inputs])


@pytest.mark.parametrize("inputs", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_matches_float64(backend, inputs, causal, D):
    _check((2, 1, 37, D), (2, 1, 29, D), inputs, causal)      # Sq > Sk, neither a tile multiple
    _check((1, 2, 70, D), (1, 2, 131, D), inputs, causal)     # Sk spans three key tiles


@pytest.mark.parametrize("causal", [False, True])
def test_attention_on_three_query_blocks_and_a_custom_scale(backend, causal):
    _check((3, 300, 64), (3, 300, 64), "float16", causal, scale=0.3)


@pytest.mark.gpu
@pytest.mark.parametrize("inputs", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_on_long_awkward_sequences(backend, inputs, causal):
    _check((2, 3, 1000, 128), (2, 3, 1000, 128), inputs, causal)
    _check((1, 1, 515, 64), (1, 1, 2049, 64), inputs, causal)


def test_attention_rows_sum_like_a_softmax(backend):
    """Every row of V equal: whatever the weights, each output row is that row."""
    q, k = (wb.to_device(rng.standard_normal((1, 200, 64)).astype(np.float16)) for _ in range(2))
    row = rng.standard_normal(64).astype(np.float16)
    v = wb.to_device(np.tile(row, (1, 200, 1)))
    got = wb.to_host(attention.attention(q, k, v, causal=True))
    np.testing.assert_allclose(got.astype(np.float64), np.broadcast_to(row, got.shape), atol=2e-3)


def test_attention_errors_say_what_is_wrong(backend):
    x = wb.to_device(np.zeros((1, 8, 64), dtype=np.float16))
    with pytest.raises(wb.KernelArgumentError, match="head dimension.*64 or 128"):
        attention.attention(*(wb.to_device(np.zeros((1, 8, 32), np.float16)),) * 3)
    with pytest.raises(wb.KernelArgumentError, match="do not fit"):
        attention.attention(x, wb.to_device(np.zeros((2, 8, 64), np.float16)), x)
    with pytest.raises(wb.KernelArgumentError, match="must be uint16"):
        attention.attention(x, x, x, inputs="bfloat16")
    with pytest.raises(ValueError, match="no keys"):
        empty = wb.to_device(np.zeros((1, 0, 64), np.float16))
        attention.attention(x, empty, empty)
    with pytest.raises(ValueError, match="inputs is"):
        attention.attention(x, x, x, inputs="float32")
    assert wb.to_host(attention.attention(x[:, :0], x, x)).shape == (1, 0, 64)


def test_attention_is_in_the_catalog_with_its_variants():
    (row,) = wb.kernels.catalog("attention").rows()
    assert row["name"] == "attention" and "flash" in row["roofline"]
    assert "mma.sync" in row["description"] and "online softmax" in row["description"]
