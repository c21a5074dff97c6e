"""Kernel signature parsing: the declarations people actually write."""
import numpy as np
import pytest

from workbench.core.signature import find_kernels, parse_param

SOURCE = r'''
#include <cuda_fp16.h>
// __global__ void in_a_comment(int x) {}
/* __global__ void in_a_block_comment(int x) {} */
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    const char* s = "__global__ void in_a_string(int)";
}

extern "C" {
__global__ void __launch_bounds__(256, 2)
multi_line(const float* __restrict__ a,
           float4 *out,          // vector type
           int **table,
           unsigned n, size_t m, long long k,
           unsigned long long q, __half* h, double arr[], signed char c)
{
}
}

template <typename T, int BLOCK = 256>
__global__ void scale(T* __restrict__ x, const T factor, int n) { }

__global__ void cpp_linkage(unsigned int* counts) {}
extern "C" __global__ void no_args(void) {}
'''


def kernels():
    return {k.name: k for k in find_kernels(SOURCE)}


def test_finds_every_kernel_and_skips_comments_and_strings():
    assert list(kernels()) == ["saxpy", "multi_line", "scale", "cpp_linkage", "no_args"]


def test_linkage_and_lines():
    ks = kernels()
    assert ks["saxpy"].extern_c and ks["multi_line"].extern_c and ks["no_args"].extern_c
    assert not ks["cpp_linkage"].extern_c and not ks["scale"].extern_c
    assert ks["saxpy"].line == 5
    assert ks["multi_line"].line == 11


def test_simple_signature():
    k = kernels()["saxpy"]
    assert [(p.name, p.base, p.pointer_depth, p.is_const) for p in k.params] == [
        ("a", "float", 0, False), ("x", "float", 1, True), ("y", "float", 1, False), ("n", "int", 0, False)]
    assert [p.dtype for p in k.params] == [np.float32, np.float32, np.float32, np.int32]


@pytest.mark.parametrize("name, base, depth, dtype", [
    ("a", "float", 1, np.float32),
    ("out", "float4", 1, None),
    ("table", "int", 2, None),
    ("n", "unsigned int", 0, np.uint32),
    ("m", "size_t", 0, np.uint64),
    ("k", "long long", 0, np.int64),
    ("q", "unsigned long long", 0, np.uint64),
    ("h", "__half", 1, np.float16),
    ("arr", "double", 1, np.float64),
    ("c", "signed char", 0, np.int8),
])
def test_multi_line_qualified_parameters(name, base, depth, dtype):
    p = {p.name: p for p in kernels()["multi_line"].params}[name]
    assert (p.base, p.pointer_depth) == (base, depth)
    assert p.dtype == (np.dtype(dtype) if dtype is not None else None)


def test_restrict_and_const_are_qualifiers_not_names():
    a = kernels()["multi_line"].params[0]
    assert a.name == "a" and a.is_const and "__restrict__" in a.ctype


def test_vector_type_components():
    out = {p.name: p for p in kernels()["multi_line"].params}["out"]
    assert out.vector == (np.dtype(np.float32), 4)


def test_template_head_and_instantiation():
    k = kernels()["scale"]
    assert k.template_params == (("typename", "T"), ("int", "BLOCK"))
    inst = k.instantiate("scale<double, 128>")
    assert inst.name == "scale<double, 128>"
    assert [(p.name, p.base, p.pointer_depth) for p in inst.params] == [
        ("x", "double", 1), ("factor", "double", 0), ("n", "int", 0)]
    assert inst.params[0].dtype == np.float64


def test_no_parameters():
    assert kernels()["no_args"].params == ()


def test_unnamed_parameters_get_positional_names():
    p = parse_param("const float*", 3)
    assert (p.name, p.base, p.pointer_depth) == ("arg3", "float", 1)
    assert parse_param("unsigned", 0).base == "unsigned int"


def test_conditional_branches_follow_the_defines():
    src = ("#define TILE 16\n#if TILE >= 16 && !defined(SMALL)\n"
           "__global__ void big(float* x) {}\n#elif defined(SMALL)\n"
           "__global__ void small(float* x) {}\n#else\n__global__ void other(int* x) {}\n#endif\n"
           "#if SOME_UNKNOWN_MACRO(3)\n__global__ void kept(int* x) {}\n#endif\n")
    assert [k.name for k in find_kernels(src)] == ["big", "kept"]
    assert [k.name for k in find_kernels(src, ["SMALL"])] == ["small", "kept"]
    assert [k.name for k in find_kernels(src.replace("TILE 16", "TILE 8"))] == ["other", "kept"]


def test_digit_separators_and_apostrophes_do_not_swallow_lines():
    src = "const int n = 1'000'000; // don't\n__global__ void k(int* x) {}\n"
    (k,) = find_kernels(src)
    assert (k.name, k.line) == ("k", 2)


def test_namespaces_qualify_kernels_of_cpp_linkage():
    src = ("namespace outer { namespace a::b { __global__ void k(int* x) {} } }\n"
           "namespace { __global__ void hidden(int* x) {} }\n"
           'namespace c { extern "C" __global__ void plain(int* x) {} }\n')
    ks = {k.name: k for k in find_kernels(src)}
    assert ks["k"].qualified_name == "outer::a::b::k"
    assert ks["hidden"].qualified_name == "hidden"
    assert ks["plain"].qualified_name == "plain" and ks["plain"].extern_c


def test_kernels_in_raw_strings_and_inactive_branches_are_not_kernels():
    src = ('const char* doc = R"(\n__global__ void in_raw(int* x) {}\n)";\n'
           "#ifdef NEVER\n__global__ void never(int* x) {}\n#endif\n"
           "__global__ void real(int* x) {}\n")
    assert [(k.name, k.line) for k in find_kernels(src)] == [("real", 7)]


def test_kernels_under_the_compilers_own_macros_are_found():
    import workbench as wb
    module = wb.compile('#ifdef __CUDACC__\nextern "C" __global__ void k(int* a) { a[0] = 1; }\n#endif\n'
                        '#if __CUDA_ARCH__ >= 700\nextern "C" __global__ void j(int* a) { a[0] = 2; }\n#endif\n')
    assert module.kernel_names() == ["k", "j"]
