"""Out-of-memory errors that say what holds the memory and what to do.

The core calls :func:`out_of_memory_error` when the backend's allocation (or
a launch) fails for lack of device memory, and raises what it returns.
"""
from __future__ import annotations

from ..errors import OutOfMemoryError
from ..present.units import format_bytes
from ..runtime.session import active_backend_or_none as _active_backend
from .holders import release_statement, summarize
from .reports import group_by_line
from .snapshot import collect
from .tracker import tracker as _tracker

#: How many holders (allocating lines) the message lists.
TOP_HOLDERS = 3
#: Cached bytes below this are not worth suggesting empty_cache() for.
WORTH_EMPTYING = 1 << 20


def out_of_memory_error(requested_bytes: int | None,
                        cause: BaseException | None = None) -> OutOfMemoryError:
    """Build the :class:`~workbench.OutOfMemoryError` for a failed allocation
    of ``requested_bytes`` (None when unknown, e.g. inside a launch)."""
    tracker = _tracker()
    backend = _active_backend()
    b = format_bytes
    asked = (f"asked for {b(requested_bytes)} ({requested_bytes:,} bytes)"
             if requested_bytes is not None else "a launch needed more device memory")
    lines = [f"Out of device memory: {asked}"
             + (f" on the {backend.name} backend." if backend is not None else ".")]
    if backend is None:
        return OutOfMemoryError("\n".join(lines + [str(cause or "")]).strip(),
                                requested=requested_bytes)
    try:
        stats = collect(backend, tracker)
    except Exception:  # the explanation must never hide the error itself
        stats = None
    tracked = tracker.enabled and tracker.backend is backend
    holders = group_by_line(tracker, backend) if tracked else []

    total = stats.device_total if stats is not None else None
    if requested_bytes is not None and total is not None and requested_bytes > total:
        lines.append(f"That is more than the whole device ({b(total)}): it can never fit, "
                     "whatever is freed. What to do: work in chunks of at most a fraction of "
                     "the device, or use a smaller dtype.")
        return OutOfMemoryError("\n".join(lines), requested=requested_bytes)
    if stats is not None:
        state = [f"in use {b(stats.in_use)}"
                 + (f" in {stats.live_allocations} allocations" if stats.live_allocations else ""),
                 f"cached in the pool {b(stats.cached)}",
                 f"pool limit {'none' if stats.limit is None else b(stats.limit)}",
                 f"device {b(stats.device_free)} free of {b(stats.device_total)}"]
        lines.append("Now: " + "; ".join(state) + ".")
        if (stats.device_total is not None and stats.device_free is not None
                and stats.reserved is not None):
            others = stats.device_total - stats.device_free - stats.reserved
            if others > max(stats.device_total // 20, 1):
                lines.append(f"{b(others)} of the device is used outside this pool "
                             "(other processes, other libraries, the CUDA context).")
    if holders:
        lines.append("Largest holders, by the line that allocated them:")
        for group in holders[:TOP_HOLDERS]:
            held = f"  held by {summarize(group.held_by)}" if group.held_by else ""
            plural = f" in {group.count} allocations" if group.count > 1 else ""
            lines.append(f"  {b(group.bytes):>11}{plural}  {group.site}{held}")
    elif not tracked:
        lines.append("Tracking is off, so the holders are unknown: "
                     "wb.memory.tracking(True) records which lines allocate.")

    todo = []
    if stats is not None and stats.cached and stats.cached >= WORTH_EMPTYING:
        todo.append(f"wb.memory.empty_cache() gives the {b(stats.cached)} cached in the pool "
                    "back to the device (blocks freed arrays left behind)")
    named = [group for group in holders if group.held_by]
    for group in named[:TOP_HOLDERS]:
        todo.append(f"{release_statement(group.held_by)}  (frees {b(group.bytes)} allocated at "
                    f"{group.site.location}), then wb.memory.empty_cache()")
    if holders and not named:
        todo.append("the largest holders are not bound to a variable of the notebook: look for "
                    "lists, caches or closures that keep arrays alive (wb.memory.live())")
    todo.append("lower the size: work in chunks, use a smaller dtype, or free inputs you no longer need")
    if (stats is not None and stats.limit is not None and stats.device_total is not None
            and stats.limit < stats.device_total):
        todo.append(f"raise the pool limit of {b(stats.limit)}: wb.memory.set_limit(bytes=None) "
                    "removes it")
    lines.append("What to do:")
    lines += [f"  - {item}" for item in todo]
    if cause is not None:   # the backend's own words; a foreign library's error also by name
        origin = "" if type(cause).__module__.startswith("workbench") else \
            f"{type(cause).__module__}.{type(cause).__name__}: "
        lines.append(f"(the backend said: {origin}{cause})")
    return OutOfMemoryError("\n".join(lines), requested=requested_bytes)


def out_of_memory(requested: int | None, cause: BaseException) -> OutOfMemoryError:
    """The workbench's out-of-memory error for a failed allocation or launch
    (``cause``: the backend's own error), explained once."""
    if isinstance(cause, OutOfMemoryError) and getattr(cause, "_explained", False):
        return cause
    error = out_of_memory_error(requested, cause)
    error._explained = True
    return error


def is_out_of_memory(exc: BaseException, backend) -> bool:
    """True for an out-of-memory error of the workbench or of ``backend``."""
    return isinstance(exc, OutOfMemoryError) or backend.is_out_of_memory(exc)
