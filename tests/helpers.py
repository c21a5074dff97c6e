"""Helpers the tests import (``from helpers import using_backend``)."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def using_backend(which=None, **options):
    """Make ``which`` (a backend's name, with ``options``, or a Backend
    instance) the active backend inside the block, and yield it; the backend
    active before comes back after the block, however it ends.
    ``using_backend()`` switches nothing: the block may switch backends itself
    (what a test of switching does) and the one active before still comes back."""
    from workbench.runtime import session
    previous = session.active_backend_or_none()
    try:
        if which is None and not options:
            yield previous
        else:
            yield session.use_backend(which, **options)
    finally:
        session.restore_backend(previous)


class _Added:
    """What :func:`new_timings` found: ``frame``, the block's records as
    ``wb.timings()`` shows them (set when the block ends)."""

    frame = None


@contextlib.contextmanager
def new_timings():
    """The records the block adds to the session's timing log, as a
    DataFrame in ``.frame`` after the block: found by the last record before
    it, so whatever earlier tests left in the log (how many records, kernels
    of the same name, a log at its cap of records, where the oldest drop out
    and counting from ``len(wb.timings())`` finds nothing) does not matter."""
    import workbench as wb
    from workbench.runtime.session import session
    log = session().timing_log
    log.resolve_all()
    last = log.records[-1] if log.records else None
    added = _Added()
    yield added
    frame = wb.timings()
    records = list(log.records)
    start = 0
    if last is not None:
        start = next((i + 1 for i in range(len(records) - 1, -1, -1) if records[i] is last), 0)
    added.frame = frame.iloc[start:]
