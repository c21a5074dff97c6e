"""The ``%%cuda`` cell magic: compile the cell, bind its kernels by name.

The magic is thin: parse options, call :func:`workbench.compile`, display.
A failed compile publishes its diagnostics (a MIME bundle the JupyterLab
extension renders, plain text for every other front end) and raises
:class:`~workbench.CompileError`, so the cell fails and Run-All stops.
"""
from __future__ import annotations

import html
import shlex
import weakref

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

from ..core.compiler import compile as compile_source
from ..diagnostics import format_diagnostics
from ..runtime.session import backend
from ..errors import CompileError
from ..profiling.sanitizer import TOOLS, sanitize_kernels

#: MIME type of compile diagnostics (rendered by the JupyterLab extension).
DIAGNOSTICS_MIME = "application/vnd.cuda-workbench.diagnostics+json"


def diagnostics_bundle(diagnostics, source: str, line_offset: int, compiler: str, title: str) -> dict:
    """A display bundle: structured diagnostics, plain text and HTML."""
    text = f"{title}\n{format_diagnostics(diagnostics, source, line_offset)}"
    rows = "".join(
        f"<li><b>{html.escape(d.severity)}</b> line {d.line if d.line is not None else '?'}: "
        f"{html.escape(d.message)}</li>" for d in diagnostics)
    return {
        DIAGNOSTICS_MIME: {"compiler": compiler, "diagnostics": [d.to_dict() for d in diagnostics],
                           "cell_id": None},
        "text/plain": text,
        "text/html": f"<div class='wb-diagnostics'><p>{html.escape(title)}</p><ul>{rows}</ul></div>",
    }


@magics_class
class CudaMagics(Magics):
    """``%%cuda``: CUDA C++ cells."""

    def __init__(self, shell):
        super().__init__(shell)
        self._bound: dict[str, list[str]] = {}  # module name -> names it bound

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--name", "-n", help="module name (default: its kernels' names); "
                              "re-running a cell with the same name replaces its kernels")
    @magic_arguments.argument("--arch", "-a", help="target architecture, e.g. sm_90 (default: the device's)")
    @magic_arguments.argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VAL]",
                              help="preprocessor definition (repeatable)")
    @magic_arguments.argument("--std", help="C++ dialect, e.g. c++17")
    @magic_arguments.argument("--fast-math", action="store_true", help="NVRTC --use_fast_math")
    @magic_arguments.argument("--option", "-O", dest="options", action="append", default=[],
                              help="any NVRTC option, verbatim (repeatable), e.g. --option=-lineinfo")
    @magic_arguments.argument("--instantiate", "-i", action="append", default=[], metavar="'kern<float>'",
                              help="instantiate a template kernel (repeatable)")
    @magic_arguments.argument("--check", action="store_true",
                              help="simulator: bounds-checked build that reports the exact block, "
                                   "thread and line of an out-of-bounds access")
    @magic_arguments.argument("--sanitize", "-s", choices=TOOLS, default=None, metavar="TOOL",
                              help="check every launch of the cell's kernels with "
                                   "compute-sanitizer's TOOL (memcheck, racecheck, synccheck, "
                                   "initcheck; on the simulator, its own checks): each cell that "
                                   "launches them shows the report at its end")
    @magic_arguments.argument("--quiet", "-q", action="store_true", help="print nothing on success")
    @cell_magic
    def cuda(self, line, cell):
        """Compile CUDA C++; every ``extern "C" __global__`` function becomes a
        ``wb.Kernel`` in the notebook's namespace under its own name."""
        args = parse_options(line)
        try:
            module = compile_source(
                cell, name=args.name, arch=args.arch, defines=args.defines, std=args.std,
                fast_math=args.fast_math, options=args.options, instantiate=args.instantiate,
                checked=args.check, line_offset=1)
        except CompileError as exc:
            title = str(exc).splitlines()[0]
            display(diagnostics_bundle(exc.diagnostics, exc.source, exc.line_offset, exc.compiler,
                                       title), raw=True)
            exc._displayed = True
            raise
        self._bind(module)
        if args.sanitize:
            _SANITIZERS.add(sanitize_kernels(module, args.sanitize))
        if module.warnings:
            n = len(module.warnings)
            display(diagnostics_bundle(module.warnings, module.source, module.line_offset,
                                       module.compiled.compiler, f"{n} warning{'s' if n != 1 else ''}"),
                    raw=True)
        if not args.quiet:
            print(module.summary())

    def _bind(self, module) -> None:
        ns = self.shell.user_ns
        for old in self._bound.get(module.name, []):
            if old not in module.kernels and old not in module.templates:
                ns.pop(old, None)
        names = []
        for name, kernel in module.kernels.items():
            ns[name] = kernel
            names.append(name)
        for name, template in module.templates.items():
            ns[name] = template
            names.append(name)
        self._bound[module.name] = names


def parse_options(line: str):
    """The ``%%cuda`` line's options. Quotes are shell quotes (``'kern<float>'``
    loses them) and values may start with a dash (``--option -lineinfo``,
    ``-DN=4``)."""
    argv, i = [], 0
    tokens = shlex.split(line)
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("--option", "-O", "-D") and i + 1 < len(tokens):
            argv.append(f"{tok}={tokens[i + 1]}")  # argparse would read '-x' as a flag
            i += 2
            continue
        if tok.startswith("-D") and len(tok) > 2 and tok[2] != "=":
            tok = "-D=" + tok[2:]
        argv.append(tok)
        i += 1
    return CudaMagics.cuda.parser.parse_args(argv)


#: The launch checkers of ``%%cuda --sanitize`` cells (alive while their kernels are).
_SANITIZERS: "weakref.WeakSet" = weakref.WeakSet()


def show_sanitized(*_) -> None:
    """After each cell: the report of the sanitized launches it made."""
    for sanitizer in list(_SANITIZERS):
        report = sanitizer.take()
        if report is not None:
            display(report)


def register(ipython) -> None:
    ipython.register_magics(CudaMagics)
    if show_sanitized not in ipython.events.callbacks["post_run_cell"]:
        ipython.events.register("post_run_cell", show_sanitized)
    b = backend()
    print(f"workbench: {b.name} backend — {b.describe()} ({b.reason})")
    missing = b.missing_compiler()
    if missing:
        print(f"workbench: {missing} (wb.doctor() checks this machine)")


def unregister(ipython) -> None:
    if show_sanitized in ipython.events.callbacks["post_run_cell"]:
        ipython.events.unregister("post_run_cell", show_sanitized)
