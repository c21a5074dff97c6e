"""Null pointers and default arguments, on every backend: ``None`` passes a
null pointer for a pointer parameter, and trailing parameters with a default
value in the source may be left out."""
import numpy as np
import pytest

import workbench as wb

SOURCE = r'''
extern "C" __global__ void block_sums(const float* x, float* out, int n,
                                      float* partial_sums = NULL, float scale = 2.0f,
                                      int offset = -3) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * scale + offset;
    if (partial_sums != NULL && i == 0) partial_sums[0] = 42.0f;
}
extern "C" __global__ void is_null(const int* p, int* flag) {
    flag[0] = (p == nullptr) ? 1 : 0;
}
'''


@pytest.fixture
def module(backend):
    return wb.compile(SOURCE, name="params")


def test_none_passes_a_null_pointer(module):
    flag = wb.to_device(np.full(1, 7, np.int32))
    module["is_null"](None, flag, grid=1, block=1)
    assert wb.to_host(flag)[0] == 1
    module["is_null"](flag, flag, grid=1, block=1)
    assert wb.to_host(flag)[0] == 0


def test_defaulted_parameters_may_be_left_out(module):
    rng = np.random.default_rng(3)
    x_host = rng.standard_normal(300).astype(np.float32)
    x, out = wb.to_device(x_host), wb.allocate((300,), np.float32)
    k = module["block_sums"]
    k(x, out, 300, n=300)                       # partial_sums = NULL, scale = 2, offset = -3
    np.testing.assert_allclose(wb.to_host(out), x_host * 2 - 3, rtol=1e-6)
    partial = wb.to_device(np.zeros(1, np.float32))
    k(x, out, 300, partial, n=300)              # scale, offset defaulted
    assert wb.to_host(partial)[0] == 42.0
    k(x, out, 300, None, 0.5, 1, n=300)        # everything explicit, a null pointer
    np.testing.assert_allclose(wb.to_host(out), x_host * 0.5 + 1, rtol=1e-6)


def test_too_few_arguments_names_the_range(module):
    x = wb.allocate((4,), np.float32)
    with pytest.raises(wb.KernelArgumentError, match=r"takes 3 to 6 arguments.*got 2"):
        module["block_sums"](x, x, n=4)


def test_none_for_a_scalar_is_refused(module):
    x = wb.allocate((4,), np.float32)
    with pytest.raises(wb.KernelArgumentError, match="'n'"):
        module["block_sums"](x, x, None, n=4)


def test_a_default_that_is_not_a_literal_must_be_passed():
    from workbench.core.signature import find_kernels
    (sig,) = find_kernels('extern "C" __global__ void k(int* p, int m = WIDTH * 2) {}')
    assert sig.params[1].default == "WIDTH * 2"
    assert str(sig.params[1]) == "int m = WIDTH * 2"
    with pytest.raises(ValueError):
        sig.params[1].default_value()
