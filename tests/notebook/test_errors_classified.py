"""Which errors a notebook shows as the user's and which keep their whole
traceback: a cell that does not parse is IPython's syntax error; an error
the workbench did not mean (its own ``raise`` of a RuntimeError included) is
a bug and keeps its frames; an error the user's own code raised keeps what
it was handling; frames of generated and library code between the
workbench's are left out; ``%pdb`` opens on a user's error."""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.ipython import tracebacks

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def shell():
    """IPython's test shell on the simulator, the workbench loaded, a kernel ``scale``."""
    from IPython.testing.globalipapp import get_ipython
    from helpers import using_backend
    ip = get_ipython()
    ip.run_line_magic("load_ext", "workbench")
    with using_backend("simulator"):
        for cell in ("import numpy as np, workbench as wb",
                     '%%cuda -q --name classified_scale\nextern "C" __global__ void scale('
                     'float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; '
                     'if (i < n) x[i] *= 2; }',
                     "x = wb.to_device(np.random.default_rng(2).random(64, np.float32))"):
            assert ip.run_cell(cell).success, cell
        yield ip


def run(shell, code, capsys):
    """Run ``code``; its error (raised or parsing) and what the notebook showed."""
    capsys.readouterr()
    result = shell.run_cell(code)
    captured = capsys.readouterr()
    return (result.error_in_exec or result.error_before_exec,
            ANSI.sub("", captured.out + captured.err))


def test_a_cell_that_does_not_parse_is_shown_as_ipython_shows_a_syntax_error(shell, capsys):
    error, shown = run(shell, "x = = 1", capsys)
    assert isinstance(error, SyntaxError)
    assert "SyntaxError" in shown and "x = = 1" in shown, shown
    assert "Traceback" not in shown, shown  # no frames of IPython's own parsing
    assert "interactiveshell" not in shown and "compilerop" not in shown, shown


def test_a_runtime_error_the_workbench_raises_itself_keeps_its_whole_traceback(
        shell, capsys, monkeypatch):
    """A worker that speaks another ABI: a ``raise RuntimeError`` in the
    workbench's code, a bug rather than the user's mistake."""
    from workbench.backends.simulator import worker
    wb.backend().close()  # the next launch starts a worker
    monkeypatch.setattr(worker, "ABI_VERSION", worker.ABI_VERSION + 1000)
    error, shown = run(shell, "scale(x, 64, grid=1, block=64)", capsys)
    monkeypatch.undo()
    assert isinstance(error, RuntimeError) and not isinstance(error, wb.WorkbenchError)
    assert "speaks ABI" in shown
    assert "worker.py" in shown and 'raise RuntimeError(f"simulator worker speaks ABI' in shown, \
        shown
    error, _ = run(shell, "scale(x, 64, grid=1, block=64)", capsys)
    assert error is None  # (the next worker speaks the ABI again)


def test_an_error_the_users_function_raised_while_handling_another_keeps_both(shell, capsys):
    code = ("def lookup():\n"
            "    try:\n"
            "        {}['k']\n"
            "    except KeyError:\n"
            "        raise ValueError('no k in the table')\n"
            "wb.bench(lookup)")
    error, shown = run(shell, code, capsys)
    assert isinstance(error, ValueError) and isinstance(error.__context__, KeyError)
    assert "KeyError" in shown and "During handling of the above exception" in shown, shown
    assert "raise ValueError('no k in the table')" in shown
    assert tracebacks.PACKAGE_DIR not in shown


def test_generated_code_between_the_workbench_and_the_users_function_is_left_out(
        shell, capsys):
    code = ("from dataclasses import dataclass\n"
            "@dataclass\n"
            "class Size:\n"
            "    n: int\n"
            "    def __post_init__(self):\n"
            "        raise ValueError(f'n={self.n} is not a size')\n"
            "wb.bench(Size, -1)")
    error, shown = run(shell, code, capsys)
    assert isinstance(error, ValueError)
    assert "n=-1 is not a size" in shown, shown
    assert "raise ValueError(f'n={self.n} is not a size')" in shown, shown
    assert "wb.bench(Size, -1)" in shown, shown
    assert "<string>" not in shown and "__create_fn__" not in shown, shown
    assert tracebacks.PACKAGE_DIR not in shown


def test_pdb_opens_the_debugger_on_a_users_error(shell, capsys, monkeypatch):
    opened = []
    monkeypatch.setattr(shell, "debugger", lambda force=False: opened.append(force))
    monkeypatch.setattr(shell, "call_pdb", True)
    error, _ = run(shell, "scale(x, 64)", capsys)
    assert isinstance(error, wb.LaunchConfigError)
    assert opened, "%pdb did not open the debugger"


@pytest.mark.parametrize("code, builtin, words", [
    ("wb.bench(lambda: None, repeat=0)", ValueError, "give a positive number of timed calls"),
    ("wb.sweep(lambda size: None)", ValueError, "sweep() needs sizes=[...]"),
    ("wb.memory.leaks(since=-1)", ValueError, "takes a cell's execution count"),
    ("wb.memory.tracking('yes')", TypeError, "tracking() takes True or False"),
    ("wb.backend('simulator', devices=0)", ValueError, "must be from 1 to 16"),
])
def test_a_bad_argument_is_shown_as_its_message_and_is_still_the_builtin_error(
        shell, capsys, code, builtin, words):
    error, shown = run(shell, code, capsys)
    assert isinstance(error, wb.WorkbenchError) and isinstance(error, builtin)
    assert words in shown and code in shown, shown
    assert tracebacks.PACKAGE_DIR not in shown, shown  # (no frame of the workbench's own)
    error, shown = run(shell, f"try:\n    {code}\nexcept {builtin.__name__}:\n    caught = 1",
                       capsys)
    assert error is None and shell.user_ns["caught"] == 1
