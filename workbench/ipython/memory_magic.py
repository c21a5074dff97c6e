"""``%gpu_mem`` and the cell hooks that account device memory per cell.

``register(ip)`` (run by ``%load_ext workbench``) turns tracking on, teaches
the tracker how to name notebook cells and find the notebook's variables,
and wraps every cell in ``begin_cell``/``end_cell`` so that each cell's
allocations, frees and survivors are counted.
"""
from __future__ import annotations

import re

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from .. import memory
from ..memory import holders, sources
from ..memory.tracker import tracker
from ..present.units import SIZE_HINT, parse_size
from ..runtime.session import session

_CELL_NAME = re.compile(r"In\s*\[(\d+)\]")
_registered: list = []   # (event, callback) pairs to unregister


def _size_or_fraction(text: str):
    """``--limit`` values as ``(bytes, fraction)``: ``none`` (no cap), a
    percentage (``50%``), a fraction of the device as a decimal between 0 and 1
    (``0.5``), or a size (``2GiB``, or a whole byte count such as ``4096``).

    Never ambiguous: ``1`` is one byte, ``1.0`` and ``2.5`` are refused (write
    ``100%`` or a size with a unit), and every error says how to write it.
    """
    share = "or a share of the device as '50%' or 0.5, or 'none'"
    hint = f"{SIZE_HINT}; {share}"
    value = text.strip().lower()
    if value in ("none", "off", "0"):
        return None, None
    if value.startswith("-"):
        raise UsageError(f"%gpu_mem --limit {text}: a limit cannot be negative; {hint}")
    if value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError:
            raise UsageError(f"%gpu_mem --limit {text}: {value[:-1]!r} is not a number; "
                             f"{hint}") from None
        if not 0 < percent <= 100:
            raise UsageError(f"%gpu_mem --limit {text}: a percentage of the device is "
                             f"above 0 and at most 100; {hint}")
        return None, percent / 100
    try:
        number = float(value)
    except ValueError:
        number = None
    if number is not None and "." in value:   # a decimal without a unit
        if 0 < number < 1:
            return None, number
        raise UsageError(f"%gpu_mem --limit {text}: a decimal without a unit is a fraction "
                         f"of the device, between 0 and 1 (write 100% for all of it); "
                         f"{hint}")
    try:
        return parse_size(text.strip()), None
    except ValueError as exc:   # its message ends with SIZE_HINT
        raise UsageError(f"%gpu_mem --limit {text}: {exc}; {share}") from None


@magics_class
class MemoryMagics(Magics):
    """``%gpu_mem``: device memory of the session."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--stats", "-s", action="store_true",
                              help="also show the pool: in use, cached, reserved, peak, limit, device")
    @magic_arguments.argument("--live", "-l", action="store_true",
                              help="live allocations grouped by the line that made them, largest first")
    @magic_arguments.argument("--leaks", metavar="CELL", type=int, nargs="?", const=-1, default=None,
                              help="what cells CELL and later allocated and never freed "
                                   "(no CELL: every cell)")
    @magic_arguments.argument("--timeline", "-t", action="store_true",
                              help="plot in use and reserved over time, cell starts marked")
    @magic_arguments.argument("--all", "-a", action="store_true",
                              help="per-cell table: include cells that did not touch device memory")
    @magic_arguments.argument("--on", action="store_true", help="turn tracking on")
    @magic_arguments.argument("--off", action="store_true",
                              help="turn tracking off (allocations cost nothing extra)")
    @magic_arguments.argument("--empty-cache", action="store_true",
                              help="give the pool's cached free blocks back to the device")
    @magic_arguments.argument("--limit", metavar="SIZE",
                              help="cap the pool: a size ('2GiB', '512MB', or a whole number "
                                   "of bytes), a share of the device ('50%%' or 0.5), or 'none'")
    @magic_arguments.argument("--reset-peak", action="store_true",
                              help="count the peak in use again from now")
    @line_magic
    def gpu_mem(self, line):
        """Per-cell device memory of the session: bytes each cell allocated,
        freed and left alive. Options show the pool, live allocations, leaks
        and the timeline, or change tracking, the cache and the pool limit."""
        args = magic_arguments.parse_argstring(self.gpu_mem, line)
        if args.on and args.off:
            raise UsageError("%gpu_mem: give --on or --off, not both")
        if args.on or args.off:
            memory.tracking(bool(args.on))
        if args.limit is not None:
            nbytes, fraction = _size_or_fraction(args.limit)
            memory.set_limit(bytes=nbytes, fraction=fraction)
        if args.empty_cache:
            memory.empty_cache()
        if args.reset_peak:
            memory.reset_peak()
        if args.stats or args.limit is not None or args.empty_cache:
            display(memory.stats())
        if args.live:
            display(memory.live())
        if args.leaks is not None:
            display(memory.leaks(since=None if args.leaks < 0 else args.leaks))
        if args.timeline:
            display(memory.plot())
        showed_other = args.live or args.leaks is not None or args.timeline
        if not showed_other:
            return memory.per_cell(all_cells=args.all)
        return None


def _cell_number() -> int | None:
    return session().cell


def _pre_run_cell(info=None) -> None:
    if tracker().enabled:
        tracker().begin_cell(_cell_number())


def _post_run_cell(result=None) -> None:
    if tracker().enabled:
        tracker().end_cell(_cell_number())


def _cell_resolver(ip):
    def resolve(filename: str) -> int | None:
        try:
            _, name = ip.compile.format_code_name(filename)
        except Exception:  # not one of IPython's cells
            return None
        match = _CELL_NAME.search(name or "")
        return int(match.group(1)) if match else None
    return resolve


def register(ip) -> None:
    """Register ``%gpu_mem`` and the cell hooks, and turn tracking on."""
    ip.register_magics(MemoryMagics)
    sources.set_cell_resolver(_cell_resolver(ip))
    holders.set_namespace_provider(lambda: ip.user_ns)
    for event, callback in (("pre_run_cell", _pre_run_cell), ("post_run_cell", _post_run_cell)):
        ip.events.register(event, callback)
        _registered.append((event, callback))
    memory.track_from_first_backend()


def unregister(ip) -> None:
    """Undo :func:`register`: hooks off, tracking off, ``%gpu_mem`` removed."""
    while _registered:
        event, callback = _registered.pop()
        try:
            ip.events.unregister(event, callback)
        except ValueError:
            pass
    memory.tracking(False)
    sources.set_cell_resolver(None)
    holders.set_namespace_provider(None)
    ip.magics_manager.magics["line"].pop("gpu_mem", None)
