"""Preprocessor defines: ``defines=`` of ``wb.compile`` (and of every API
built on it) takes a dict, whose values are written as C literals, or a list
of ``"NAME"`` / ``"NAME=VALUE"``; any other form is refused with
``DefinesError`` before anything is compiled."""
import numpy as np
import pytest

import workbench as wb
from workbench.cxx.defines import c_literal, normalise_defines
from workbench.errors import DefinesError

SOURCE = r'''
#ifndef OFFSET_ON
#define OFFSET_ON 0
#endif
extern "C" __global__ void fill(double* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i < WIDTH ? SCALE * i + (OFFSET_ON ? OFFSET : 0) : -1.0;
}
extern "C" __global__ void constants(double* out, float* single)
{
    out[0] = A; out[1] = B; out[2] = C; out[3] = sizeof(TYPE);
    single[0] = F;
}
'''


def test_a_dict_defines_each_name_as_its_value(backend):
    m = wb.compile(SOURCE, name="defines_dict",
                   defines={"WIDTH": 512, "SCALE": 0.5, "OFFSET_ON": True, "OFFSET": np.int64(-3),
                            "A": 0.1, "B": 1e-300, "C": -2.5e10, "TYPE": "double",
                            "F": np.float32(0.1)})
    n = 1000
    out = wb.allocate(n, np.float64)
    m["fill"](out, n, n=n)
    i = np.arange(n)
    expected = np.where(i < 512, 0.5 * i - 3, -1.0)  # WIDTH=1 would leave one element
    np.testing.assert_array_equal(wb.to_host(out), expected)
    values, single = wb.allocate(4, np.float64), wb.allocate(1, np.float32)
    m["constants"](values, single, grid=1, block=1)
    np.testing.assert_array_equal(wb.to_host(values), [0.1, 1e-300, -2.5e10, 8])  # exact: repr digits
    assert wb.to_host(single)[0] == np.float32(0.1)


def test_a_list_of_names_and_values_means_the_same(backend):
    listed = wb.compile(SOURCE, name="defines_list",
                        defines=["WIDTH=4", "SCALE=2.0", "OFFSET_ON", "OFFSET=1", "A=0", "B=0",
                                 "C=0", "TYPE=int", "F=0"])
    out = wb.allocate(8, np.float64)
    listed["fill"](out, 8, n=8)
    np.testing.assert_array_equal(wb.to_host(out), [1, 3, 5, 7, -1, -1, -1, -1])


@pytest.mark.parametrize("defines, words", [
    ({"WIDTH": None}, ["'WIDTH'", "None", "True"]),
    ({"WIDTH": [512]}, ["'WIDTH'", "list"]),
    ({"WIDTH": float("nan")}, ["'WIDTH'", "nan", "no C literal"]),
    ({"2WIDE": 1}, ["'2WIDE'", "not a macro name"]),
    ({"WIDTH"}, ["set", "dict"]),
    (["WIDTH", 512], ["512", "int", "dict"]),
    (512, ["int", "dict"]),
    (["N=1\nM=2"], ["spans lines"]),
])
def test_other_forms_are_refused_before_anything_compiles(simulator, defines, words):
    before = dict(wb.modules)
    with pytest.raises(DefinesError) as caught:
        wb.compile(SOURCE, name="defines_refused", defines=defines)
    assert all(w in str(caught.value) for w in words), str(caught.value)
    assert isinstance(caught.value, (TypeError, ValueError)) and "\n" not in str(caught.value)
    assert dict(wb.modules) == before


def test_values_are_written_as_c_literals():
    assert normalise_defines({"N": 512, "NEG": -3, "ON": True, "OFF": np.bool_(False),
                              "X": 0.25, "BIG": 1e300, "ONE": 1.0, "S": np.float32(1e-7),
                              "T": "unsigned int", "EMPTY": ""}) == (
        "N=512", "NEG=(-3)", "ON=1", "OFF=0", "X=0.25", "BIG=1e+300", "ONE=1.0", "S=1.0e-07f",
        "T=unsigned int", "EMPTY=")
    assert normalise_defines("N=4") == ("N=4",) and normalise_defines(None) == ()
    assert normalise_defines(("DEBUG", "F(x)=((x)*2)")) == ("DEBUG", "F(x)=((x)*2)")
    assert c_literal(np.float32(3.0)) == "3.0f" and c_literal(np.uint64(2**64 - 1)) == str(2**64 - 1)
