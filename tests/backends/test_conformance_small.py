"""The small misuses: each error says what was wrong and what to do, and
the workbench keeps working."""
import unicodedata

import numpy as np
import pytest

import workbench as wb
from workbench.backends.simulator import build


def test_to_device_refuses_text(backend):
    with pytest.raises(TypeError, match="not a str.*encode"):
        wb.to_device("hello")
    with pytest.raises(TypeError, match="numeric"):
        wb.to_device(np.array(["a", "b"]))
    assert wb.to_host(wb.to_device([1, 2, 3])).tolist() == [1, 2, 3]


def test_an_allocation_larger_than_the_device_can_never_fit(backend):
    total = backend.memory_info()[1]
    with pytest.raises(wb.OutOfMemoryError, match="more than the whole device.*can never fit") as info:
        wb.allocate((total // 4 + 1024,), np.float32)
    assert "del " not in str(info.value)
    assert wb.to_host(wb.to_device(np.ones(4))).sum() == 4


def test_assert_names_the_cell_line(private_simulator):
    private_simulator()
    m = wb.compile('extern "C" __global__ void k(const int* x) {\n'
                   '    assert(x[threadIdx.x] > 0);\n}', line_offset=1)
    x = wb.to_device(np.zeros(2, np.int32))
    with pytest.raises(wb.KernelFault) as info:
        m["k"](x, grid=1, block=2)
    assert info.value.line == 3
    assert "cell.cu:3:" in str(info.value) and "cell.cu:2:" not in str(info.value)


def test_carets_sit_under_the_column_on_lines_with_wide_characters(backend):
    src = 'extern "C" __global__ void k(float* x) {\n    /* é中文 */ x[0] = undefined_name;\n}'
    with pytest.raises(wb.CompileError) as info:
        wb.compile(src)
    (d,) = info.value.errors
    line = src.splitlines()[1]
    assert line[d.column - 1:].startswith("undefined_name")
    shown = str(info.value).splitlines()
    caret = next(ln for ln in shown if ln.rstrip().endswith("^"))
    echoed = next(ln for ln in shown if "undefined_name;" in ln)

    def width(s):  # on screen, 中 and 文 take two columns each
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
    assert width(caret[:caret.index("^")]) == width(echoed[:echoed.index("undefined_name")])


def test_cached_kernels_load_without_a_compiler(private_simulator, monkeypatch):
    private_simulator()
    src = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }'
    wb.compile(src)                                   # built (or cached) with g++
    monkeypatch.setenv("WBSIM_CXX", "no-such-compiler-here")
    build.compiler_version.cache_clear()
    build.simulator_fingerprint.cache_clear()
    try:
        private_simulator()                           # a new worker process, no g++
        m = wb.compile(src)
        x = wb.to_device(np.ones(4, np.float32))
        m["twice"](x, grid=1, block=4)
        assert wb.to_host(x).tolist() == [2.0] * 4
        with pytest.raises(wb.BackendUnavailable, match="needs a C\\+\\+ compiler"):
            wb.compile(src.replace("2.0f", "3.0f"))  # a new build does need one
    finally:
        monkeypatch.delenv("WBSIM_CXX")
        build.compiler_version.cache_clear()
        build.simulator_fingerprint.cache_clear()


@pytest.mark.parametrize("define", ["A=1", "F=2", "L=2", "U=3"])
def test_a_define_named_like_a_prelude_identifier_compiles(backend, define):
    src = ('extern "C" __global__ void k(float* y) {\n'
           '#ifdef A\n    y[threadIdx.x] = 2.0f;\n#else\n    y[threadIdx.x] = 1.0f;\n#endif\n}')
    m = wb.compile(src, defines=[define], name="defines")
    y = wb.allocate((4,), np.float32)
    m["k"](y, grid=1, block=4)
    assert wb.to_host(y).tolist() == [2.0 if define == "A=1" else 1.0] * 4
