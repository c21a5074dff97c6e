"""The %%cuda magic in a real IPython InteractiveShell."""
import numpy as np
import pytest

import workbench as wb
from workbench.ipython.cuda_magic import DIAGNOSTICS_MIME, parse_options

from helpers import using_backend

SAXPY = """%%cuda {opts}
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}}
"""


def parse(line):
    return parse_options(line)


def test_option_parsing():
    a = parse("--name m --arch sm_89 -D N=4 -DFLAG --std c++17 --fast-math "
              "--option=-lineinfo -O --extra-device-vectorization "
              "--instantiate 'scale<float>' -i 'scale<double, 2>' --check")
    assert a.name == "m" and a.arch == "sm_89" and a.std == "c++17"
    assert a.defines == ["N=4", "FLAG"]
    assert a.fast_math and a.check
    assert a.options == ["-lineinfo", "--extra-device-vectorization"]
    assert a.instantiate == ["scale<float>", "scale<double, 2>"]


def test_unknown_option_is_an_error():
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="frobnicate"):
        parse("--frobnicate")


def test_cell_binds_kernels_and_runs(shell, backend, capsys):
    result = shell.run_cell(SAXPY.format(opts="--name magic_saxpy"))
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    assert "magic_saxpy: saxpy" in out and ("compiled in" in out or "cache hit" in out)
    saxpy = shell.user_ns["saxpy"]
    assert isinstance(saxpy, wb.Kernel) and wb.modules["magic_saxpy"]["saxpy"] is saxpy
    x = wb.to_device(np.arange(10, dtype=np.float32))
    y = wb.to_device(np.ones(10, dtype=np.float32))
    saxpy(3.0, x, y, 10, grid=1, block=32)
    np.testing.assert_array_equal(wb.to_host(y), 3 * np.arange(10) + 1)
    # running it again is a cache hit and says so
    shell.run_cell(SAXPY.format(opts="--name magic_saxpy"))
    assert "cache hit" in capsys.readouterr().out


def test_rerun_replaces_kernels(shell, backend):
    shell.run_cell('%%cuda --name rerun -q\nextern "C" __global__ void first_k(int* x) { x[0] = 1; }')
    assert "first_k" in shell.user_ns
    shell.run_cell('%%cuda --name rerun -q\nextern "C" __global__ void second_k(int* x) { x[0] = 2; }')
    assert "second_k" in shell.user_ns and "first_k" not in shell.user_ns


def test_defines_and_instantiate(shell, backend):
    src = ('%%cuda -q -D SCALE=3 --instantiate "mul<int>"\n'
           'template <typename T> __global__ void mul(T* x) { x[threadIdx.x] *= SCALE; }\n')
    assert shell.run_cell(src).success
    x = wb.to_device(np.arange(8, dtype=np.int32))
    shell.user_ns["mul"]["int"](x, grid=1, block=8)
    np.testing.assert_array_equal(wb.to_host(x), 3 * np.arange(8))


def test_a_define_that_is_not_a_macro_name_is_refused_in_one_line(shell, simulator, capsys):
    result = shell.run_cell('%%cuda -q -D 2N=4\nextern "C" __global__ void k(int* x) { x[0] = 1; }')
    assert isinstance(result.error_in_exec, wb.errors.DefinesError)
    out = capsys.readouterr().out
    assert "'2N' is not a macro name" in out and "compiler.py" not in out


def test_compile_error_fails_the_cell_with_cell_line_numbers(shell, backend, capsys):
    src = SAXPY.format(opts="-q").replace("a * x[i]", "a * undefined_x[i]")
    result = shell.run_cell(src)
    assert not result.success
    err = result.error_in_exec
    assert isinstance(err, wb.CompileError)
    (d,) = err.errors
    assert d.line == 4 and "undefined_x" in d.message  # the magic line is line 1
    out = capsys.readouterr().out
    assert "line 4" in out and "y[i] = a * undefined_x[i] + y[i];" in out
    assert "Traceback" not in out  # shown as diagnostics, not a Python traceback


def test_compile_error_publishes_the_diagnostics_mime_bundle(shell, backend):
    published = []
    pub = shell.display_pub
    original = pub.publish

    def record(data, *args, **kwargs):
        published.append(data)
        return original(data, *args, **kwargs)

    pub.publish = record
    try:
        shell.run_cell('%%cuda -q\nextern "C" __global__ void k(int* x) {\n  x[0] = nope;\n}')
    finally:
        pub.publish = original
    bundles = [d for d in published if DIAGNOSTICS_MIME in d]
    assert bundles, published
    payload = bundles[-1][DIAGNOSTICS_MIME]
    (diag,) = [d for d in payload["diagnostics"] if d["severity"] == "error"]
    assert diag["line"] == 3 and "nope" in diag["message"]
    assert "text/plain" in bundles[-1]


def test_workbench_state_survives_a_compile_error(shell, backend):
    shell.run_cell('%%cuda -q\nextern "C" __global__ void broken(int* x) { x[0] = ; }')
    assert shell.run_cell(SAXPY.format(opts="-q --name after_error")).success
    assert "after_error" in wb.modules


def test_warnings_are_shown_without_failing(shell, backend, capsys):
    src = ('%%cuda -q --name warns\nextern "C" __global__ void w(int* x) {\n'
           '    int unused_j;\n    x[0] = 1;\n}\n')
    result = shell.run_cell(src)
    assert result.success
    warnings = wb.modules["warns"].warnings
    assert warnings and warnings[0].severity == "warning" and warnings[0].line == 3
    assert "unused_j" in capsys.readouterr().out


def test_checked_fault_points_at_the_cells_line(shell):
    with using_backend("simulator"):
        assert shell.run_cell('%%cuda --check -q --name oob_cell\n'
                              'extern "C" __global__ void oob(float* x, int n) {\n'
                              '    int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
                              '    x[i + 1] = 1.0f;\n'
                              '}\n').success
        x = wb.allocate(64, np.float32)
        with pytest.raises(wb.KernelFault) as info:
            shell.user_ns["oob"](x, 64, grid=1, block=64)
        err = info.value
        assert err.line == 4 and "line 4" in str(err)          # cell line 4: the write
        assert err.block == (0, 0, 0) and err.thread == (63, 0, 0)
        y = wb.to_device(np.arange(4, dtype=np.float32))       # and the simulator carries on
        np.testing.assert_array_equal(wb.to_host(y), np.arange(4))


def test_argument_errors_show_the_users_line_not_the_workbench(shell, backend, capsys):
    shell.run_cell('%%cuda -q --name shown\nextern "C" __global__ void shown(float* x) { x[0] = 1; }')
    capsys.readouterr()
    result = shell.run_cell("import numpy as np, workbench as wb\n"
                            "x64 = wb.allocate(4, np.float64)\n"
                            "shown(x64, grid=1, block=1)\n")
    assert isinstance(result.error_in_exec, wb.KernelArgumentError)
    out = capsys.readouterr().out
    assert "shown(x64, grid=1, block=1)" in out            # the user's line
    assert "parameter 'x' (float*) takes a device array of float32" in out
    assert "kernel.py" not in out and "arguments.py" not in out and "_check" not in out  # no workbench internals


def test_backend_and_device_errors_show_the_users_line_not_the_workbench(shell, capsys):
    result = shell.run_cell("import workbench as wb\nwb.backend('tpu')\n")
    assert isinstance(result.error_in_exec, wb.BackendUnavailable)
    out = capsys.readouterr().out
    assert "wb.backend('tpu')" in out and "WORKBENCH_BACKEND" in out
    assert "session.py" not in out and "create_backend" not in out
    result = shell.run_cell("wb.device(7)\n")
    assert isinstance(result.error_in_exec, wb.DeviceError)
    out = capsys.readouterr().out
    assert "wb.device(7)" in out and "No device 7" in out
    assert "devices.py" not in out
