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
