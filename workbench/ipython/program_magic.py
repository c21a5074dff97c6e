"""The ``%%cuda_program`` cell magic: a complete CUDA C++ program (with
``main()``) built and run, its output streamed into the cell.

The line holds the magic's own options (all long: ``--name``, ``--files``,
``--backend``, ``--timeout``, ``--args``, ``--out``, ``--build-only``,
``--verbose``); everything else on it goes to the compiler as nvcc takes it
(``-O3 -lcurand -std=c++20 -Xcompiler -fopenmp -arch=sm_90``), and what
follows a lone ``--`` goes to the program::

    %%cuda_program -O3 -DN=1024 -- 10 20

A failed build shows its diagnostics and raises
:class:`~workbench.CompileError`; a program that exits with a non-zero code,
faults or runs past ``--timeout`` raises :class:`~workbench.ProgramError`:
the cell fails, Run-All stops.
"""
from __future__ import annotations

import difflib
import shlex

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

from ..errors import CompileError
from ..programs import DEFAULT_TIMEOUT_S, ProgramOptionError, add_file, build_program, program
from ..programs.options import known_long_option
from .cuda_magic import diagnostics_bundle

#: The magic's own options, and whether each takes a value.
_OWN = {"--name": True, "--files": True, "--backend": True, "--timeout": True, "--args": True,
        "--out": True, "--build-only": False, "--verbose": False, "--help": False, "-h": False}


def split_line(line: str) -> tuple[list[str], list[str], list[str]]:
    """``(the magic's options, compiler options, program arguments)`` of the
    magic's line (shell quoting)."""
    try:
        tokens = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise ProgramOptionError(f"cannot split the %%cuda_program line {line.strip()!r}: {exc} "
                                 "(close the quote, or escape it with a backslash)") from None
    own: list[str] = []
    compiler: list[str] = []
    program_args: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            program_args = tokens[i + 1:]
            break
        key = tok.split("=", 1)[0]
        if key in _OWN:
            if _OWN[key] and "=" not in tok and i + 1 < len(tokens):
                own.append(f"{key}={tokens[i + 1]}")  # argparse would read '-n 5' as a flag
                i += 1
            else:
                own.append(tok)
        else:
            _check_not_misspelled(key)
            compiler.append(tok)
        i += 1
    return own, compiler, program_args


def _check_not_misspelled(key: str) -> None:
    """A ``--name`` that is not nvcc's but close to one of the magic's own
    options (``--timout``, ``--build_only``) is a typo, not a compiler option."""
    if not key.startswith("--") or known_long_option(key):
        return
    own = [o for o in _OWN if o.startswith("--")]
    close = difflib.get_close_matches(key.replace("_", "-"), own, n=1, cutoff=0.75)
    if close:
        raise ProgramOptionError(
            f"{key} is not an option of %%cuda_program nor one the workbench knows of nvcc; did "
            f"you mean {close[0]}? The magic's own options: {', '.join(own)}; the rest of the "
            "line goes to the compiler")


@magics_class
class ProgramMagics(Magics):
    """``%%cuda_program``: whole CUDA programs."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--name", help="store the cell as this file (a header such as "
                              "kernels.cuh, or a source file such as util.cu) for later programs, "
                              "instead of running it")
    @magic_arguments.argument("--files", action="append", default=[], metavar="FILE[,FILE]",
                              help="stored source files to compile in with the cell (repeatable)")
    @magic_arguments.argument("--backend", default="auto",
                              help="auto (the active backend), gpu (nvcc) or simulator")
    @magic_arguments.argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                              help=f"seconds before the program is stopped (default "
                                   f"{DEFAULT_TIMEOUT_S:g}; 0: no limit)")
    @magic_arguments.argument("--args", default="", help="the program's arguments (shell-like); "
                              "or put them after a lone --")
    @magic_arguments.argument("--out", help="store the ProgramRun (or ProgramBuild) in this variable")
    @magic_arguments.argument("--build-only", action="store_true", help="build, do not run")
    @magic_arguments.argument("--verbose", action="store_true",
                              help="print the build and run summary after the output")
    @cell_magic
    def cuda_program(self, line, cell):
        """Build and run a complete CUDA C++ program. Options that are not
        the magic's go to the compiler (nvcc's spelling); arguments after a
        lone ``--`` go to the program."""
        own, compiler, program_args = split_line(line)
        args = ProgramMagics.cuda_program.parser.parse_args(own)
        if args.name:
            add_file(args.name, cell)
            print(f"stored {args.name} ({len(cell.splitlines())} lines) for the programs built after this")
            return
        files = [f.strip() for group in args.files for f in group.split(",") if f.strip()]
        argv = shlex.split(args.args) + program_args
        try:
            if args.build_only:
                result = build_program(cell, files=files, options=compiler, backend=args.backend,
                                       line_offset=1)
            else:
                result = program(cell, files=files, options=compiler, args=argv, backend=args.backend,
                                 timeout=args.timeout or None, line_offset=1)
        except CompileError as exc:
            title = str(exc).splitlines()[0]
            display(diagnostics_bundle(exc.diagnostics, exc.source, exc.line_offset, exc.compiler,
                                       title), raw=True)
            exc._displayed = True
            raise
        if args.out:
            self.shell.user_ns[args.out] = result
        if args.verbose or args.build_only:
            print(repr(result))


def register(ipython) -> None:
    ipython.register_magics(ProgramMagics)
