"""Where did my GPU memory go? Tracking, pool state, per-cell accounting,
leaks, timeline and out-of-memory explanations (``wb.memory``).

Tracking is on after ``%load_ext workbench``; elsewhere turn it on with
``wb.memory.tracking(True)``. Every function works on the active backend
(the GPU through CuPy, or the simulator). Nothing is measured until a
function is called, and pandas and matplotlib are imported only by the
functions that return a DataFrame or a figure.

The pool caches freed blocks for reuse, so memory "not given back" after
``del x`` is usually ``cached``, not leaked: :func:`stats` tells them apart
and :func:`empty_cache` returns the cache to the device.
"""
from __future__ import annotations

from ..core.transfers import advise, prefetch  # managed memory's hints: wb.memory.advise
from ..errors import ArgumentTypeError, ArgumentValueError
from ..present.units import parse_size
from ..runtime.session import active_backend_or_none as _active_backend_or_none
from ..runtime.session import backend as _backend
from ..runtime.session import on_backend_change as _on_backend_change
from . import kinds as _kinds
from . import pool, reports, snapshot
from .tracker import tracker as _tracker

_wanted = False   # tracking asked for: it follows the active backend when it changes


def _follow_backend(new_backend) -> None:
    if _wanted:
        _tracker().start(new_backend)


def tracking(enabled: bool | None = None) -> bool:
    """Turn allocation tracking on or off; returns whether it is on.

    ``tracking()`` only asks. Turning it on again after a pause starts
    afresh: memory allocated meanwhile is counted as "untracked".
    """
    global _wanted
    if enabled is None:
        return _tracker().enabled
    if not isinstance(enabled, bool):
        raise ArgumentTypeError(f"tracking() takes True or False, got {enabled!r}")
    _wanted = enabled
    if enabled:
        _on_backend_change(_follow_backend)
        try:
            _tracker().start(_backend())
        except BaseException:
            _wanted = False   # refused (e.g. inside cupy.cuda.using_allocator): stays off
            raise
    else:
        _tracker().stop()
    return _tracker().enabled


def track_from_first_backend() -> None:
    """Turn tracking on without choosing a backend now: start on the active
    backend if there is one, else as soon as one is chosen (``%load_ext``)."""
    global _wanted
    _wanted = True
    _on_backend_change(_follow_backend)
    active = _active_backend_or_none()
    if active is not None:
        _tracker().start(active)


def stats():
    """The pool and the device now: a :class:`~workbench.memory.snapshot.MemoryStats`
    (in use, cached, reserved, peak, free blocks, fragmentation, limit,
    pinned pool, device free and total)."""
    return snapshot.collect(_backend(), _tracker())


def set_limit(bytes=None, fraction=None):  # noqa: A002 (the documented name)
    """Cap the device memory pool at ``bytes`` (an int or a string such as
    ``"2GiB"``) or at ``fraction`` (0 to 1) of the device's memory.
    ``set_limit()`` (or ``bytes=None``) removes the cap; a cap of 0 bytes,
    which would refuse every allocation, is refused. ``wb.allocate`` counts
    what is in use against the cap, also where the pool could hand out a
    block it cached before; other allocations (CuPy's own) meet it when the
    pool asks the device for more. Returns :func:`stats` after the change.
    """
    if bytes is not None and fraction is not None:
        raise ArgumentValueError("give either bytes= or fraction=, not both")
    nbytes = None
    if bytes is not None:
        try:
            nbytes = parse_size(bytes)
        except ValueError as exc:
            raise ArgumentValueError(f"set_limit(bytes=...): {exc}") from None
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 <= fraction <= 1:
            raise ArgumentValueError(
                f"set_limit(fraction=...) takes a number from 0 to 1, got {fraction!r}")
        fraction = float(fraction)
    backend = _backend()
    pool.set_limit(backend, nbytes, fraction)
    _tracker().mark("limit set" if (nbytes or fraction) else "limit removed")
    return stats()


def empty_cache():
    """Give the pool's cached free blocks back to the device (and the pinned
    pool's to the host). Live arrays are untouched. Returns :func:`stats`."""
    _backend().empty_cache()
    _tracker().mark("cache emptied")
    return stats()


def reset_peak() -> None:
    """Start the peak-in-use count again from what is in use now."""
    _tracker().reset_peak()


def live():
    """Live allocations grouped by allocating source line, largest first: a
    DataFrame with line, code, bytes, count, cells, held_by (variables) and stack."""
    return reports.live_table(_tracker(), _backend())


def live_rows() -> list[dict]:
    """The rows of :func:`live` as plain dicts, largest first (no pandas)."""
    return reports.live_rows(_tracker(), _backend())


def leaks(since=None):
    """What cells ``since`` and later (an execution count; None: every cell)
    allocated and never freed: a DataFrame by cell and line with the
    variables holding it (empty ``held_by``: nothing in the notebook's
    namespace refers to it: a hidden reference)."""
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
        raise ArgumentValueError(f"leaks(since=...) takes a cell's execution count (an int >= 0), "
                                 f"got {since!r}")
    return reports.leak_table(_tracker(), _backend(), since)


def per_cell(all_cells: bool = False):
    """Bytes each cell allocated, freed and left alive (``%gpu_mem`` shows it).
    Cells that did not touch device memory are left out unless ``all_cells``."""
    return reports.CellUsage.from_tracker(_tracker(), all_cells=all_cells)


def timeline():
    """Every allocation, free and cell boundary: a DataFrame with time
    (seconds since tracking started), in_use, reserved, event, size and cell."""
    return reports.timeline_table(_tracker())


def kinds():
    """Bytes and arrays of each memory kind now: device (the pool), pinned
    (page-locked host arrays, ``wb.pinned``) and managed (``wb.managed``), as
    a :class:`~workbench.memory.kinds.MemoryKinds` (``to_pandas()``)."""
    return _kinds.memory_kinds(_tracker(), _backend())


def plot(ax=None):
    """The timeline as a matplotlib Figure (in use and reserved; cell starts
    marked). Draws into ``ax`` when given."""
    return reports.plot_timeline(_tracker(), ax=ax)


__all__ = ["tracking", "stats", "set_limit", "empty_cache", "reset_peak", "live", "live_rows",
           "leaks", "per_cell", "timeline", "kinds", "plot"]
