"""Edge cases of compiling and launching that users hit: conditional
compilation, namespaces, views, kernel limits, scalar ranges, templates."""
import numpy as np
import pytest

import workbench as wb

from helpers import using_backend

rng = np.random.default_rng(7)

CONDITIONAL = r'''
#ifdef USE_DOUBLE
extern "C" __global__ void fill(double* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 2.5; }
#else
extern "C" __global__ void fill(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 1.5f; }
#endif
#ifdef WITH_DEBUG
__global__ void debug_dump(int* x) { x[0] = 1; }
#endif
'''


@pytest.mark.parametrize("defines, dtype, value", [((), np.float32, 1.5), (("USE_DOUBLE",), np.float64, 2.5)])
def test_the_compiled_branch_decides_the_signature(backend, defines, dtype, value):
    m = wb.compile(CONDITIONAL, defines=defines)
    assert m.kernel_names() == ["fill"]
    x = wb.allocate(8, dtype)
    m["fill"](x, 8, grid=1, block=8)
    np.testing.assert_array_equal(wb.to_host(x), np.full(8, value, dtype))
    other = np.float64 if dtype == np.float32 else np.float32
    with pytest.raises(wb.KernelArgumentError, match=np.dtype(dtype).name):
        m["fill"](wb.allocate(8, other), 8, grid=1, block=8)


def test_kernels_in_namespaces_and_through_macros(backend):
    src = r'''
#define KERNEL extern "C" __global__
KERNEL void first(int* x) { x[0] = 1; }
KERNEL void second(int* x) { x[1] = 2; }
namespace ops { namespace inner { __global__ void third(int* x) { x[2] = 3; } } }
'''
    m = wb.compile(src)
    assert sorted(m.kernel_names()) == ["first", "second", "third"]
    x = wb.to_device(np.zeros(3, np.int32))
    for name in ("first", "second", "third"):
        m[name](x, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(x), [1, 2, 3])


def test_overloaded_kernels_are_refused_with_the_line(backend):
    src = "__global__ void o(int* x) { }\n__global__ void o(float* x) { }\n"
    with pytest.raises(wb.CompileError) as info:
        wb.compile(src, line_offset=1)
    (d,) = info.value.errors
    assert d.line == 3 and "overloaded" in d.message and "distinct names" in d.message


def test_strided_views_are_refused_not_misread(backend):
    copy = wb.compile('extern "C" __global__ void cp(const int* a, int* b, int n) '
                      '{ int i = threadIdx.x; if (i < n) b[i] = a[i]; }')["cp"]
    a = wb.to_device(np.arange(10, dtype=np.int32))
    b = wb.allocate(5, np.int32)
    with pytest.raises(wb.KernelArgumentError, match="strided view.*ascontiguousarray"):
        copy(a[::2], b, 5, grid=1, block=32)
    copy(wb.xp.ascontiguousarray(a[::2]), b, 5, grid=1, block=32)
    np.testing.assert_array_equal(wb.to_host(b), [0, 2, 4, 6, 8])
    copy(a[5:], b, 5, grid=1, block=32)  # a contiguous slice is fine
    np.testing.assert_array_equal(wb.to_host(b), [5, 6, 7, 8, 9])


def test_launch_bounds_and_static_shared_memory_limit_the_launch(backend):
    m = wb.compile(r'''
extern "C" __global__ void __launch_bounds__(128) bounded(int* x) { x[threadIdx.x] = 1; }
extern "C" __global__ void tile(int* x) { __shared__ int t[4096]; t[threadIdx.x] = 1; x[0] = t[0]; }
''')
    x = wb.allocate(1024, np.int32)
    if m["bounded"].resources.max_threads_per_block is not None:
        assert m["bounded"].resources.max_threads_per_block <= 128
        with pytest.raises(wb.LaunchConfigError, match="at most 128"):
            m["bounded"](x, grid=1, block=256)
    m["bounded"](x, grid=1, block=128)
    tile = m["tile"]
    if tile.resources.shared_bytes:
        limit = wb.backend().device_properties().shared_memory_per_block_optin - 16384
        with pytest.raises(wb.LaunchConfigError, match="16384 bytes of static shared"):
            tile(x, grid=1, block=32, shared_mem=limit + 1)


def test_grids_and_blocks_in_three_dimensions(backend):
    k = wb.compile(r'''
extern "C" __global__ void coords(int* out, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny) out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z;
}''')["coords"]
    nx, ny, nz = 20, 12, 3
    out = wb.allocate(nx * ny * nz, np.int32)
    k(out, nx, ny, grid=(3, 2, nz), block=(8, 8))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(wb.to_host(out).reshape(nz, ny, nx), x + 100 * y + 10000 * z)


def test_scalars_of_every_kind(backend):
    k = wb.compile(r'''
#include <cuda_fp16.h>
extern "C" __global__ void s(bool b, __half h, size_t big, unsigned char c, double* out) {
    out[0] = b; out[1] = __half2float(h); out[2] = (double)big; out[3] = c;
}''')["s"]
    out = wb.allocate(4, np.float64)
    k(True, 0.5, 2**40, 200, out, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(out), [1.0, 0.5, 2.0**40, 200.0])
    for bad, words in ((70000.0, "does not fit in __half"), (10**400, "does not fit")):
        with pytest.raises(wb.KernelArgumentError, match=words):
            k(True, bad, 1, 1, out, grid=1, block=1)
    with pytest.raises(wb.KernelArgumentError, match="does not fit in unsigned char"):
        k(True, 0.5, 1, 256, out, grid=1, block=1)
    with pytest.raises(wb.LaunchConfigError, match="shared_mem must be"):
        k(True, 0.5, 1, 1, out, grid=1, block=1, shared_mem="64")


def test_python_numbers_reach_the_kernel_as_their_exact_c_values(backend):
    """A call may pack Python numbers itself (no NumPy scalars on the GPU's
    launch path): every C type must get the value NumPy's conversion gives."""
    k = wb.compile(r'''
#include <cuda_fp16.h>
extern "C" __global__ void exact(float f, double d, __half h, int i, unsigned int u, long long q,
                                 unsigned long long uq, short s, double* out, long long* iout,
                                 unsigned long long* uout) {
    out[0] = f; out[1] = d; out[2] = __half2float(h);
    iout[0] = i; iout[1] = u; iout[2] = q; iout[3] = s; uout[0] = uq;
}''')["exact"]
    out, iout, uout = wb.allocate(3, np.float64), wb.allocate(4, np.int64), wb.allocate(1, np.uint64)
    cases = [(0.1, 1 / 3, 1e-5, -2**31, 2**32 - 1, -2**63, 2**64 - 1, -2**15),
             (float(np.finfo(np.float32).max), -1e300, 65504.0, 2**31 - 1, 0, 2**63 - 1, 0, 2**15 - 1),
             (float(rng.standard_normal()), float(rng.standard_normal()), float(rng.standard_normal()),
              int(rng.integers(-2**31, 2**31)), int(rng.integers(0, 2**32)),
              int(rng.integers(-2**62, 2**62)), int(rng.integers(0, 2**63)) * 2 + 1, -7)]
    for f, d, h, i, u, q, uq, s in cases:
        k(f, d, h, i, u, q, uq, s, out, iout, uout, grid=1, block=1)
        np.testing.assert_array_equal(
            wb.to_host(out), [np.float64(np.float32(f)), d, np.float64(np.float16(h))])
        np.testing.assert_array_equal(wb.to_host(iout), [i, u, q, s])
        assert int(wb.to_host(uout)[0]) == uq


def test_dynamic_shared_memory_beyond_48_kib(backend):
    """Above 48 KiB a kernel must opt in to more dynamic shared memory: the
    launch does it (once), and repeated launches keep working."""
    k = wb.compile(r'''
extern "C" __global__ void reverse(const float* x, float* y, int n) {
    extern __shared__ float s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[n - 1 - i];
}''')["reverse"]
    for n in (16384, 20000):  # 64 KiB, then more
        xh = rng.standard_normal(n).astype(np.float32)
        x, y = wb.to_device(xh), wb.allocate(n, np.float32)
        for _ in range(2):
            k(x, y, n, grid=1, block=256, shared_mem=n * 4)
            np.testing.assert_array_equal(wb.to_host(y), xh[::-1])


def test_a_kernel_without_parameters(backend):
    k = wb.compile('extern "C" __global__ void nothing() { }')["nothing"]
    k(grid=2, block=32)
    with pytest.raises(wb.KernelArgumentError, match="takes 0 arguments"):
        k(1, grid=1, block=1)


def test_template_messages_say_what_to_write(backend):
    src = "template <typename T> __global__ void sc(T* x, T a) { x[0] *= a; }"
    none = wb.compile(src).templates["sc"]
    with pytest.raises(wb.KernelArgumentError, match="--instantiate 'sc<float>'"):
        none(wb.allocate(1, np.float32), 2.0, grid=1, block=1)
    two = wb.compile(src, instantiate=["sc<float>", "sc<double>"]).templates["sc"]
    with pytest.raises(wb.KernelArgumentError) as info:
        two(wb.allocate(1, np.float32), 2.0, grid=1, block=1)
    suggestion = str(info.value).split("e.g. ")[1].split("(...)")[0]  # sc['float']
    assert suggestion == "sc['float']"
    assert two["float"] is two["sc<float>"] is two[np.float32]


def test_to_device_returns_device_arrays_unchanged(backend):
    x = wb.to_device(rng.random(4))
    assert wb.to_device(x) is x


def test_the_workbench_works_after_every_kind_of_error(backend):
    good = wb.compile('extern "C" __global__ void one(int* x) { x[threadIdx.x] = 1; }')["one"]
    x = wb.allocate(32, np.int32)
    with pytest.raises(wb.CompileError):
        wb.compile('extern "C" __global__ void bad(int* x) { x[0] = ; }')
    with pytest.raises(wb.KernelArgumentError):
        good(wb.to_host(x), grid=1, block=32)
    with pytest.raises(wb.LaunchConfigError):
        good(x, grid=1, block=4096)
    good(x, grid=1, block=32)
    np.testing.assert_array_equal(wb.to_host(x), np.ones(32, np.int32))


@pytest.mark.gpu
def test_arch_option_on_the_gpu():
    with using_backend("cupy") as b:
        major, minor = b.device_properties().compute_capability
        src = 'extern "C" __global__ void inc(int* x) { x[threadIdx.x] += 1; }'
        for arch in (f"compute_{major}{minor}", f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"):
            m = wb.compile(src + f"// {arch}", arch=arch)
            assert m["inc"].resources.arch == arch
            x = wb.to_device(np.arange(4, dtype=np.int32))
            m["inc"](x, grid=1, block=4)
            np.testing.assert_array_equal(wb.to_host(x), [1, 2, 3, 4])
        if major >= 9:  # a cubin for an older major version cannot load here: said at compile time
            with pytest.raises(wb.CompileError, match="cannot run on this"):
                wb.compile(src, arch="sm_80")
