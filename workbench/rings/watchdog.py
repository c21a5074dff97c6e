"""A ring's health: the watchdog (no message answered for ``watchdog_s``), a
kernel that faulted or ended, a deadline passed, and stopping the kernel, by
stop() or by the finalizer of a ring whose object is gone.

:class:`RingWatchdog` is one part of :class:`~workbench.rings.ring.Ring`.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import Interrupted
from .errors import RingHang, RingStopped


def _shutdown(control: np.ndarray, launch, wait_s: float = 2.0) -> None:
    """Stop a ring's kernel (its object is gone, or the interpreter exits)."""
    control[0] = 1
    if launch is not None and not launch.wait_quietly(wait_s):
        launch.kill()


class RingWatchdog:
    """stop() and the checks made while waiting (a part of :class:`Ring`)."""

    def stop(self, drain: bool = True, timeout: float = 10.0) -> None:
        """Stop the kernel. ``drain``: first wait for every message sent to be
        answered (kept for :meth:`recv`). Safe to call twice."""
        if self._launch is None:
            return
        try:
            if drain and self.running and self.depth:
                self._wait_for(self.depth, timeout)
        finally:
            self._control[0] = 1
            launch, self._launch = self._launch, None
            if self._finalizer is not None:
                self._finalizer.detach()
            if launch is not None and not launch.wait(timeout):
                killed = launch.kill()
                self._buffer = None
                raise RingHang(
                    f"ring {self.name!r} did not stop within {timeout:g} s: a handler has not "
                    "returned. " + ("Its simulator worker was ended." if killed else
                                    "A running GPU kernel cannot be stopped from the host: it "
                                    "keeps part of the GPU busy until the notebook kernel "
                                    "restarts."))

    def _stopped_by_interrupt(self) -> Interrupted:
        """Stop the ring after Ctrl-C while waiting on it, and return the
        KeyboardInterrupt to raise, which says what was stopped (a handler
        that does not return is said there too: a RingHang raised here would
        hide the interrupt)."""
        waiting = self.depth
        try:
            self.stop(drain=False, timeout=2.0)
            hang = ""
        except RingHang as exc:
            hang = f" {exc}"
        given_up = f" ({waiting} unanswered message{'s' if waiting != 1 else ''} given up)" \
            if waiting else ""
        return Interrupted(f"ring {self.name!r} stopped{given_up}; device arrays are intact, "
                           f"and ring.start() starts it again.{hang}")

    def _check_deadline(self, deadline: float | None, timeout: float | None) -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"ring {self.name!r}: {self.depth} messages still "
                               f"unanswered after {timeout:g} s")

    def _check_health(self) -> None:
        launch = self._launch
        if launch is None:
            raise RingStopped(f"ring {self.name!r} is stopped; start it with ring.start()")
        if launch.done():
            fault = launch.fault()
            self._launch = None
            if fault is not None:
                raise fault
            raise RingStopped(f"ring {self.name!r}'s kernel ended")
        idle = (time.perf_counter_ns() - self._progress_ns) * 1e-9
        if self.depth and idle > self.watchdog_s:
            if self._collect():  # answers came that the poll, watching a later one, left
                return
            seq = self._next_recv
            index = (seq - 1) % self.workers + 32  # the first warp dispatches
            if seq == self._box_seq:
                index = 0  # a call() through the box: the dispatcher answers it
            self._control[0] = 1
            killed = launch.kill()
            self._launch = None
            self._buffer = None  # a restart must not share slots with a kernel still running
            raise RingHang(
                f"ring {self.name!r}: no message answered for {idle:.1f} s with {self.depth} "
                f"waiting (watchdog_s={self.watchdog_s:g}). Message {seq} belongs to block "
                f"{index // self.threads}, thread {index % self.threads}: its handler has not "
                "returned (an endless loop, or waiting on something that never comes). "
                + ("The simulator's ring worker was ended; fix the handler and make a new ring."
                   if killed else "The ring is told to stop, but a GPU kernel stuck in a "
                   "handler cannot be stopped from the host: it occupies part of the GPU until "
                   "the notebook kernel restarts."))

    def _check_running(self) -> None:
        # Cheap on purpose (it guards every send); whether the kernel still runs
        # is checked while waiting for answers.
        if self._launch is None:
            raise RingStopped(f"ring {self.name!r} is not running; call ring.start() (or use "
                              "it as a context manager: with ring: ...)")

class _Quiet:
    """A launch for the finalizer: waits without raising (nobody could catch it)."""

    def __init__(self, launch):
        self._launch = launch

    def wait_quietly(self, timeout: float) -> bool:
        try:
            return self._launch.wait(timeout)
        except Exception:  # noqa: BLE001 - a fault during shutdown has no one to report to
            return True

    def kill(self) -> bool:
        return self._launch.kill()
