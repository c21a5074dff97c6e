"""Compile, check, launch and time kernels through the public API, on every
backend that can run here (the ``backend`` fixture)."""
import uuid

import numpy as np
import pytest

import workbench as wb

from helpers import new_timings

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

BLOCK_SUM = r'''
extern "C" __global__ void block_sum(const double* x, double* partial, int n) {
    __shared__ double buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}
'''

TEMPLATE = r'''
template <typename T>
__global__ void scale(T* x, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
'''

EXACT = r'''
extern "C" __global__ void store(float a, double b, unsigned long long c, float* fa, double* fb,
                                 unsigned long long* fc) {
    fa[0] = a; fb[0] = b; fc[0] = c;
}
'''

rng = np.random.default_rng(1234)


def test_saxpy_matches_numpy(backend):
    n = 100_003
    x_h = rng.random(n, dtype=np.float32)
    y_h = rng.random(n, dtype=np.float32)
    saxpy = wb.compile(SAXPY)["saxpy"]
    x, y = wb.to_device(x_h), wb.to_device(y_h)
    saxpy(2.5, x, y, n, grid=(n + 255) // 256, block=256)
    expected = 2.5 * x_h.astype(np.float64) + y_h
    np.testing.assert_allclose(wb.to_host(y), expected, rtol=1e-6)


def test_shared_memory_block_reduction(backend):
    n = 50_000
    x_h = rng.standard_normal(n)
    k = wb.compile(BLOCK_SUM)["block_sum"]
    blocks = (n + 255) // 256
    partial = wb.allocate(blocks, np.float64)
    k(wb.to_device(x_h), partial, n, grid=blocks, block=256)
    np.testing.assert_allclose(wb.to_host(partial).sum(), x_h.sum(), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(wb.to_host(partial)[0], x_h[:256].sum(), rtol=1e-12)


def test_template_kernel_through_instantiate(backend):
    module = wb.compile(TEMPLATE, instantiate=["scale<float>", "scale<double>"])
    x_h = rng.random(1000)
    xd = wb.to_device(x_h)
    module.templates["scale"][np.float64](xd, 3.0, xd.size, n=xd.size)
    np.testing.assert_allclose(wb.to_host(xd), 3.0 * x_h, rtol=1e-15)
    xf = wb.to_device(x_h.astype(np.float32))
    module["scale<float>"](xf, 0.5, xf.size, grid=4, block=256)
    np.testing.assert_allclose(wb.to_host(xf), 0.5 * x_h.astype(np.float32), rtol=1e-6)


def test_scalars_arrive_as_exact_c_types(backend):
    k = wb.compile(EXACT)["store"]
    fa, fb, fc = wb.allocate(1, np.float32), wb.allocate(1, np.float64), wb.allocate(1, np.uint64)
    k(0.1, 0.1, 2**64 - 1, fa, fb, fc, grid=1, block=1)
    assert wb.to_host(fa)[0] == np.float32(0.1)
    assert wb.to_host(fb)[0] == 0.1
    assert wb.to_host(fc)[0] == np.uint64(2**64 - 1)


def test_n_launch_covers_every_element(backend):
    saxpy = wb.compile(SAXPY)["saxpy"]
    n = 12_345
    x, y = wb.to_device(np.ones(n, np.float32)), wb.to_device(np.arange(n, dtype=np.float32))
    saxpy(1.0, x, y, n, n=n)
    np.testing.assert_array_equal(wb.to_host(y), np.arange(n, dtype=np.float32) + 1)
    rec = wb.timings(saxpy).iloc[-1]
    threads = rec.block[0] * rec.grid[0]
    assert threads >= n and threads - n < rec.block[0]


# -- argument errors ------------------------------------------------------------

@pytest.fixture
def saxpy_and_arrays(backend):
    saxpy = wb.compile(SAXPY)["saxpy"]
    x = wb.to_device(rng.random(64, dtype=np.float32))
    y = wb.to_device(rng.random(64, dtype=np.float32))
    return saxpy, x, y


@pytest.mark.parametrize("make_args, words", [
    (lambda x, y: (2.0, x, y), ["takes 4 arguments", "got 3"]),
    (lambda x, y: (2.0, x.astype(np.float64), y, 64), ["'x'", "float32", "float64"]),
    (lambda x, y: (2.0, wb.to_host(x), y, 64), ["'x'", "host NumPy array", "wb.to_device"]),
    (lambda x, y: (2.0, x, y, 64.5), ["'n'", "integer", "float"]),
    (lambda x, y: (2.0, x, y, 2**40), ["'n'", "does not fit"]),
    (lambda x, y: (x, x, y, 64), ["'a'", "scalar"]),
    (lambda x, y: (2.0, 3, y, 64), ["'x'", "pointer"]),
    (lambda x, y: ("2", x, y, 64), ["'a'", "str"]),
])
def test_argument_errors_name_the_parameter(saxpy_and_arrays, make_args, words):
    saxpy, x, y = saxpy_and_arrays
    before = wb.to_host(y).copy()
    with pytest.raises(wb.KernelArgumentError) as info:
        saxpy(*make_args(x, y), grid=1, block=64)
    assert isinstance(info.value, TypeError)
    for w in words:
        assert w in str(info.value)
    np.testing.assert_array_equal(wb.to_host(y), before)  # nothing ran


@pytest.mark.parametrize("config, words", [
    (dict(grid=1, block=2048), ["2048 threads", "at most 1024"]),
    (dict(grid=1), ["needs grid= and block="]),
    (dict(grid=1, block=(0, 1)), [">= 1"]),
    (dict(grid=1, block=32, shared_mem=10**7), ["shared_mem"]),
])
def test_launch_config_errors(saxpy_and_arrays, config, words):
    saxpy, x, y = saxpy_and_arrays
    with pytest.raises(wb.LaunchConfigError) as info:
        saxpy(1.0, x, y, 64, **config)
    for w in words:
        assert w in str(info.value)


# -- compile errors, cache, timing ---------------------------------------------

def test_compile_error_points_at_the_users_line(backend):
    src = SAXPY.replace("a * x[i]", "a * xx[i]")
    with pytest.raises(wb.CompileError) as info:
        wb.compile(src, line_offset=1)
    err = info.value
    (d,) = err.errors
    assert d.line == 5  # source line 4, +1 for the magic line
    assert "xx" in d.message
    assert "y[i] = a * xx[i] + y[i]" in str(err)


def test_recompiling_unchanged_source_hits_the_cache(backend):
    src = SAXPY + f"\n// unique {uuid.uuid4()}\n"  # never compiled before, in any run
    first = wb.compile(src, name="cache_probe")
    second = wb.compile(src, name="cache_probe")
    assert not first.cache_hit
    assert second.cache_hit
    assert wb.modules["cache_probe"] is second


def test_timing_log_records_every_launch(backend):
    saxpy = wb.compile(SAXPY, name="timed")["saxpy"]
    n = 4096
    x, y = wb.to_device(rng.random(n, dtype=np.float32)), wb.to_device(rng.random(n, dtype=np.float32))
    with new_timings() as added:
        for block in (128, 256):
            saxpy(1.0, x, y, n, grid=n // block, block=block)
    assert list(added.frame.columns[:7]) == ["kernel", "grid", "block", "shared_mem", "ms", "cell",
                                             "time"]
    new = added.frame
    assert len(new) == 2
    assert list(new.block) == [(128, 1, 1), (256, 1, 1)]
    assert list(new.grid) == [(32, 1, 1), (16, 1, 1)]
    assert (new.ms > 0).all() and new.ms.notna().all()
    assert set(new.kernel) == {"saxpy"}


def test_kernel_repr_shows_signature_and_resources(backend):
    k = wb.compile(BLOCK_SUM)["block_sum"]
    text = repr(k)
    assert "block_sum(const double* x, double* partial, int n)" in text
    if k.resources.registers is not None:
        assert "registers" in text and "2048 B shared" in text


def test_backend_says_which_and_why(backend):
    b = wb.backend()
    assert b.name == backend.name
    assert b.name in repr(b) and b.reason in repr(b)
    assert wb.xp.__wrapped__ is b.xp
