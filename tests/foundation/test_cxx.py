"""The C/C++ source scanner: lexer-level blanking, conditional compilation,
blocks; and the agreement of its two users (signature parser, simulator)."""
import time

import pytest

from workbench import cxx
from workbench.backends.simulator import source as sim_source
from workbench.core.signature import find_kernels


def active_words(src, defines=()):
    return cxx.scan(src, defines).active.split()


# -- lexer level -------------------------------------------------------------------------

def test_blank_comments_keeps_line_numbers():
    text = "a // x\n/* y\n z */ b\n"
    out = cxx.blank_comments_and_literals(text)
    assert out.count("\n") == text.count("\n") and "x" not in out and "y" not in out


def test_blanking_keeps_every_offset():
    src = 'a = "x\\"y"; // c\n/* d\ne */ R"(\nz)" \'q\' 1\'0\n'
    out = cxx.blank_comments_and_literals(src)
    assert len(out) == len(src)
    assert [i for i, c in enumerate(out) if c == "\n"] == [i for i, c in enumerate(src) if c == "\n"]


def test_digit_separators_are_not_character_literals():
    src = "int n = 1'000'000; int h = 0xFF'FF; double d = 1'0.5e+3;\nint m = 2; // here\n"
    out = cxx.blank_comments_and_literals(src)
    assert out.splitlines()[0] == src.splitlines()[0]
    assert "int m = 2;" in out and "here" not in out


def test_escaped_quotes_do_not_end_literals():
    out = cxx.blank_comments_and_literals('s = "a \\" // b"; c = \'\\\'\'; x = 1; // gone\n')
    assert "b" not in out and "gone" not in out and "x = 1;" in out
    assert out.startswith('s = "') and out.count('"') == 2


def test_raw_strings_end_at_their_delimiter():
    src = 'auto s = R"xy(a )" // not a comment " )xy"; int after; // c\nauto t = u8R"(\n"\n)"; int b;\n'
    out = cxx.blank_comments_and_literals(src)
    assert "int after;" in out and "not a comment" not in out and "c\n" not in out
    assert "int b;" in out and out.count("\n") == src.count("\n")


def test_include_names_stay_visible_and_extern_c_is_kept():
    src = '#include <cuda_bf16.h>\n#include "it\'s.h" // it\'s\nextern "C" __global__ void k() {}\n'
    out = cxx.blank_comments_and_literals(src)
    assert "<cuda_bf16.h>" in out and '"it\'s.h"' in out and "it's\n" not in out
    assert 'extern "C" __global__' in out


def test_comments_containing_quotes_do_not_open_literals():
    src = "// don't \"\nint a; /* it's */ int b;\n"
    assert cxx.blank_comments_and_literals(src).split() == ["int", "a;", "int", "b;"]


def test_line_col():
    assert cxx.line_col("ab\ncd", 4) == (2, 2)
    assert cxx.line_col("ab\ncd", 0) == (1, 1)


# -- conditional compilation -------------------------------------------------------------

def test_if_with_arithmetic_and_defined():
    src = "#define TILE 16\n#if (TILE * 4) / 2 == 32 && defined(TILE) && !defined NONE\nyes\n#else\nno\n#endif\n"
    assert active_words(src) == ["yes"]
    assert active_words(src.replace("TILE 16", "TILE 8")) == ["no"]


def test_or_and_command_line_defines():
    src = "#if defined(A) || B > 2\nyes\n#else\nno\n#endif\n"
    assert active_words(src) == ["no"]
    assert active_words(src, ["A"]) == ["yes"]
    assert active_words(src, ["B=3"]) == ["yes"]
    assert active_words(src, ["B=2"]) == ["no"]


def test_elif_chain_takes_the_first_true_branch():
    src = "#if N == 1\none\n#elif N == 2\ntwo\n#elif N >= 2\nmany\n#else\nnone\n#endif\n"
    assert active_words(src, ["N=1"]) == ["one"]
    assert active_words(src, ["N=2"]) == ["two"]
    assert active_words(src, ["N=5"]) == ["many"]
    assert active_words(src) == ["none"]


def test_nested_branches():
    src = ("#ifdef OUTER\n#ifndef INNER\na\n#else\nb\n#endif\n#else\n"
           "#if 1\nc\n#endif\n#endif\nd\n")
    assert active_words(src) == ["c", "d"]
    assert active_words(src, ["OUTER"]) == ["a", "d"]
    assert active_words(src, ["OUTER", "INNER"]) == ["b", "d"]


def test_inactive_branches_define_nothing():
    src = "#if 0\n#define X 1\n#endif\n#ifdef X\nyes\n#endif\n#undef Y\n"
    assert active_words(src) == []
    assert "X" not in cxx.scan(src).macros


def test_undef_and_function_like_macros_from_the_source():
    src = ("#define X 1\n#undef X\n#define TWICE(v) ((v) * 2)\n"
           "#if defined(X)\nx\n#elif TWICE(3) == 6\nsix\n#endif\n")
    assert active_words(src) == ["six"]


def test_undecidable_conditions_keep_every_branch():
    src = ("#if UNKNOWN_MACRO(3)\na\n#else\nb\n#endif\n"
           "#if __has_include(<x.h>)\nc\n#elif 0\nd\n#endif\n"
           "#if 1 +\ne\n#endif\n")
    assert active_words(src) == ["a", "b", "c", "d", "e"]


def test_macros_defined_in_an_undecided_branch_are_uncertain():
    src = "#if F(1)\n#define X 1\n#endif\n#ifdef X\nx\n#else\nnot_x\n#endif\n"
    assert active_words(src) == ["x", "not_x"]


def test_decided_false_then_undecidable_elif_keeps_the_rest():
    src = "#if 0\na\n#elif G(1)\nb\n#else\nc\n#endif\n"
    assert active_words(src) == ["b", "c"]


def test_digit_separators_and_cpp_booleans_in_conditions():
    assert active_words("#if 1'000 > 999 && true && !false\nyes\n#endif\n") == ["yes"]


def test_continuation_lines_of_directives():
    src = "#if defined(A) && \\\n    defined(B)\nab\n#else\nother\n#endif\nend\n"
    assert active_words(src, ["A", "B"]) == ["ab", "end"]
    assert active_words(src, ["A"]) == ["other", "end"]
    assert cxx.scan(src).active.count("\n") == src.count("\n")


def test_unknown_defines_mean_every_branch():
    src = "#ifdef A\na\n#else\nb\n#endif\n"
    assert active_words(src, None) == ["a", "b"]


def test_object_like_macros_are_returned():
    src = '#define KERNEL extern "C" __global__\n#define N 4\n#define F(x) x\nKERNEL void k() {}\n'
    macros = cxx.scan(src, ["M=2"]).macros
    assert dict(macros) == {"M": "2", "KERNEL": 'extern "C" __global__', "N": "4"}


def test_active_and_visible_texts():
    src = '#include <mma.h>\n#define N 4\n#if 0\nhidden\n#endif\n#pragma unroll\ncode\n'
    s = cxx.scan(src)
    assert s.active.split() == ["code"]
    assert s.visible.split() == ["#include", "<mma.h>", "#define", "N", "4", "#pragma", "unroll",
                                 "code"]
    assert len(s.active) == len(s.visible) == len(src)


def test_define_kernel_macro_names_a_kernel():
    src = '#define KERNEL extern "C" __global__\nKERNEL void k(float* x) {}\n'
    (k,) = find_kernels(src)
    assert (k.name, k.extern_c, k.line) == ("k", True, 2)


# -- structure ----------------------------------------------------------------------------

def test_blocks_and_file_scope():
    code = 'namespace a::inline b { extern "C" { void f() { x; } } struct S { y; }; }\nz;'
    blocks = cxx.blocks(code)
    assert [(b.kind, b.name) for b in blocks] == [
        ("namespace", "a::b"), ("linkage", ""), ("body", ""), ("body", "")]
    assert cxx.at_file_scope(blocks, code.index("void"))
    assert not cxx.at_file_scope(blocks, code.index("x;"))
    assert not cxx.at_file_scope(blocks, code.index("y;"))
    assert cxx.at_file_scope(blocks, code.index("z;"))


def test_matching_brackets():
    text = "f(a, (b), c[1]) + {x{}}"
    assert text[cxx.matching(text, 1)] == ")" and cxx.matching(text, 1) == 14
    assert cxx.matching(text, text.index("{")) == len(text) - 1
    assert cxx.matching("f((", 1) == 3


# -- the two users agree ------------------------------------------------------------------

AGREEMENT_SOURCE = r'''#include <cuda_fp16.h>
#include "local'name.h"
#define KERNEL extern "C" __global__
const long big = 1'000'000'000;  // don't "quote" me
const char* raw = R"(
__global__ void in_a_raw_string(int* x) { asm("x"); }
)";
/* it's a comment: __global__ void in_a_comment(int* x) */
#if BLOCK * 2 > 256 && defined(FAST) || BLOCK == 7
KERNEL void fast(float* x) {
    asm("fast");
}
#elif BLOCK >= 64
#  if defined(USE_HALF)
KERNEL void medium_half(__half* x) {
    asm("medium_half");
}
#  else
KERNEL void medium(float* x) {
    asm("medium");
}
#  endif
#else
extern "C" __global__ void slow(double* x) {
    asm("slow");
}
#endif
#if SOME_FUNCTION_MACRO(1)
extern "C" __global__ void either(int* x) {
    asm("either");
}
#endif
'''


@pytest.mark.parametrize("defines, names", [
    ((), ["slow", "either"]),
    (("BLOCK=64",), ["medium", "either"]),
    (("BLOCK=64", "USE_HALF"), ["medium_half", "either"]),
    (("BLOCK=256", "FAST"), ["fast", "either"]),
    (("BLOCK=7",), ["fast", "either"]),
])
def test_signature_parser_and_simulator_see_the_same_code(defines, names):
    kernels = find_kernels(AGREEMENT_SOURCE, defines)
    assert [k.name for k in kernels] == names
    # every kernel body holds one asm statement on the line after the name
    problems = [u for u in sim_source.find_unsupported(AGREEMENT_SOURCE, defines)
                if "inline PTX" in u.message]
    assert [u.line for u in problems] == [k.line + 1 for k in kernels]
    scanned = cxx.scan(AGREEMENT_SOURCE, defines)
    visible_code = [line for line in scanned.visible.split("\n") if not line.lstrip().startswith("#")]
    active_code = [line for line in scanned.active.split("\n") if line.strip()]
    assert [line for line in visible_code if line.strip()] == active_code


def test_simulator_without_defines_searches_every_branch():
    lines = [u.line for u in sim_source.find_unsupported(AGREEMENT_SOURCE)]
    assert lines == [11, 16, 20, 25, 30]


def test_dynamic_shared_rewrite_inside_extern_c_block_is_file_scope():
    src = 'extern "C" {\nextern __shared__ float s[];\n__global__ void k(float* x) { x[0] = s[0]; }\n}\n'
    out = sim_source.rewrite_dynamic_shared(src)
    assert "static thread_local float* const s" in out
    assert out.count("\n") == src.count("\n")


# -- speed --------------------------------------------------------------------------------

def _cell(lines=200):
    body = []
    for i in range(lines // 10):
        body += [f"#if BLOCK > {i}", f"// kernel {i}: it's \"quoted\"",
                 f'extern "C" __global__ void k{i}(const float* __restrict__ x, float* y, int n) {{',
                 "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
                 "    const char* s = \"a string\"; int big = 1'000'000;",
                 "    if (i < n) y[i] = 2.0f * x[i];  /* block */",
                 "}", "#else", f"__global__ void other{i}(int* p) {{}}", "#endif"]
    return "\n".join(body) + "\n"


def test_scanning_is_fast():
    src = _cell()
    cold = []
    for k in range(5):
        variant = src + f"// {time.time_ns()} {k}\n"
        start = time.perf_counter()
        find_kernels(variant, ("BLOCK=10",))
        sim_source.find_unsupported(variant, ("BLOCK=10",))
        cold.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(100):
        find_kernels(variant, ("BLOCK=10",))
        sim_source.find_unsupported(variant, ("BLOCK=10",))
    warm = (time.perf_counter() - start) / 100
    # generous bounds for a shared machine; the measured numbers are far below
    assert min(cold) < 0.05 and warm < 0.005


def test_stray_directives_and_elifdef():
    assert active_words("#endif\n#else\na\n") == ["a"]
    src = "#ifdef A\na\n#elifdef B\nb\n#elifndef C\nnot_c\n#endif\n"
    assert active_words(src, ["B"]) == ["b"]
    assert active_words(src) == ["not_c"]
    assert active_words(src, ["C"]) == []
