"""wb.tune's checks: module variables (constants=), references that cannot
check anything, arguments no configuration can take, and the device's limits.
Each TuneError's advice is followed to see that it works."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import TuneError

pytestmark = pytest.mark.usefixtures("private_tuning_cache")

FAST = {"max_time": 0.005, "min_repeat": 3}
N = 256

# out = x * coef[i % 4] * W, unless SKIP (then nothing is written)
SCALE = r"""
#ifndef SKIP
#define SKIP 0
#endif
__constant__ float coef[4];
extern "C" __global__ void scale(float* out, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (SKIP || i >= n) return;
    out[i] = x[i] * coef[i % 4] * W;
}
"""


def scale_source(tag: str) -> str:
    # a source of the test's own: the simulator shares one module's variables
    # between compiles of the same text, so no test sees another's values
    return f"// {tag}\n" + SCALE


def scale_args(out=None):
    x = np.random.default_rng(7).uniform(0.5, 1.5, N).astype(np.float32)
    return (np.zeros(N, np.float32) if out is None else out), x, np.int32(N)


COEF = np.array([1.5, -2.0, 0.25, 3.0], np.float32)


def expected_scale(out, x, n, w=2):
    return x.astype(np.float64) * np.resize(COEF, N) * w


def test_constants_reach_every_configuration(backend):
    src = scale_source("constants")
    space = {"block": [64, 128], "W": [2]}
    missing = wb.tune(src, scale_args(), space=space, n=N, reference=expected_scale,
                      cache=False, progress=False, **FAST)
    assert [r["status"] for r in missing.rows] == ["check", "check"]   # coef never set: zeros
    r = wb.tune(src, scale_args(), space=space, n=N, constants={"coef": COEF},
                reference=expected_scale, cache=False, progress=False, **FAST)
    assert [row["status"] for row in r.rows] == ["ok", "ok"]
    # a Kernel whose module was given the values with set_global carries them
    m = wb.compile(scale_source("carried"), defines=["W=2"])
    m.set_global("coef", COEF)
    carried = wb.tune(m["scale"], scale_args(), space={"block": [64, 128, 256]}, n=N,
                      reference=expected_scale, cache=False, progress=False, **FAST)
    assert [row["status"] for row in carried.rows] == ["ok", "ok", "ok"]
    # and so does wb.tuned's compile of the tuned configuration
    tk = wb.tuned(m["scale"], verbose=False)
    out = wb.to_device(np.zeros(N, np.float32))
    x = wb.to_device(scale_args()[1])
    tk(out, x, np.int32(N), n=N)
    np.testing.assert_allclose(wb.to_host(out), expected_scale(None, scale_args()[1], N),
                               rtol=1e-6)
    with pytest.raises(TuneError, match=r"names \['coeff'\].*it has: coef"):
        wb.tune(src, scale_args(), space=space, n=N, constants={"coeff": COEF}, progress=False)


def test_a_default_output_that_checks_nothing_stops_the_tune(simulator):
    src = scale_source("zeros")
    space = {"SKIP": [0, 1], "W": [2, 3]}
    with pytest.raises(TuneError) as info:
        wb.tune(src, scale_args(), space=space, n=N, block=64, cache=False, progress=False, **FAST)
    message = str(info.value)
    assert "left argument 0 with its initial contents (all zeros)" in message
    assert "constants=" in message and "coef" in message   # the source reads a __constant__
    for advice in ("reference=", "np.full(shape, np.nan)", "reference=False"):
        assert advice in message
    # each piece of advice works:
    # the values the kernel reads, given: the default output is a reference again
    r = wb.tune(src, scale_args(), space=space, n=N, block=64, constants={"coef": COEF},
                cache=False, progress=False, **FAST)
    assert "default configuration" in r.reference
    assert [row["status"] for row in r.rows] == ["ok", "check", "check", "check"]
    # a reference function
    r = wb.tune(src, scale_args(), space=space, n=N, block=64, constants={"coef": COEF},
                reference=lambda out, x, n: expected_scale(out, x, n, 3), cache=False,
                progress=False, **FAST)
    assert r.best == {"SKIP": 0, "W": 3} and len(r.ok_rows()) == 1
    # an output that starts from values the kernel overwrites: a configuration
    # that writes nothing (SKIP=1) no longer passes
    nan_start = scale_args(np.full(N, np.nan, np.float32))
    r = wb.tune(scale_source("nan start"), nan_start, space={"SKIP": [0, 1]}, n=N, block=64,
                defines=["W=2"], cache=False, progress=False, **FAST)
    assert [row["status"] for row in r.rows] == ["ok", "check"]
    # no check at all, said so
    r = wb.tune(src, scale_args(), space=space, n=N, block=64, reference=False, cache=False,
                progress=False, **FAST)
    assert r.reference == "nothing (reference=False)" and len(r.ok_rows()) == 4


TWO_OUTPUTS = r"""
extern "C" __global__ void split(float* lo, float* hi, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { lo[i] = x[i] - 1.0f; hi[i] = x[i] + W; }
}
"""


def test_several_outputs_take_the_advice_given(simulator):
    x = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    args = (np.zeros(N, np.float32), np.zeros(N, np.float32), x, np.int32(N))
    space = {"block": [64, 128], "W": [1, 2]}
    with pytest.raises(TuneError, match="several pointers.*output=<index>.*reference=False"):
        wb.tune(TWO_OUTPUTS, args, space=space, n=N, progress=False)
    r = wb.tune(TWO_OUTPUTS, args, space=space, n=N, reference=False, cache=False,
                progress=False, **FAST)
    assert len(r.ok_rows()) == 4 and not r.checked
    r = wb.tune(TWO_OUTPUTS, args, space=space, n=N, output=1, cache=False, progress=False,
                reference=lambda lo, hi, x, n: x + 1.0, **FAST)
    assert [row["status"] for row in r.rows] == ["ok", "check", "ok", "check"]   # W=1 only
    # Kernel Tuner's answer list: the entry that is not None names the output
    r = wb.tune(TWO_OUTPUTS, args, space=space, n=N, cache=False, progress=False,
                reference=[x - 1.0, None, None, None], **FAST)
    assert len(r.ok_rows()) == 4 and r.checked


def test_what_no_configuration_can_take_raises_with_the_reason(simulator):
    src = scale_source("arguments")
    out, x, n = scale_args()
    options = dict(space={"block": [64, 128]}, n=N, defines=["W=2"], constants={"coef": COEF},
                   cache=False, progress=False, **FAST)
    with pytest.raises(TuneError, match="scale takes 3 arguments .* given 2"):
        wb.tune(src, (out, x), **options)
    with pytest.raises(TuneError, match=r"argument 1 \(x, const float\*\) points to float32; "
                                        r"the tune was given a float64 array"):
        wb.tune(src, (out, x.astype(np.float64), n), **options)
    with pytest.raises(TuneError, match=r"argument 2 \(n, int\) is a value"):
        wb.tune(src, (out, x, x), **options)
    # one the workbench refuses only at the launch: every configuration would
    with pytest.raises(TuneError, match="no configuration of scale can run with these arguments"):
        wb.tune(src, (out, x, 2**40), **options)
    # a reference of the wrong size; one of the right size in another shape is reshaped
    with pytest.raises(TuneError, match=r"reference has shape \(128,\).*has shape \(256,\)"):
        wb.tune(src, scale_args(), reference=lambda out, x, n: x[:128], **options)
    r = wb.tune(src, scale_args(), reference=lambda o, x, n: expected_scale(o, x, n).reshape(16, 16),
                **options)
    assert len(r.ok_rows()) == 2


BOUNDED = r"""
extern "C" __global__ void __launch_bounds__(128) bounded(float* out, int n)
{
    __shared__ float tile[S];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = (float)i;
    __syncthreads();
    if (i < n) out[i] = tile[threadIdx.x];
}
"""


def test_configurations_beyond_the_device_limits_are_restricted_not_failed(simulator):
    props = wb.backend().device_properties()
    huge = props.shared_memory_per_block_optin + 4
    too_many = 2 * props.max_threads_per_block
    space = {"block": [64, 128, 256, too_many], "S": [1024, 20000]}    # 4 KB, 80 KB of static
    r = wb.tune(BOUNDED, (np.zeros(N, np.float32), np.int32(N)), space=space, n=N,
                shared_mem=lambda c: huge if (c["block"], c["S"]) == (128, 1024) else 0,
                reference=lambda out, n: np.arange(N, dtype=np.float32), cache=False,
                progress=False, **FAST)
    rows = {(row["config"]["block"], row["config"]["S"]): row for row in r.rows}
    assert len(rows) == 8 and not r.failed() and r.best == {"block": 64, "S": 1024}
    # known before compiling: never compiled
    for key in ((too_many, 1024), (too_many, 20000)):
        assert rows[key]["status"] == "restricted" and rows[key]["compile_s"] == 0.0
        assert f"{too_many} threads per block" in rows[key]["reason"]
        assert f"allows {props.max_threads_per_block}" in rows[key]["reason"]
    assert rows[(128, 1024)]["status"] == "restricted" and rows[(128, 1024)]["compile_s"] == 0.0
    assert f"{huge} bytes of dynamic shared memory" in rows[(128, 1024)]["reason"]
    # known once compiled, where the compiler tells (NVRTC: the GPU's own figures)
    if wb.compile(BOUNDED, defines=["S=1024"])["bounded"].resources.max_threads_per_block:
        assert rows[(256, 1024)]["status"] == "restricted"
        assert "at most 128" in rows[(256, 1024)]["reason"]          # __launch_bounds__(128)
        for block in (64, 128, 256):
            assert rows[(block, 20000)]["status"] == "restricted"
            assert "80000 bytes of static shared memory" in rows[(block, 20000)]["reason"]
        assert len(r.limited()) == 7
        assert "7 over the device's limits" in repr(r) and "over the device" in r._repr_html_()
    with pytest.raises(TuneError, match="every allowed configuration breaks the device's limits"):
        wb.tune(BOUNDED, (np.zeros(N, np.float32), np.int32(N)), n=N,
                space={"block": [too_many], "S": [1024]}, progress=False)


TEMPLATED = r"""
template <int K>
__global__ void fill(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(i % K);
}
extern "C" __global__ void other(float* out) { out[0] = 1.0f; }
"""


def test_each_tune_error_says_what_works(simulator):
    """Each message's advice, followed, gives a tune that runs."""
    out = np.zeros(N, np.float32)
    expected = lambda out, n: (np.arange(N) % 4).astype(np.float32)   # noqa: E731
    options = dict(n=N, block=64, cache=False, progress=False, **FAST)

    def works(**kw):
        return wb.tune(**{"kernel": TEMPLATED, "args": (out, np.int32(N)),
                          "space": {"K": [4]}, "reference": expected, **options, **kw})

    with pytest.raises(TuneError, match="has 2 kernels .*name one with kernel_name="):
        works()
    assert works(kernel_name="fill").best == {"K": 4}
    template = wb.compile(TEMPLATED).templates["fill"]
    with pytest.raises(TuneError, match="no instantiations .*pass the source text instead"):
        works(kernel=template)
    with pytest.raises(TuneError, match="grid_div_x.*give problem_size="):
        works(kernel_name="fill", grid_div_x=[64], n=None)
    assert works(kernel_name="fill", grid_div_x=[64], n=None, problem_size=N).best
    with pytest.raises(TuneError, match="give them or grid= / n=, not both"):
        works(kernel_name="fill", grid_div_x=[64], problem_size=N)
    with pytest.raises(TuneError, match="one entry per argument: 2, not 3"):
        works(kernel_name="fill", reference=[None, None, None])
    with pytest.raises(TuneError, match="exactly one entry that is not None"):
        works(kernel_name="fill", reference=[None, None])
    assert works(kernel_name="fill", reference=[expected(None, N), None]).checked
    with pytest.raises(TuneError, match="return the expected output array"):
        works(kernel_name="fill", reference=lambda out, n: None)
    with pytest.raises(TuneError, match="with client="):
        works(kernel_name="fill", timeout=5)
    with pytest.raises(TuneError, match="give True, False or 'refresh'"):
        works(kernel_name="fill", cache="always")
    assert works(kernel_name="fill", cache="refresh").best == {"K": 4}
