"""Compiler logs -> diagnostics on the cell's own line numbers."""
from workbench.diagnostics import format_diagnostics, parse_log
from workbench.errors import CompileError, Diagnostic

SOURCE = """extern "C" __global__ void k(float* y, int n) {
    int i = threadIdx.x;
    y[i] = undefined_name;
}"""

NVRTC_LOG = """cell.cu(3): error: identifier "undefined_name" is undefined
      y[i] = undefined_name;
             ^

cell.cu(2): warning #177-D: variable "j" was declared but never referenced
      int i = threadIdx.x;
          ^

1 error detected in the compilation of "cell.cu".
"""


def test_nvrtc_log_lines_columns_and_severity():
    diags = parse_log(NVRTC_LOG, SOURCE)
    assert [(d.severity, d.line, d.column) for d in diags] == [("error", 3, 12), ("warning", 2, 9)]
    assert diags[0].message == 'identifier "undefined_name" is undefined'


def test_cell_offset_and_backend_shift():
    # a %%cuda cell: the magic line is line 1, so source line 3 is cell line 4;
    # a backend that prepended 2 lines reports line 5 for source line 3.
    log = NVRTC_LOG.replace("cell.cu(3)", "cell.cu(5)")
    d = parse_log(log, SOURCE, line_shift=2, line_offset=1)[0]
    assert d.line == 4


def test_gcc_log():
    log = "/tmp/x/k.cpp:3:12: error: 'undefined_name' was not declared in this scope\n"
    (d,) = parse_log(log, SOURCE)
    assert (d.severity, d.line, d.column) == ("error", 3, 12)


def test_messages_inside_headers_have_no_line():
    log = "/usr/include/cuda_fp16.h(12): error: something broke\n"
    (d,) = parse_log(log, SOURCE)
    assert d.line is None and "cuda_fp16.h:12" in d.message


def test_unparseable_log_is_kept_as_one_error():
    (d,) = parse_log("nvrtc: error: unrecognized option --frobnicate", SOURCE)
    assert d.severity == "error" and "frobnicate" in d.message


def test_format_shows_the_offending_line_with_a_caret():
    text = format_diagnostics([Diagnostic("error", "boom", 4, 12)], SOURCE, line_offset=1)
    lines = text.splitlines()
    assert lines[0] == "line 4, column 12: error: boom"
    marked = [ln for ln in lines if ln.lstrip().startswith(">")]
    assert marked == ["  > 4 |     y[i] = undefined_name;"]
    assert lines[lines.index(marked[0]) + 1].endswith(" " * 11 + "^")


def test_compile_error_message_counts_errors_and_shows_source():
    err = CompileError([Diagnostic("error", "boom", 3, 12), Diagnostic("warning", "meh", 2)], SOURCE)
    msg = str(err)
    assert msg.startswith("NVRTC failed with 1 error")
    assert "y[i] = undefined_name" in msg and len(err.errors) == 1
