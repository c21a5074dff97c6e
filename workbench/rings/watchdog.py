"""A ring's health: the watchdog (no message answered for ``watchdog_s``), a
kernel that faulted or ended, a deadline passed, and stopping the kernel, by
stop() or by the finalizer of a ring whose object is gone.

:class:`RingWatchdog` is one part of :class:`~workbench.rings.ring.Ring`.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import Interrupted, KernelFault
from ..present.tables import shorten
from .errors import RingHang, RingStopped


def _shutdown(control: np.ndarray, launch, ring_bell=None, wait_s: float = 2.0) -> None:
    """Stop a ring's kernel (its object is gone, or the interpreter exits)."""
    control[0] = 1
    if ring_bell is not None:
        ring_bell()
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
            if self._ring_bell is not None:
                self._ring_bell()
            launch, self._launch = self._launch, None
            if self._finalizer is not None:
                self._finalizer.detach()
            try:
                ended = launch is None or launch.wait(timeout)
            except Exception as fault:  # noqa: BLE001 - it faulted meanwhile: said, with what is lost
                lost = self._give_up(f"its kernel faulted ({_gist(fault)})")
                raise _with_tail(fault, _sentence(lost) + " The ring has stopped.") from None
            if not ended:
                killed = launch.kill()
                self._buffer = None
                lost = self._give_up("it did not stop: a handler had not returned")
                raise RingHang(
                    f"ring {self.name!r} did not stop within {timeout:g} s: a handler has not "
                    f"returned.{_sentence(lost)} " + ("Its simulator worker was ended." if killed else
                                           "A running GPU kernel cannot be stopped from the "
                                           "host: it keeps part of the GPU busy until the "
                                           "notebook kernel restarts."))
            self._give_up("it was stopped (ring.stop())", collect=False)

    def _stopped_by_interrupt(self) -> Interrupted:
        """Stop the ring after Ctrl-C while waiting on it, and return the
        KeyboardInterrupt to raise, which says what was stopped (a handler
        that does not return, or a fault meanwhile, is said there too: a
        RingHang or KernelFault raised here would hide the interrupt)."""
        waiting = self.depth
        try:
            self.stop(drain=False, timeout=2.0)
            hang = ""
        except (RingHang, KernelFault) as exc:  # said after the interrupt, not raised over it
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
            if fault is None:
                lost = self._give_up("its kernel ended by itself")
                raise RingStopped(f"ring {self.name!r}'s kernel ended.{_sentence(lost)}")
            lost = self._give_up(f"its kernel faulted ({_gist(fault)})")
            raise _with_tail(fault, _sentence(lost) + " The ring has stopped"
                             + ("; ring.start() runs it again (the simulator's worker was "
                                "restarted)." if self.backend.simulated else "."))
        idle = (time.perf_counter_ns() - self._progress_ns) * 1e-9
        if self.depth and idle > self.watchdog_s:
            if self._collect():  # answers came that the poll, watching a later one, left
                return
            seq = self._next_recv
            if self.cooperative:
                where = ("is in a round that every thread of the grid handles (a cooperative "
                         "ring)")
            else:
                index = (seq - 1) % self.workers + 32  # the first warp dispatches
                if seq == self._box_seq:
                    index = 0  # a call() through the box: the dispatcher answers it
                where = f"belongs to block {index // self.threads}, thread {index % self.threads}"
            self._control[0] = 1
            killed = launch.kill()  # (no bell: the simulator's worker is ended)
            self._launch = None
            self._buffer = None  # a restart must not share slots with a kernel still running
            lost = self._give_up(f"its handler hung (message {seq} unanswered for {idle:.1f} s)")
            raise RingHang(
                f"ring {self.name!r}: no message answered for {idle:.1f} s with {self.depth} "
                f"waiting (watchdog_s={self.watchdog_s:g}). Message {seq} {where}: its handler "
                f"has not returned (an endless loop, or waiting on something that never comes"
                f"{', such as a grid sync that some threads never reach' if self.cooperative else ''})."
                f"{_sentence(lost)} "
                + ("The simulator's ring worker was ended; fix the handler and make a new ring."
                   if killed else "The ring is told to stop, but a GPU kernel stuck in a "
                   "handler cannot be stopped from the host: it occupies part of the GPU until "
                   "the notebook kernel restarts."))

    def _check_running(self) -> None:
        # Cheap on purpose (it guards every send); whether the kernel still runs
        # is checked while waiting for answers.
        if self._launch is None:
            why = f": {self._stopped_why}" if self._stopped_why else ""
            raise RingStopped(f"ring {self.name!r} is not running{why}; call ring.start() (or "
                              "use it as a context manager: with ring: ...)")

    def _give_up(self, why: str, collect: bool = True) -> str:
        """The kernel is gone (``why``): the answers that came are kept for
        recv() (``collect``; a stop without draining forgets them), the messages
        still unanswered are counted in ``lost`` and forgotten, so that the
        queue is empty; the words that say which."""
        try:
            if collect and self._buffer is not None:
                self._collect()
        except Exception:  # noqa: BLE001 - what came is kept where it can be; the rest is lost
            pass
        first, last = self._next_recv, self._next_send - 1
        self.lost += max(0, last - first + 1)
        self._sends.clear()
        self._next_recv = self._next_send
        self._box_pending = False
        if last < first:
            said = ""
        elif last == first:
            said = f"message {first} was sent and never answered"
        else:
            said = f"messages {first}-{last} were sent and never answered"
        self._stopped_why = why + (f"; {said}" if said else "")
        return said

def _gist(error: BaseException) -> str:
    """An error in a few words: its kind and its first sentence."""
    text = shorten(str(error).strip().split("\n")[0].split(". ")[0], 200)
    return f"{type(error).__name__}: {text}".rstrip(": ")


def _sentence(text: str) -> str:
    """`` Text.`` (a sentence to append), or nothing."""
    return f" {text[0].upper()}{text[1:]}." if text else ""


def _with_tail(fault: BaseException, tail: str) -> BaseException:
    """``fault`` with ``tail`` added to its message (a KernelFault keeps its fields)."""
    if isinstance(fault, KernelFault):
        return KernelFault(f"{fault}{tail}", kernel=fault.kernel, signal=fault.signal,
                           block=fault.block, thread=fault.thread, line=fault.line,
                           details=fault.details)
    fault.add_note(tail.strip())
    return fault


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
