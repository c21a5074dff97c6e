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


# -- values written whole -------------------------------------------------------------------

def test_a_short_value_is_refused_and_nothing_is_written(module):
    module.set_global("coeffs", np.arange(8, dtype=np.float32))
    with pytest.raises(ValueError, match=r"'coeffs' holds 8 elements of float32; the value has 2; "
                                         r"give every element"):
        module.set_global("coeffs", [1, 2])
    with pytest.raises(ValueError, match=r"'offsets' holds 3 elements of int32; the value has 1"):
        module.set_global("offsets", 7)  # a scalar is not a fill
    np.testing.assert_array_equal(module.get_global("coeffs"), np.arange(8))  # untouched


# -- struct variables ---------------------------------------------------------------------------

STRUCTS = r'''
#define COUNT 3
struct Inner { float x; double y[2]; };
struct Opt { char c; double d; int i; Inner in; Inner arr[COUNT]; };
typedef struct { int a; short b; } Small;
namespace cfg { __device__ Small smalls[4]; }
__constant__ Opt opt;
union Bits { int i; float f; };
__constant__ Bits bits;

extern "C" __global__ void read_back(double* out) {
    out[0] = opt.c; out[1] = opt.d; out[2] = opt.i; out[3] = opt.in.x; out[4] = opt.in.y[1];
    for (int k = 0; k < COUNT; ++k) { out[5 + 2 * k] = opt.arr[k].x; out[6 + 2 * k] = opt.arr[k].y[1]; }
    for (int k = 0; k < 4; ++k) { out[11 + k] = cfg::smalls[k].a * 100 + cfg::smalls[k].b; }
}
'''


@pytest.fixture
def structs(backend):
    return wb.compile(STRUCTS, name="struct_globals")


def _opt_value(rng):
    y = rng.standard_normal(8)
    return {"c": 65, "d": float(y[0]), "i": -7, "in": {"x": 1.5, "y": [float(y[1]), float(y[2])]},
            "arr": [{"x": k + 0.5, "y": [float(y[3 + k]), -k]} for k in range(3)]}


def test_a_struct_variable_has_the_compilers_layout_with_the_field_names(structs):
    opt = structs.get_global("opt")
    assert isinstance(opt, np.void) and opt.dtype.names == ("c", "d", "i", "in", "arr")
    # C's layout on both backends: char at 0, double at 8, int at 16, Inner (8-aligned) at 24
    assert [opt.dtype.fields[n][1] for n in opt.dtype.names] == [0, 8, 16, 24, 48]
    assert opt.dtype.itemsize == 48 + 3 * 24 and opt.dtype.alignment == 8
    inner = opt.dtype.fields["in"][0]
    assert inner.names == ("x", "y") and inner.fields["y"][0].shape == (2,) and inner.itemsize == 24
    assert opt.dtype.fields["arr"][0].shape == (3,)
    smalls = structs.get_global("cfg::smalls")
    assert smalls.shape == (4,) and smalls.dtype.names == ("a", "b") and smalls.dtype.itemsize == 8


def test_struct_nested_struct_and_array_of_struct_variables_set_and_read_back(structs):
    rng = np.random.default_rng(3)
    value = _opt_value(rng)
    structs.set_global("opt", value)
    structs.set_global("cfg::smalls", [{"a": k, "b": -k} for k in range(4)])
    out = wb.allocate(15, np.float64)
    structs["read_back"](out, grid=1, block=1)
    expected = [65, value["d"], -7, 1.5, value["in"]["y"][1]]
    for k in range(3):
        expected += [k + 0.5, -k]
    expected += [k * 100 - k for k in range(4)]
    np.testing.assert_allclose(wb.to_host(out), expected, rtol=1e-6)
    back = structs.get_global("opt")
    assert back["i"] == -7 and back["in"]["y"][0] == pytest.approx(value["in"]["y"][0])
    np.testing.assert_allclose(back["arr"]["x"], [0.5, 1.5, 2.5], rtol=1e-6)
    # a NumPy structured value (here the one read, changed) is written whole, by field name
    back["arr"][1]["x"] = 9.0
    structs.set_global("opt", back)
    structs["read_back"](out, grid=1, block=1)
    assert wb.to_host(out)[7] == 9.0
    arr = structs.get_global("cfg::smalls")
    arr["b"] = 50
    structs.set_global("cfg::smalls", arr)
    assert list(structs.get_global("cfg::smalls")["b"]) == [50] * 4


def test_a_struct_value_missing_or_adding_a_field_is_refused(structs):
    value = _opt_value(np.random.default_rng(4))
    structs.set_global("opt", value)
    with pytest.raises(ValueError, match="lacks field arr; a struct is written whole"):
        structs.set_global("opt", {k: v for k, v in value.items() if k != "arr"})
    with pytest.raises(ValueError, match="opt.in: the struct has no field 'z'"):
        structs.set_global("opt", {**value, "in": {"x": 1.0, "y": [1, 2], "z": 3}})
    with pytest.raises(ValueError, match=r"opt.arr holds 3 structs .* the value has 2"):
        structs.set_global("opt", {**value, "arr": value["arr"][:2]})
    with pytest.raises(ValueError, match=r"cfg::smalls holds 4 structs"):
        structs.set_global("cfg::smalls", [{"a": 1, "b": 2}])
    with pytest.raises(TypeError, match="give a dict of its fields"):
        structs.set_global("opt", 3.0)
    assert structs.get_global("opt")["i"] == -7  # the value before stays


def test_a_union_asks_for_dtype_and_takes_one(structs):
    with pytest.raises(TypeError, match=r"'bits' has type 'Bits' \(a union.*pass dtype="):
        structs.get_global("bits")
    structs.set_global("bits", np.float32(1.0), dtype=np.float32)
    assert structs.get_global("bits", dtype=np.int32) == 0x3F800000


OPTIONS = r'''
#ifdef DOUBLE_PRECISION
typedef double real;
#else
typedef float real;
#endif
#define MAX_OPTIONS 4
typedef struct { real S; real X; real vDt; } OptionData;
static __constant__ OptionData d_options[MAX_OPTIONS];
extern "C" __global__ void spread(real* out) {
    int i = threadIdx.x;
    if (i < MAX_OPTIONS) out[i] = d_options[i].S - d_options[i].X * d_options[i].vDt;
}
'''


@pytest.mark.parametrize("double", [False, True], ids=["float", "double"])
def test_an_array_of_typedef_structs_as_in_nvidias_option_pricing_samples(backend, double):
    m = wb.compile(OPTIONS, name="options", defines={"DOUBLE_PRECISION": True} if double else {})
    real = np.float64 if double else np.float32
    table = np.zeros(4, dtype=m.get_global("d_options").dtype)
    assert table.dtype.names == ("S", "X", "vDt") and table.dtype["S"] == real
    rng = np.random.default_rng(5)
    for name in table.dtype.names:
        table[name] = rng.random(4)
    m.set_global("d_options", table)
    out = wb.allocate(4, real)
    m["spread"](out, grid=1, block=4)
    expected = table["S"].astype(np.float64) - table["X"].astype(np.float64) * table["vDt"]
    np.testing.assert_allclose(wb.to_host(out), expected, rtol=1e-6 if not double else 1e-12)
