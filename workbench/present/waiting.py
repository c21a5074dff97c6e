"""Long waits made visible: a wait that passes :data:`AFTER_S` seconds (a
kernel running on the simulator) tells a reporter how long it has waited,
about once a second, until it ends.

The waiting side drives it (the worker that does the work knows nothing of
it): it blocks for at most :meth:`Wait.block_s` at a time and calls
:meth:`Wait.tick` between. A front end installs the reporter
(:func:`set_reporter`; the notebook layer shows a line in the running
cell); with none installed, or off the main thread, a wait blocks as long
as it likes and nothing is shown.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

#: Seconds of waiting before the reporter is made.
AFTER_S = 2.0
#: Seconds between two reports after that.
EVERY_S = 1.0

_reporter: Callable | None = None


def set_reporter(factory: Callable | None) -> None:
    """Use ``factory(what)`` for long waits (None: show nothing). It returns
    an object with ``update(elapsed_s)`` and ``close(elapsed_s, outcome)``,
    ``outcome`` one of "done", "interrupted", "failed"."""
    global _reporter
    _reporter = factory


def reporter() -> Callable | None:
    return _reporter


def shown_reporter() -> Callable | None:
    """The reporter a wait on this thread tells: None off the main thread
    (an interrupt reaches the main thread only: its wait is the one shown)."""
    factory = _reporter
    if factory is not None and threading.current_thread() is not threading.main_thread():
        return None
    return factory


class Wait:
    """One wait on ``what`` (a text: what is being waited for) that may be
    long, begun at ``started`` (``time.monotonic()``; None: now)."""

    __slots__ = ("what", "started", "shown", "_reporter")

    def __init__(self, what: str, started: float | None = None):
        self.what = what
        self.started = time.monotonic() if started is None else started
        self.shown = None
        self._reporter = shown_reporter()

    def block_s(self, now: float) -> float:
        """How long the waiting side may block before its next :meth:`tick`."""
        if self._reporter is None:
            return math.inf
        elapsed = now - self.started
        due = AFTER_S if elapsed < AFTER_S else (math.floor(elapsed / EVERY_S) + 1) * EVERY_S
        return max(0.0, due - elapsed)

    def tick(self, now: float) -> None:
        """Report the time waited, once past :data:`AFTER_S`."""
        elapsed = now - self.started
        if self._reporter is None or elapsed < AFTER_S:
            return
        try:
            if self.shown is None:
                self.shown = self._reporter(self.what)
            self.shown.update(elapsed)
        except Exception:  # noqa: BLE001 - a reporter that fails must not fail the wait
            self._reporter = self.shown = None

    def end(self, outcome: str) -> None:
        """The wait is over: "done", "interrupted" or "failed"."""
        shown, self.shown = self.shown, None
        if shown is not None:
            try:
                shown.close(time.monotonic() - self.started, outcome)
            except Exception:  # noqa: BLE001 - as in tick
                pass

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started
