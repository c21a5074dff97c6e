"""How a notebook shows an error that went through the workbench.

An error a user caused (every :class:`~workbench.WorkbenchError`, the
builtin-typed ones such as :class:`~workbench.errors.DefinesError` included)
is shown as the user's frames and the message: the workbench's internal
frames, and any exception it was handling when it raised, say nothing the
message does not. A compile error is its diagnostics; an interrupted launch
(:class:`~workbench.errors.Interrupted`) is one line. An exception raised in
the user's own code that the workbench called (a reference function, a
restriction) keeps the user's frames and its own chained exceptions, the
workbench's frames left out. A syntax error is shown as IPython shows it.
Anything else, a bug of the workbench included, shows IPython's full
traceback.
"""
from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types

from ..errors import CompileError, CompilerNotFound, Interrupted, WorkbenchError

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.cache
def _library_dirs() -> tuple:
    """Installed code and the standard library: neither the user's nor the workbench's."""
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.abspath(paths[key]) + os.sep
                         for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}))


#: Code the workbench generates names itself so (core/arguments.py's checkers).
GENERATED_PREFIX = "<workbench "
#: How IPython names a cell it compiled (a kernel may name them as files instead).
CELL_PREFIX = "<ipython-input-"


def in_workbench(tb) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith((PACKAGE_DIR, GENERATED_PREFIX))


def _is_users(tb, cells=()) -> bool:
    """A frame of the user's own code: a notebook cell, or a real file that is
    neither the workbench's nor an installed library's nor the standard
    library's (generated code such as a dataclass's ``<string>`` is not)."""
    name = tb.tb_frame.f_code.co_filename
    if name in cells or name.startswith(CELL_PREFIX):
        return True
    return not name.startswith(("<", PACKAGE_DIR, *_library_dirs()))


def _entries(tb) -> list:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def kind_of(evalue, tb, cells=()) -> str:
    """"interrupted", "compile", "missing compiler", "users" (an error the
    user caused through the workbench, or one raised in the user's own code
    that the workbench called) or "other"."""
    if isinstance(evalue, Interrupted):
        return "interrupted"
    if isinstance(evalue, CompileError):
        return "compile"
    if isinstance(evalue, CompilerNotFound):
        return "missing compiler"
    entries = _entries(tb)
    through = any(in_workbench(e) for e in entries)
    if isinstance(evalue, WorkbenchError) or (through and isinstance(evalue, KeyboardInterrupt)):
        return "users"
    if through and not in_workbench(entries[-1]):
        last_wb = max(i for i, e in enumerate(entries) if in_workbench(e))
        if any(_is_users(e, cells) for e in entries[last_wb + 1:]):
            return "users"  # raised in a function of the user's that the workbench called
    return "other"


def users_frames(tb, cells=()):
    """A traceback of ``tb``'s entries up to the first of the workbench's,
    then only the user's own (a new chain: the exception's own
    ``__traceback__`` is left as it was)."""
    kept, inside = [], False
    for e in _entries(tb):
        inside = inside or in_workbench(e)
        if not inside or (not in_workbench(e) and _is_users(e, cells)):
            kept.append(e)
    out = None
    for e in reversed(kept):
        out = types.TracebackType(out, e.tb_frame, e.tb_lasti, e.tb_lineno)
    return out


def one_line(etype, evalue) -> str:
    return f"{etype.__name__}: {evalue}" if str(evalue) else etype.__name__


def _cells(shell) -> frozenset:
    """The names IPython compiled this session's cells under."""
    return frozenset(getattr(getattr(shell, "compile", None), "_filename_map", None) or ())


def show_error(shell, etype, evalue, tb, tb_offset=None):
    """IPython's custom exception handler (see the module docstring)."""
    cells = _cells(shell)
    if isinstance(evalue, SyntaxError):
        # a cell that does not parse reaches here too (IPython hands the
        # parser's error to a custom handler): show it as IPython would
        shell.showsyntaxerror(running_compiled_code=any(
            e.tb_frame.f_code.co_filename in cells for e in _entries(tb)))
        return None
    kind = kind_of(evalue, tb, cells)
    if kind == "other":
        shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None
    sys.last_type, sys.last_value, sys.last_traceback = etype, evalue, tb  # %debug, %tb
    if sys.version_info >= (3, 12):
        sys.last_exc = evalue
    if kind == "interrupted":
        etype = KeyboardInterrupt  # (what the front end names it: the interrupt it asked for)
        stb = [f"KeyboardInterrupt: {evalue}"]
    elif kind == "compile":
        stb = [f"CompileError: {str(evalue).splitlines()[0]} (diagnostics above)"
               if getattr(evalue, "_displayed", False) else f"CompileError: {evalue}"]
    elif kind == "missing compiler":
        stb = [one_line(etype, evalue)]  # what to install is the whole story
    else:
        # an exception the workbench was handling when it raised is its own
        # business; one raised in the user's code keeps what it was handling
        entries = _entries(tb)
        implicit = (evalue.__cause__ is None and evalue.__context__ is not None
                    and bool(entries) and in_workbench(entries[-1]))
        suppressed = evalue.__suppress_context__
        if implicit:
            evalue.__suppress_context__ = True
        try:
            stb = shell.InteractiveTB.structured_traceback(etype, evalue,
                                                           users_frames(tb, cells), tb_offset)
        finally:
            evalue.__suppress_context__ = suppressed
    shell._showtraceback(etype, evalue, stb)  # a custom handler shows what it returns itself
    if kind == "users" and shell.call_pdb:
        shell.debugger(force=True)  # %pdb: as IPython's own showtraceback does
    return stb


def register(ipython) -> None:
    # every exception passes here: show_error leaves those that are not the
    # workbench's business to IPython's own display
    ipython.set_custom_exc((Exception, KeyboardInterrupt), show_error)


def unregister(ipython) -> None:
    ipython.set_custom_exc((), None)
