"""Choosing the device: the one place that makes a device current.

    >>> wb.device(1)              # later allocations, compiles, streams and launches go to GPU 1
    >>> with wb.device(0):        # device 0 for the block, then device 1 again
    ...     y = wb.to_device(x)

Streams, events and copies make their own device current for a moment with
:func:`on_device`; every change goes through :func:`make_current`, which also
tells the timing log (CUDA events belong to one device). Indices are checked
by :func:`check_index`, whose error lists the devices there are.
"""
from __future__ import annotations

import contextlib

from ..errors import DeviceError
from .session import backend, session


def check_index(b, index) -> None:
    """Raise DeviceError, listing the devices, unless ``index`` is one of ``b``'s."""
    count = b.device_count()
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        names = ", ".join(f"{i}: {b.device_properties(i).name}" for i in range(count))
        raise DeviceError(f"No device {index!r}: this {b.name} backend has {count} "
                          f"device{'s' if count != 1 else ''} ({names}); "
                          f"pass an index from 0 to {count - 1}.")


def make_current(b, index: int) -> None:
    """Make device ``index`` of backend ``b`` current; the timing log takes
    its events from that device's pool from then on."""
    b.set_device(index)
    session().timing_log.device_changed(b)


@contextlib.contextmanager
def on_device(b, index: int):
    """Make device ``index`` current for the block, then the one before."""
    previous = b.current_device()
    if previous == index:
        yield
        return
    make_current(b, index)
    try:
        yield
    finally:
        make_current(b, previous)


class DeviceChoice:
    """What :func:`device` returns: its device is current already; in a
    ``with`` statement the device current before comes back at the end of
    the block."""

    def __init__(self, b, index: int, previous: int):
        self.backend = b
        self.index = index
        self.previous = previous

    def __enter__(self) -> "DeviceChoice":
        return self

    def __exit__(self, *exc) -> None:
        if self.backend.current_device() != self.previous:
            make_current(self.backend, self.previous)

    def __repr__(self) -> str:
        name = self.backend.device_properties(self.index).name
        return f"<wb.device {self.index}: {name} | {self.backend.name}>"


def device(index: int) -> DeviceChoice:
    """Make device ``index`` current: later allocations, compiles, streams and
    launches go to it. ``with wb.device(i):`` makes it current for the block
    only. A bad index raises :class:`~workbench.DeviceError` listing the
    devices."""
    b = backend()
    check_index(b, index)
    previous = b.current_device()
    if index != previous:
        make_current(b, index)
    return DeviceChoice(b, index, previous)
