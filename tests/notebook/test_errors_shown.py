"""What a notebook shows for each mistake a user can make: run through a real
IPython shell, every error says what was wrong at the user's own line, with
no frame of the workbench and no internal exception chained before it; an
interrupted wait is one line; a bug (an error the workbench did not mean to
raise) still shows its whole traceback."""
from __future__ import annotations

import gc
import os
import re
import signal
import sys
import threading

import numpy as np
import pytest

import workbench as wb
from workbench.ipython import tracebacks

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RING = ("RSRC = 'struct Request { int a; }; struct Response { int b; };\\n"
        "__device__ void handle(const Request& i, Response& o) { o.b = 2 * i.a; }'\n"
        "REQ, RESP = np.dtype([('a', 'i4')]), np.dtype([('b', 'i4')])\n")
SPIN = ('%%cuda -q --name shown_spin\n'
        'extern "C" __global__ void spin(float* x, long long n) {\n'
        '    volatile float* v = x;\n'
        '    float zero = 0.0f;\n'
        '    for (long long i = 0; i < n; ++i) zero *= v[threadIdx.x];\n'
        '    x[threadIdx.x] += 1.0f + zero;  // (written once, at the end)\n'
        '}\n')

#: (code, the exception raised, words the shown error must hold)
MISUSE = [
    ("scale(x, 64)", wb.LaunchConfigError, "needs grid= and block="),
    ("scale(x, 64, grid=1, block=2048)", wb.LaunchConfigError, "at most 1024 per block"),
    ("scale(x, 64, grid=(0,), block=64)", wb.LaunchConfigError, "must be >= 1"),
    ("scale(x, 64, grid=1, block=64, shared_mem=10**9)", wb.LaunchConfigError,
     "dynamic shared memory"),
    ("scale(np.ones(4, np.float32), 64, grid=1, block=64)", wb.KernelArgumentError,
     "Copy it first: wb.to_device(array)"),
    ("scale(x, 2**40, grid=1, block=64)", wb.KernelArgumentError, "does not fit in int"),
    ("scale(x, grid=1, block=64)", wb.KernelArgumentError, "takes 2 arguments"),
    ("tk(x)", wb.KernelArgumentError, "no instantiation"),
    ("tk['double']", KeyError, "was not instantiated"),
    ("wb.tune(scale, (x, 64), space={})", ValueError, "space= is empty"),
    ("wb.tune(scale, (x, 64), space=[64])", ValueError, "takes a dict"),
    ("wb.tune(scale, (x, 64), space={'block': [64]}, objective='speed')", wb.TuneError,
     "choose from time"),
    ("wb.tune(scale, (x, 64), space={'block': [64]}, restrictions='nope > 2')", ValueError,
     "not parameters of the space"),
    ("wb.RingPanel(42)", TypeError, "RingPanel shows a ring made by wb.ring"),
    ("wb.ring(RSRC, request=REQ, response=RESP, handler='nope')", wb.CompileError,
     "handler='nope'"),
    ("wb.ring(RSRC, request=np.dtype([('zz', 'i4')]), response=RESP)",
     wb.rings.RingLayoutError, "not all members"),
    ("wb.ring(RSRC, request=REQ, response=RESP, capacity=30)", wb.rings.RingError,
     "multiple of 32"),
    ("wb.bench(42)", TypeError, "times a callable"),
    ("wb.sweep(scale, [])", ValueError, "sizes is empty"),
    ("wb.allocate(-5, np.float32)", ValueError, "whole number of elements"),
    ("wb.pinned(-3)", ValueError, "whole number of elements"),
    ("wb.allocate(10**13, np.uint8)", wb.OutOfMemoryError, "can never fit"),
    ("wb.to_device('abc')", TypeError, "encode it first"),
    ("wb.copy(x, wb.allocate(3, np.float32))", wb.WorkbenchError, "same size in bytes"),
    ("wb.memset(x, 'a')", wb.WorkbenchError, "0 to 255"),
    ("wb.Stream(priority='x')", TypeError, "takes an int"),
    ("wb.backend('tpu')", wb.BackendUnavailable, "Unknown backend"),
    ("wb.backend('simulator', frob=1)", TypeError, "has no option frob"),
    ("wb.device(7)", wb.DeviceError, "No device 7"),
    ("wb.timeline(since='yesterday')", TypeError, "time.time() value"),
    ("wb.report(42)", TypeError, "a file name"),
    ("wb.dashboard(42)", TypeError, "shows a kernel of the workbench"),
    ("wb.occupancy(scale, block=2048)", wb.LaunchConfigError, "exceeds the device's limit"),
    ("wb.memory.set_limit(fraction=3)", ValueError, "from 0 to 1"),
    ("wb.program('int main() { return 0; }', options='-o foo')", wb.WorkbenchError,
     "leave out -o"),
    ("wb.program('int main() { return 3; }')", wb.ProgramError, "exited with code 3"),
    ("wb.program('int main() { int* p = nullptr; p[3] = 1; return 0; }')", wb.ProgramError,
     "-fsanitize=address"),
    ("wb.python_kernel(42)", TypeError, "numba.cuda.jit or triton.jit"),
    ("wb.kernels.relu(wb.to_device(np.ones(4, np.int8)))", wb.KernelArgumentError,
     "must be float32 or float64"),
]


@pytest.fixture(scope="module")
def cells():
    """A shell on the simulator with the kernels and names the cases use."""
    from IPython.testing.globalipapp import get_ipython
    from helpers import using_backend
    ip = get_ipython()
    ip.run_line_magic("load_ext", "workbench")
    with using_backend("simulator"):
        for cell in ("import numpy as np, workbench as wb",
                     '%%cuda -q --name shown_scale\nextern "C" __global__ void scale(float* x, '
                     'int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) '
                     'x[i] *= 2; }',
                     '%%cuda -q --name shown_template\ntemplate <typename T> __global__ void '
                     'tk(T* x) { x[0] = 1; }',
                     "x = wb.to_device(np.random.default_rng(0).random(64, np.float32))",
                     RING, SPIN):
            assert ip.run_cell(cell).success, cell
        yield ip


def run(shell, code, capsys):
    """Run ``code``; its error and what the notebook showed (colours off)."""
    capsys.readouterr()
    result = shell.run_cell(code)
    captured = capsys.readouterr()
    return result.error_in_exec, ANSI.sub("", captured.out + captured.err)


def assert_users_error(error, shown: str, code: str):
    """What every error of a mistake looks like in a notebook."""
    assert error.__cause__ is None, f"{type(error).__name__} raised from {error.__cause__!r}"
    assert error.__context__ is None or error.__suppress_context__, \
        f"{type(error).__name__} chained to {error.__context__!r}"
    assert "During handling of the above exception" not in shown, shown
    assert "The above exception was the direct cause" not in shown, shown
    assert tracebacks.PACKAGE_DIR not in shown and "<workbench " not in shown, shown
    assert "site-packages" not in shown, shown
    if not isinstance(error, wb.CompileError):
        assert code.splitlines()[-1] in shown, shown  # the user's own line


@pytest.mark.parametrize("code,kind,words", MISUSE, ids=[c for c, _, _ in MISUSE])
def test_a_mistake_shows_the_users_line_and_the_message(cells, capsys, code, kind, words):
    error, shown = run(cells, code, capsys)
    assert isinstance(error, kind), f"{code}: {error!r}\n{shown}"
    assert words in shown, shown
    assert_users_error(error, shown, code)


def test_a_ring_handler_that_does_not_exist_is_named_not_located_in_generated_code(
        cells, capsys):
    error, shown = run(cells, "wb.ring(RSRC, request=REQ, response=RESP, handler='nope')",
                       capsys)
    assert isinstance(error, wb.CompileError)
    source_lines = 2  # RSRC's
    assert all(d.line is None or d.line <= source_lines for d in error.diagnostics)
    assert len(error.errors) == 1  # said once, not once per generated kernel
    assert "define that __device__ function" in shown and "name yours with handler=" in shown


@pytest.mark.parametrize("code", ["wb.RingPanel(42)", "wb.dashboard(42)"])
def test_a_panel_refused_leaves_nothing_to_fail_at_collection(cells, capsys, code):
    seen = []
    old, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        error, _ = run(cells, code, capsys)
        gc.collect()
    finally:
        sys.unraisablehook = old
    assert isinstance(error, TypeError)
    assert not seen, [s.exc_value for s in seen]


@pytest.fixture
def interrupt_after():
    """``interrupt_after(s)``: Ctrl-C (SIGINT to this process) in ``s`` seconds;
    one not yet sent when the test ends is called off."""
    timers = []

    def start(seconds: float) -> None:
        timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
        timers.append(timer)
        timer.start()
    yield start
    for timer in timers:
        timer.cancel()


def test_ctrl_c_on_a_long_simulator_launch_is_one_line_and_keeps_the_arrays(
        cells, capsys, interrupt_after):
    values = np.random.default_rng(1).random(32, np.float32)
    cells.user_ns["values"] = values
    cells.run_cell("y = wb.to_device(values)")
    interrupt_after(1.0)
    error, shown = run(cells, "spin(y, 10**13, grid=1, block=32)", capsys)
    assert isinstance(error, KeyboardInterrupt)
    lines = [ln for ln in shown.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, shown
    assert lines[0].startswith("KeyboardInterrupt: spin<<<1, 32>>> stopped after")
    assert "device arrays are intact" in lines[0]
    np.testing.assert_array_equal(wb.to_host(cells.user_ns["y"]), values)  # untouched
    # and the next launch runs, on a new worker
    error, _ = run(cells, "spin(y, 3, grid=1, block=32)", capsys)
    assert error is None
    np.testing.assert_allclose(wb.to_host(cells.user_ns["y"]), values.astype(np.float64) + 1,
                               rtol=1e-6)


SLOW_RING = r"""
#ifdef __WBSIM__
__device__ unsigned long long now_ns() { return __globaltimer(); }
#else
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
struct Request { int us; };
struct Response { int b; };
__device__ void handle(const Request& in, Response& out) {
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < 1000ull * in.us) { }
    out.b = 1;
}
"""


def test_ctrl_c_on_a_ring_is_a_keyboard_interrupt_not_a_hang(cells, capsys, interrupt_after):
    cells.user_ns["SLOW_RING"] = SLOW_RING
    error, shown = run(cells, "SLOW = np.dtype([('us', 'i4')])\n"
                              "slow = wb.ring(SLOW_RING, request=SLOW, response=RESP, capacity=32, "
                              "threads=64)\n"
                              "slow.send(np.full(1, 3_000_000, SLOW))\n", capsys)
    assert error is None, shown
    interrupt_after(0.3)
    error, shown = run(cells, "slow.recv(timeout=20)", capsys)
    assert isinstance(error, KeyboardInterrupt), shown  # as docs/rings.md promises
    assert "RingHang" not in shown and "During handling" not in shown, shown
    assert "ring 'handle' stopped (1 unanswered message given up)" in shown
    assert tracebacks.PACKAGE_DIR not in shown
    assert not cells.user_ns["slow"].running


def test_a_bug_keeps_its_whole_traceback(cells, capsys, monkeypatch):
    """An error the workbench did not mean to raise is not dressed as the
    user's: its frames inside the workbench stay visible."""
    from workbench.benchmarking import timer
    monkeypatch.setattr(timer, "input_sets", None)  # a slip inside the workbench
    error, shown = run(cells, "wb.bench(scale, x, 64, grid=1, block=64)", capsys)
    assert isinstance(error, TypeError)
    assert "timer.py" in shown and "inputs = input_sets(args, rotate)" in shown


def test_an_error_in_the_users_own_function_keeps_its_frames(cells, capsys):
    code = ("def reference(x, n):\n"
            "    return 1 / 0\n"
            "wb.tune(scale, (x, 64), space={'block': [32, 64]}, reference=reference, "
            "progress=False, cache=False)")
    error, shown = run(cells, code, capsys)
    assert isinstance(error, ZeroDivisionError), shown
    assert "return 1 / 0" in shown
    assert tracebacks.PACKAGE_DIR not in shown


GPU_MISUSE = [case for case in MISUSE
              if case[0].startswith(("scale(", "tk", "wb.allocate(", "wb.copy(", "wb.memset(",
                                     "wb.occupancy(", "wb.tune(", "wb.bench("))]


@pytest.mark.gpu
def test_mistakes_on_the_gpu_show_the_users_line_and_the_message(capsys):
    """The GPU's launch path (the C call of native/launch.c first) and its
    allocator raise the same errors, shown the same way."""
    from IPython.testing.globalipapp import get_ipython
    from helpers import using_backend
    ip = get_ipython()
    ip.run_line_magic("load_ext", "workbench")
    with using_backend("cupy"):
        for cell in ("import numpy as np, workbench as wb",
                     '%%cuda -q --name shown_scale_gpu\nextern "C" __global__ void scale(float* x, '
                     'int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) '
                     'x[i] *= 2; }',
                     '%%cuda -q --name shown_template_gpu\ntemplate <typename T> __global__ void '
                     'tk(T* x) { x[0] = 1; }',
                     "x = wb.to_device(np.random.default_rng(0).random(64, np.float32))",
                     "scale(x, 64, grid=1, block=64)"):  # (a configuration the C call knows)
            assert ip.run_cell(cell).success, cell
        for code, kind, words in GPU_MISUSE:
            if code.startswith("wb.allocate(10**13"):
                code = "wb.allocate(10**15, np.uint8)"  # more than any GPU has
            error, shown = run(ip, code, capsys)
            assert isinstance(error, kind), f"{code}: {error!r}\n{shown}"
            assert words in shown or kind is wb.OutOfMemoryError, shown
            assert_users_error(error, shown, code)
