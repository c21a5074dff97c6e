"""The machine-learning families of ``wb.kernels`` (matmul, conv, pooling,
batchnorm, dropout, optim) against their NumPy references, on every backend
(the ``backend`` fixture: the simulator everywhere, the GPU where there is
one), with awkward sizes, empty and one-element inputs, and the errors for
wrong arguments.

Tolerances: float32 results against float64 references, ``rtol=1e-4`` and an
absolute term that grows with the length of the sums (sqrt of the terms
added, times 1e-5); float64 ``1e-10``; half-input products (exact products
of halves, float32 sums) ``1e-3``. Dropout masks are compared exactly.
"""
import importlib

import numpy as np
import pytest

import workbench as wb
from workbench.kernels import batchnorm, conv, matmul, optim, pooling

# the module: the package attribute ``dropout`` is the kernel function
dropout = importlib.import_module("workbench.kernels.dropout")

rng = np.random.default_rng(20261123)


def _dev(a):
    return wb.to_device(np.ascontiguousarray(a))


def _close(result, expected, terms=1, dtype=np.float32):
    if np.dtype(dtype) == np.float64:
        rtol, atol = 1e-10, 1e-10
    else:
        rtol, atol = 1e-4, 1e-5 * np.sqrt(max(terms, 1)) * max(1.0, float(np.abs(expected).max(initial=0)))
    assert result.shape == expected.shape
    np.testing.assert_allclose(result, expected, rtol=rtol, atol=atol)


# -- matmul --------------------------------------------------------------------

MATMUL_SHAPES = [(33, 47, 29), (1, 1, 1), (0, 5, 3), (4, 0, 3), (5, 4, 0),
                 (130, 132, 64),   # vector loads, two block tiles each way, partial ones
                 (17, 136, 40),    # multiples of 8 (the tensor-core kernel's vector path)
                 (3, 5, 37)]       # K spans several slices with a partial last one


@pytest.mark.parametrize("M,N,K", MATMUL_SHAPES)
def test_sgemm_matches_numpy(backend, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = matmul.sgemm(_dev(a), _dev(b))
    assert c.dtype == np.float32 and tuple(c.shape) == (M, N)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    _close(wb.to_host(c), expected, terms=K)


@pytest.mark.parametrize("M,N,K", MATMUL_SHAPES)
def test_hgemm_matches_numpy(backend, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = matmul.hgemm(_dev(a), _dev(b))
    assert c.dtype == np.float32 and tuple(c.shape) == (M, N)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(wb.to_host(c), expected, rtol=1e-3, atol=1e-3 * np.sqrt(max(K, 1)))


@pytest.mark.parametrize("M,N,K", [(33, 47, 29), (17, 136, 40), (1, 1, 1)])
def test_hgemm_bfloat16_matches_numpy(backend, M, N, K):
    a = matmul.bfloat16_bits(rng.standard_normal((M, K)))
    b = matmul.bfloat16_bits(rng.standard_normal((K, N)))
    c = matmul.hgemm(_dev(a), _dev(b), inputs="bfloat16")
    expected = (matmul.bfloat16_values(a).astype(np.float64)
                @ matmul.bfloat16_values(b).astype(np.float64))
    np.testing.assert_allclose(wb.to_host(c), expected, rtol=1e-3, atol=1e-3 * np.sqrt(K))


def test_bfloat16_bits_round_to_nearest_even():
    values = np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -2.5, 0.0], np.float32)
    np.testing.assert_array_equal(matmul.bfloat16_values(matmul.bfloat16_bits(values)),
                                  [1.0, 1.0, 1.0 + 2.0 ** -6, -2.5, 0.0])


def test_sgemm_writes_into_out_and_checks_it(backend):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    out = wb.to_device(np.zeros((6, 7), np.float32))
    assert matmul.sgemm(_dev(a), _dev(b), out=out) is out
    _close(wb.to_host(out), a.astype(np.float64) @ b, terms=5)
    with pytest.raises(wb.KernelArgumentError, match=r"out has shape \(6, 6\)"):
        matmul.sgemm(_dev(a), _dev(b), out=wb.to_device(np.zeros((6, 6), np.float32)))


def test_matmul_errors_say_what_is_wrong(backend):
    a = _dev(np.ones((3, 4), np.float32))
    with pytest.raises(wb.KernelArgumentError, match="columns of a .4. must equal the rows of b .5."):
        matmul.sgemm(a, _dev(np.ones((5, 2), np.float32)))
    with pytest.raises(wb.KernelArgumentError, match="must be float32, got float64"):
        matmul.sgemm(_dev(np.ones((3, 4))), _dev(np.ones((4, 2))))
    with pytest.raises(wb.KernelArgumentError, match="must be float16"):
        matmul.hgemm(a, a.T.copy())
    with pytest.raises(wb.KernelArgumentError, match="must be uint16"):
        matmul.hgemm(a, a.T.copy(), inputs="bfloat16")
    with pytest.raises(ValueError, match="'float16' or 'bfloat16'"):
        matmul.hgemm(a, a.T.copy(), inputs="fp8")
    with pytest.raises(wb.KernelArgumentError, match="host NumPy array"):
        matmul.sgemm(np.ones((3, 4), np.float32), a.T.copy())
    with pytest.raises(wb.KernelArgumentError, match="2 dimensions"):
        matmul.sgemm(_dev(np.ones(4, np.float32)), a)


# -- conv ------------------------------------------------------------------------

CONV_CASES = [  # (N, C, H, W), (K, R, S), stride, padding
    ((2, 3, 7, 9), (5, 3, 3), 1, 1),
    ((1, 1, 1, 1), (1, 3, 3), 1, 1),          # one pixel, all padding around it
    ((3, 4, 11, 10), (6, 3, 2), 2, 0),        # a filter size without a kernel of its own
    ((2, 5, 9, 9), (130, 1, 1), 1, 0),        # two blocks of output channels
    ((1, 6, 8, 7), (3, 5, 5), 3, 2),
    ((0, 3, 5, 5), (4, 3, 3), 1, 1),          # empty batch
    ((1, 0, 4, 4), (3, 3, 3), 1, 1),          # no input channels: zeros
]


@pytest.mark.parametrize("function", [conv.conv2d, conv.conv2d_im2col], ids=["direct", "im2col"])
@pytest.mark.parametrize("xshape,wshape,stride,padding", CONV_CASES)
def test_conv2d_matches_numpy(backend, function, xshape, wshape, stride, padding):
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((wshape[0], xshape[1]) + wshape[1:]).astype(np.float32)
    y = function(_dev(x), _dev(w), stride, padding)
    expected = conv.conv2d_reference(x, w, stride, padding)
    _close(wb.to_host(y), expected.astype(np.float64), terms=xshape[1] * wshape[1] * wshape[2])


def test_conv2d_errors(backend):
    x = _dev(np.ones((1, 3, 5, 5), np.float32))
    with pytest.raises(wb.KernelArgumentError, match="x has 3 channels"):
        conv.conv2d(x, _dev(np.ones((2, 4, 3, 3), np.float32)))
    with pytest.raises(ValueError, match="stride must be an int >= 1"):
        conv.conv2d(x, _dev(np.ones((2, 3, 3, 3), np.float32)), stride=0)
    with pytest.raises(ValueError, match="does not fit"):
        conv.conv2d_im2col(x, _dev(np.ones((2, 3, 7, 7), np.float32)))
    with pytest.raises(wb.KernelArgumentError, match="4 dimensions"):
        conv.conv2d(_dev(np.ones((3, 5, 5), np.float32)), _dev(np.ones((2, 3, 3, 3), np.float32)))


# -- pooling -----------------------------------------------------------------------

POOL_CASES = [  # shape, kernel, stride, padding
    ((2, 3, 9, 8), 3, 2, 1),
    ((1, 2, 7, 7), 2, None, 0),
    ((1, 1, 1, 1), 1, 1, 0),
    ((2, 2, 6, 11), (2, 3), (1, 2), (1, 1)),
    ((0, 2, 4, 4), 2, 2, 0),
    ((1, 2, 151, 70), 3, 2, 1),     # 76 output rows: patches of 32 rows, the last cut short
    ((2, 1, 100, 40), 2, 2, 0),     # 2 x 2 windows, four outputs a thread inside
    ((1, 1, 70, 9), 3, 1, 0),       # stride 1: neighbouring threads' windows overlap
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kernel,stride,padding", POOL_CASES)
def test_pooling_matches_numpy(backend, dtype, shape, kernel, stride, padding):
    x = rng.standard_normal(shape).astype(dtype)
    xd = _dev(x)
    np.testing.assert_array_equal(wb.to_host(pooling.max_pool2d(xd, kernel, stride, padding)),
                                  pooling.max_pool2d_reference(x, kernel, stride, padding))
    for include in (True, False):
        result = wb.to_host(pooling.avg_pool2d(xd, kernel, stride, padding, include))
        expected = pooling.avg_pool2d_reference(x, kernel, stride, padding, include)
        _close(result, expected.astype(np.float64), terms=9, dtype=dtype)


def test_max_pooling_lets_a_nan_win_inside_and_at_the_edges(backend):
    x = rng.standard_normal((1, 1, 90, 40)).astype(np.float32)
    x[0, 0, 41, 7] = np.nan      # inside: output rows 20, 21 and columns 3, 4 (stride 2, 3 x 3)
    x[0, 0, 0, 0] = np.nan       # the corner window reaches into the padding
    got = wb.to_host(pooling.max_pool2d(_dev(x), 3, 2, 1))
    expected = pooling.max_pool2d_reference(x, 3, 2, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(got).sum() == 5
    np.testing.assert_array_equal(got[~np.isnan(got)], expected[~np.isnan(expected)])


def test_pooling_errors(backend):
    x = _dev(np.ones((1, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="at most half the kernel size"):
        pooling.max_pool2d(x, 2, 1, 2)
    with pytest.raises(ValueError, match="kernel_size must be an int >= 1"):
        pooling.avg_pool2d(x, 0)
    with pytest.raises(wb.KernelArgumentError, match="must be float32 or float64, got int32"):
        pooling.max_pool2d(_dev(np.ones((1, 1, 4, 4), np.int32)), 2)


# -- batch norm ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (9, 5), (1, 2, 1, 1), (3, 1, 33, 1),
                                   (2, 2, 40, 41)])   # each channel split over two blocks
def test_batch_norm_training_and_inference(backend, dtype, shape):
    C = shape[1]
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    weight, bias = rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype)
    mean0, var0 = rng.standard_normal(C).astype(dtype), rng.random(C).astype(dtype) + 0.5
    rm, rv = _dev(mean0), _dev(var0)
    y = batchnorm.batch_norm(_dev(x), _dev(weight), _dev(bias), rm, rv, True, 0.2, 1e-5)
    terms = x.size // C
    _close(wb.to_host(y), batchnorm.batch_norm_reference(x, weight, bias, mean0, var0, True, 0.2,
                                                         1e-5).astype(np.float64), terms, dtype)
    new_mean, new_var = batchnorm.running_stats_reference(x, mean0, var0, 0.2)
    _close(wb.to_host(rm), new_mean.astype(np.float64), terms, dtype)
    _close(wb.to_host(rv), new_var.astype(np.float64), terms, dtype)

    y = batchnorm.batch_norm(_dev(x), _dev(weight), _dev(bias), rm, rv, training=False)
    expected = batchnorm.batch_norm_reference(x, weight, bias, new_mean, new_var, False)
    _close(wb.to_host(y), expected.astype(np.float64), 1, dtype)
    _close(wb.to_host(rm), new_mean.astype(np.float64), terms, dtype)   # inference leaves them


def test_batch_norm_errors(backend):
    x = _dev(np.ones((2, 3, 4, 4), np.float32))
    ones3 = _dev(np.ones(3, np.float32))
    with pytest.raises(wb.KernelArgumentError, match=r"weight has shape \(4,\).*must have shape \(3,\)"):
        batchnorm.batch_norm(x, _dev(np.ones(4, np.float32)), ones3, ones3, ones3)
    with pytest.raises(wb.KernelArgumentError, match="bias is float64 but x is float32"):
        batchnorm.batch_norm(x, ones3, _dev(np.ones(3)), ones3, ones3)
    with pytest.raises(ValueError, match="at least one value per channel"):
        batchnorm.batch_norm(_dev(np.ones((0, 3), np.float32)), ones3, ones3, ones3, ones3)


# -- dropout ---------------------------------------------------------------------------

def test_philox_known_answers():
    """The Random123 known-answer vectors of Philox-4x32-10."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
             ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
             ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for counter, key, expected in cases:
        words = dropout.philox4x32_10(np.array([counter[0]], np.uint64), np.array([counter[1]], np.uint64),
                                      counter[2] | counter[3] << 32, key[0] | key[1] << 32)
        assert tuple(int(v) for v in words[0]) == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 1001])
def test_dropout_mask_equals_the_numpy_philox(backend, dtype, n):
    x = rng.standard_normal(n).astype(dtype)
    seed, offset = (1 << 40) + 12345, 3
    y, mask = dropout.dropout(_dev(x), 0.3, seed, offset, return_mask=True)
    ey, emask = dropout.dropout_reference(x, 0.3, seed, offset, return_mask=True)
    np.testing.assert_array_equal(wb.to_host(mask), emask)
    np.testing.assert_array_equal(wb.to_host(y), ey)


def test_dropout_on_an_unaligned_view_takes_the_element_path(backend):
    x = rng.standard_normal(1002).astype(np.float32)
    y, mask = dropout.dropout(_dev(x)[1:], 0.4, 5, 1, return_mask=True)
    ey, emask = dropout.dropout_reference(x[1:], 0.4, 5, 1, return_mask=True)
    np.testing.assert_array_equal(wb.to_host(mask), emask)
    np.testing.assert_array_equal(wb.to_host(y), ey)


def test_dropout_statistics_and_limits(backend):
    x = np.ones((37, 53), np.float32)
    y, mask = dropout.dropout(_dev(x), 0.25, 7, 0, return_mask=True)
    kept = wb.to_host(mask).astype(bool)
    assert tuple(y.shape) == x.shape and abs(kept.mean() - 0.75) < 0.03
    np.testing.assert_allclose(wb.to_host(y)[kept], 1 / 0.75, rtol=1e-6)
    other = wb.to_host(dropout.dropout(_dev(x), 0.25, 7, 1, return_mask=True)[1])
    assert (other != wb.to_host(mask)).any()          # a new offset, a new mask
    np.testing.assert_array_equal(wb.to_host(dropout.dropout(_dev(x), 0.0, 7)), x)
    np.testing.assert_array_equal(wb.to_host(dropout.dropout(_dev(x), 1.0, 7)), 0 * x)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        dropout.dropout(_dev(x), 1.5)
    with pytest.raises(wb.KernelArgumentError, match="float32 or float64"):
        dropout.dropout(_dev(np.ones(4, np.int64)), 0.5)


# -- optimisers --------------------------------------------------------------------------

def _tensors(n, buffers):
    param = rng.standard_normal(n).astype(np.float32)
    state = [rng.standard_normal(n).astype(np.float32) * np.float32(0.1) for _ in range(buffers)]
    return param, state


@pytest.mark.parametrize("n", [0, 1, 1027])
@pytest.mark.parametrize("nesterov,weight_decay,dampening", [(False, 0.0, 0.0), (True, 1e-2, 0.0),
                                                             (False, 1e-3, 0.1)])
def test_sgd_momentum_steps(backend, n, nesterov, weight_decay, dampening):
    param, (buf,) = _tensors(n, 1)
    p, b = _dev(param), _dev(buf)
    for step in range(3):
        grad = rng.standard_normal(n).astype(np.float32)
        assert optim.sgd_momentum(p, _dev(grad), b, 0.05, 0.9, weight_decay, nesterov, dampening) is p
        param, buf = optim.sgd_momentum_state_reference(param, grad, buf, 0.05, 0.9, weight_decay,
                                                        nesterov, dampening)
    _close(wb.to_host(p), param.astype(np.float64), 3)
    _close(wb.to_host(b), buf.astype(np.float64), 3)


@pytest.mark.parametrize("n", [0, 1, 1027])
@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
def test_adam_steps(backend, n, decoupled):
    param, (m, v) = _tensors(n, 2)
    v = np.abs(v)
    p, md, vd = _dev(param), _dev(m), _dev(v)
    function = optim.adamw if decoupled else optim.adam
    for step in range(1, 4):
        grad = rng.standard_normal(n).astype(np.float32)
        function(p, _dev(grad), md, vd, step, 1e-2, (0.9, 0.99), 1e-8, 0.05)
        param, m, v = optim.adam_state_reference(param, grad, m, v, step, 1e-2, (0.9, 0.99), 1e-8,
                                                 0.05, decoupled)
    for result, expected in ((p, param), (md, m), (vd, v)):
        _close(wb.to_host(result), expected.astype(np.float64), 10)


def test_optimiser_errors(backend):
    p = _dev(np.ones(5, np.float32))
    with pytest.raises(wb.KernelArgumentError, match=r"grad has shape \(4,\) but param has shape \(5,\)"):
        optim.sgd_momentum(p, _dev(np.ones(4, np.float32)), _dev(np.ones(5, np.float32)), 0.1)
    with pytest.raises(wb.KernelArgumentError, match="grad must be float32, got float64"):
        optim.adam(p, _dev(np.ones(5)), p, p, 1)
    with pytest.raises(ValueError, match="counting from 1"):
        optim.adamw(p, p, p, p, 0)
    with pytest.raises(ValueError, match="Nesterov momentum needs momentum > 0"):
        optim.sgd_momentum(p, p, p, 0.1, momentum=0.0, nesterov=True)
