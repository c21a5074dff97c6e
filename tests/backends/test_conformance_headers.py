"""The C and C++ library headers device code includes compile on every
backend (NVRTC has none of its own: the workbench supplies stand-ins) and
mean the same: limits, math constants and functions, fixed-width types,
printf and assert."""
import numpy as np

import workbench as wb

HEADERS = ["cstdio", "stdio.h", "assert.h", "cassert", "cstdint", "stdint.h", "cmath", "math.h",
           "climits", "limits.h", "cfloat", "float.h", "cstddef", "stddef.h", "cstdlib",
           "cstring", "limits"]

SOURCE = "\n".join(f"#include <{h}>" for h in HEADERS) + r'''
extern "C" __global__ void facts(double* out, const float* x) {
    int i = threadIdx.x;
    assert(i < 16);
    if (i == 0) printf("facts from thread %d\n", i);
    switch (i) {
        case 0: out[i] = INT_MAX; break;
        case 1: out[i] = (double)UINT32_MAX; break;
        case 2: out[i] = FLT_MAX; break;
        case 3: out[i] = DBL_EPSILON; break;
        case 4: out[i] = std::numeric_limits<float>::max(); break;
        case 5: out[i] = std::numeric_limits<int>::min(); break;
        case 6: out[i] = M_PI; break;
        case 7: out[i] = std::sqrt(x[0]); break;
        case 8: out[i] = std::fabs(x[1]) + std::fmax(x[0], x[1]); break;
        case 9: out[i] = sizeof(int64_t) + sizeof(uint8_t) + sizeof(std::size_t); break;
        case 10: out[i] = std::isinf(std::numeric_limits<float>::infinity()) ? 1 : 0; break;
        case 11: out[i] = CHAR_BIT; break;
        case 12: out[i] = LLONG_MAX == 9223372036854775807LL; break;
        case 13: out[i] = FLT_EPSILON; break;
        case 14: out[i] = INFINITY; break;
        default: { float f = 0; std::memcpy(&f, x, sizeof f); out[i] = f; }
    }
}
'''


def test_standard_headers_compile_and_agree(backend, capfd):
    m = wb.compile(SOURCE, name="headers")
    x = wb.to_device(np.array([2.25, -3.5], np.float32))
    out = wb.allocate((16,), np.float64)
    m["facts"](out, x, grid=1, block=16)
    backend.synchronize()
    got = wb.to_host(out)
    f32 = np.finfo(np.float32)
    expected = [2**31 - 1, 2**32 - 1, float(f32.max), np.finfo(np.float64).eps, float(f32.max),
                -2**31, np.pi, 1.5, 3.5 + 2.25, 8 + 1 + 8, 1, 8, 1, float(f32.eps), np.inf, 2.25]
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    assert "facts from thread 0" in capfd.readouterr().out
