"""Module variables on every backend: ``Module.set_global`` / ``get_global``
reach ``__constant__`` and ``__device__`` variables by name (``static`` ones,
ones in namespaces, arrays sized by macros, pointers), like
``cudaMemcpyToSymbol`` / ``cudaMemcpyFromSymbol``."""
import numpy as np
import pytest

import workbench as wb

SOURCE = r'''
#define TAPS 4
__constant__ float coeffs[TAPS * 2];
static __constant__ int offsets[3];
static __device__ unsigned int counter;
namespace params { __device__ double scale = 2.0; }
__device__ float* target;

extern "C" __global__ void apply(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        for (int k = 0; k < TAPS * 2; ++k) acc += coeffs[k];
        y[i] = x[i] * acc * (float)params::scale + offsets[i % 3];
        atomicAdd(&counter, 1u);
    }
}
extern "C" __global__ void store_through(float v) {
    if (threadIdx.x == 0 && target != nullptr) target[0] = v;
}
'''


@pytest.fixture
def module(backend):
    return wb.compile(SOURCE, name="globals")


def test_set_and_get_constant_and_static_variables(module):
    rng = np.random.default_rng(11)
    coeffs = rng.standard_normal(8).astype(np.float32)
    module.set_global("coeffs", coeffs)
    module.set_global("offsets", [1, 2, 3])
    module.set_global("counter", 0)
    module.set_global("params::scale", 0.5)
    np.testing.assert_array_equal(module.get_global("coeffs"), coeffs)
    np.testing.assert_array_equal(module.get_global("offsets"), [1, 2, 3])
    assert module.get_global("scale") == 0.5
    n = 100
    x_host = rng.standard_normal(n).astype(np.float32)
    x, y = wb.to_device(x_host), wb.allocate((n,), np.float32)
    module["apply"](x, y, n, n=n)
    expected = x_host * coeffs.sum(dtype=np.float32) * np.float32(0.5) + np.array([1, 2, 3])[np.arange(n) % 3]
    np.testing.assert_allclose(wb.to_host(y), expected, rtol=1e-5, atol=1e-5)
    assert module.get_global("counter") == n          # a __device__ variable the kernel wrote
    assert module.get_global("counter").dtype == np.uint32


def test_a_pointer_variable_takes_a_device_array(module):
    out = wb.to_device(np.zeros(1, np.float32))
    module.set_global("target", out)
    module["store_through"](7.5, grid=1, block=32)
    assert wb.to_host(out)[0] == 7.5
    module.set_global("target", None)                 # a null pointer: the kernel stores nothing
    module["store_through"](1.0, grid=1, block=32)
    assert wb.to_host(out)[0] == 7.5


def test_unknown_variable_and_oversized_value_say_what_is_wrong(module):
    with pytest.raises(KeyError, match=r"no __constant__ or __device__ variable 'coefs'.*coeffs"):
        module.set_global("coefs", [1.0])
    with pytest.raises(ValueError, match=r"'offsets' holds 3 elements of int32; the value has 4"):
        module.set_global("offsets", [1, 2, 3, 4])
    module.set_global("offsets", [5, 6, 7])           # the module still works
    np.testing.assert_array_equal(module.get_global("offsets"), [5, 6, 7])


def test_variables_lists_the_declarations(module):
    names = {v.qualified_name for v in module.variables.values()}
    assert names == {"coeffs", "offsets", "counter", "params::scale", "target"}
    assert module.variables["offsets"].static and module.variables["coeffs"].space == "constant"
