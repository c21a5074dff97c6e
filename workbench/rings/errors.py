"""The errors of rings."""
from __future__ import annotations

from ..errors import WorkbenchError


class RingError(WorkbenchError):
    """A ring could not be made, started or used as asked."""


class RingLayoutError(RingError, TypeError):
    """A message dtype does not match its C struct."""


class RingFull(RingError):
    """The request queue stayed full (the device is not answering fast enough).

    ``sent``: how many of the send's messages went before it stopped (the
    first of them numbered ``first``); the message says so too."""

    sent = 0
    first = None


class RingHang(RingError):
    """No message was answered within the watchdog's time."""


class RingStopped(RingError):
    """The ring is not running."""
