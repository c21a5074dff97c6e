"""``%gpu_bench`` / ``%%gpu_bench``: :func:`workbench.bench` as a magic.

Line magic: ``%gpu_bench [options] statement`` times the statement.
Cell magic: ``%%gpu_bench [options] [setup statement]`` runs the setup once,
then times the cell body. Prints the result unless ``-q``; ``-o`` returns the
:class:`~workbench.types.BenchResult`. The option defaults are read from
``inspect.signature(wb.bench)`` so the magic and the function cannot drift.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import textwrap

from IPython.core import magic_arguments
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope

from ..errors import ArgumentValueError
from ..benchmarking.timer import bench
from ..present.tables import shorten


@functools.cache
def bench_defaults() -> dict:
    """``{parameter: default}`` of :func:`workbench.bench`."""
    return {name: p.default for name, p in inspect.signature(bench).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _default(name: str):
    return bench_defaults()[name]


def _unquote(text: str | None) -> str | None:
    """Option values keep their quotes (the line is split without POSIX rules
    so that Python code survives); drop one pair of surrounding quotes."""
    if text and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


@magics_class
class BenchMagics(Magics):
    """``%gpu_bench``: device-accurate timing of a statement or cell."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-n", "--repeat", type=int, default=_default("repeat"),
                              help="exact number of timed calls (default: as many as fit in "
                                   f"--max-time, {_default('max_time')} s)")
    @magic_arguments.argument("-t", "--max-time", type=float, default=_default("max_time"),
                              help="time budget in seconds for the timed calls "
                                   f"(default: {_default('max_time')})")
    @magic_arguments.argument("--min-repeat", type=int, default=_default("min_repeat"),
                              help=f"fewest timed calls (default: {_default('min_repeat')})")
    @magic_arguments.argument("--max-repeat", type=int, default=_default("max_repeat"),
                              help=f"most timed calls (default: {_default('max_repeat')})")
    @magic_arguments.argument("-w", "--warmup", type=int, default=_default("warmup"),
                              help=f"fewest untimed warm-up calls (default: {_default('warmup')})")
    @magic_arguments.argument("--warmup-time", type=float, default=_default("warmup_time"),
                              help="shortest warm-up in seconds "
                                   f"(default: {_default('warmup_time')})")
    @magic_arguments.argument("--flush-l2", action="store_true", default=_default("flush_l2"),
                              help="read a buffer twice the L2 size before every timed call (cold cache)")
    @magic_arguments.argument("--name", default=_default("name"),
                              help="label for the result (default: the statement)")
    @magic_arguments.argument("--bytes", default=None, metavar="EXPR",
                              help="bytes moved per call, a Python expression (gives GB/s)")
    @magic_arguments.argument("--flops", default=None, metavar="EXPR",
                              help="floating-point operations per call, a Python expression "
                                   "(gives GFLOP/s)")
    @magic_arguments.argument("-o", "--output", dest="return_result", action="store_true",
                              help="return the BenchResult")
    @magic_arguments.argument("-q", "--quiet", action="store_true", help="print nothing")
    @magic_arguments.argument("statement", nargs=argparse.REMAINDER,
                              help="line magic: the statement to time; cell magic: a setup "
                                   "statement run once before timing the cell")
    @needs_local_scope
    @line_cell_magic
    def gpu_bench(self, line, cell=None, local_ns=None):
        """Time a statement (line magic) or a cell (cell magic) with device
        events: warm-up first, then repeats for a time budget or a count.
        Everything is measured by :func:`workbench.bench`; see its docstring."""
        args = magic_arguments.parse_argstring(self.gpu_bench, line)
        statement = " ".join(args.statement).strip()
        namespace = self.shell.user_ns
        local_ns = local_ns if local_ns is not None else namespace
        if cell is None:
            if not statement:
                raise ArgumentValueError("%gpu_bench needs a statement to time, e.g. "
                                         "%gpu_bench kernel(x, y, n, n=n)")
            body, setup = statement, None
        else:
            body, setup = textwrap.dedent(cell), statement or None
        if not body.strip():
            raise ArgumentValueError(
                "%%gpu_bench: the cell is empty; put the code to time in its body")
        code = self.shell.compile(body, "<gpu_bench>", "exec")
        if setup:
            exec(self.shell.compile(setup, "<gpu_bench setup>", "exec"), namespace, local_ns)

        def run():
            exec(code, namespace, local_ns)

        def evaluate(expr):
            return None if expr is None else eval(_unquote(expr), namespace, local_ns)

        label = _unquote(args.name) or _label(body)
        result = bench(run, name=label, repeat=args.repeat, max_time=args.max_time,
                       min_repeat=args.min_repeat, max_repeat=args.max_repeat,
                       warmup=args.warmup, warmup_time=args.warmup_time,
                       flush_l2=args.flush_l2, bytes=evaluate(args.bytes),
                       flops=evaluate(args.flops))
        if not args.quiet:
            print(result)
        return result if args.return_result else None


def _label(code: str) -> str:
    return shorten(code.strip().splitlines()[0], 60)  # (at a word, or in a too-long first word)


def register(ipython) -> None:
    """Register ``%gpu_bench`` with ``ipython``."""
    ipython.register_magics(BenchMagics)
