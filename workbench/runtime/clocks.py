"""Where the timeline places logged work: each device's clock paired with
the host's.

A record's start is an event on its device; its place on the timeline is
the offset of that event from the device's *anchor*: an event recorded on an
idle stream of the device when the log is read, waited for, and paired with
``time.time()`` (the middle of that short wait, so off by a few microseconds
at most). Work queued before the anchor lies before it on the device (its
offset is measured backwards); an anchor places work for
:data:`ANCHOR_SPAN_MS` after it, then a new one is made.
"""
from __future__ import annotations

import time

#: An anchor event places records for at most this many ms after it (CUDA's
#: elapsed times are single-precision milliseconds: 1 s keeps them to about
#: 0.1 us); a later record gets a new anchor.
ANCHOR_SPAN_MS = 1000.0


class DeviceClocks:
    """Per device: the anchor event and its host time, and the idle stream
    anchors are recorded on."""

    def __init__(self):
        self._anchors: dict = {}  # device -> [event, host ms]
        self._streams: dict = {}  # device -> an idle non-blocking stream

    def place(self, b, device, start, wall_s: float) -> float:
        """Host ms at which event ``start`` (of ``device``, recorded with work
        queued at host time ``wall_s``, in seconds) happened on the device."""
        wall_ms = wall_s * 1e3
        anchor = self._anchors.get(device)
        if anchor is None or (wall_ms > anchor[1]
                              and b.timeline_offset_ms(anchor[0], start) > ANCHOR_SPAN_MS):
            anchor = self._anchor(b, device)
        if wall_ms >= anchor[1]:  # queued after the anchor was done: later on the device
            return anchor[1] + b.timeline_offset_ms(anchor[0], start)
        return anchor[1] - b.timeline_offset_ms(start, anchor[0])

    def _anchor(self, b, device) -> list:
        old = self._anchors.pop(device, None)
        previous = b.current_device()
        if device != previous:
            b.set_device(device)
        try:
            stream = self._streams.get(device)
            if stream is None:
                stream = self._streams[device] = b.create_stream(non_blocking=True)
            event = b.create_event()
            before = time.time()
            b.record_event(event, stream)
            b.event_synchronize(event)
            after = time.time()
        finally:
            if device != previous:
                b.set_device(previous)
        anchor = self._anchors[device] = [event, (before + after) * 500.0]
        if old is not None:
            _destroy(b, old[0])
        return anchor

    def free(self, b) -> None:
        """Destroy the anchors of backend ``b`` (the log leaves it)."""
        for event, _ in self._anchors.values():
            _destroy(b, event)
        self._anchors = {}
        self._streams = {}


def _destroy(b, event) -> None:
    try:
        b.destroy_event(event)
    except Exception:  # a context that is gone: nothing left to free
        pass
