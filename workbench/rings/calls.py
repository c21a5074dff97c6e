"""A ring's call(): one message and its answer, through the call box (the
dispatching warp answers it itself, see :mod:`~workbench.rings.codegen`) where
the messages fit and the C words module builds, else through one slot; the
private pool its answers are records of; acall() for asyncio.

:class:`RingCalls` is one part of :class:`~workbench.rings.ring.Ring`: it
works on the views and counters the ring sets up and on the queues'
collection (:class:`~workbench.rings.queues.RingQueues`).
"""
from __future__ import annotations

import asyncio
import functools
import struct
import time

import numpy as np

from .errors import RingError, RingFull, RingLayoutError
from .layout import tuple_fields
from .queues import SPIN_POLLS, SPIN_ROUND_NS, answer_pool, refuse_numbers

#: A call()'s figures as kept in Ring._single: round trip and handler ns.
_FIGURES = struct.Struct("<qq")
#: call() spins this long (the C watcher, GIL released) before it falls back to
#: recv()'s waiting.
_CALL_SPIN_NS = 4_000_000
#: call()'s answers are records of a private array of this many, one each, so
#: that an answer costs a copy of its bytes and no new array (fewer where they
#: would take more than _ANSWER_POOL_BYTES: large answers).
_ANSWER_POOL = 256
_ANSWER_POOL_BYTES = 1 << 20


def _answer_places(dtype: np.dtype) -> int:
    return max(1, min(_ANSWER_POOL, _ANSWER_POOL_BYTES // max(1, dtype.itemsize)))


class RingCalls:
    """call() and acall() (a part of :class:`Ring`)."""

    def call(self, message, timeout: float | None = None):
        """Send one message and return its answer (a record of the response dtype).

        The fast path of a ring. Where the messages are small enough (up to
        248 bytes each way) and the C words module is there, the
        message goes through the call box and the dispatching warp answers it
        itself (see :mod:`~workbench.rings.codegen`); a tuple of field values is
        packed, written, watched for and answered in one C call. Otherwise
        one slot is written, the head published and one word polled. Nothing
        is allocated until the answer is there: the answer is a record of a
        small private array that holds the next answers too, each in a place
        of its own."""
        if self._launch is None:
            self._check_running()
        seq = self._next_send
        if self._ready or seq != self._next_recv:
            raise RingError(f"ring {self.name!r}: call() needs an empty queue; receive the "
                            f"{self.pending + self.depth} outstanding answers first")
        caller = self._caller
        if caller is not None:  # through the call box
            answer = NotImplemented
            try:
                if timeout is None and type(message) is tuple:  # the common call, wholly in C
                    answer = caller.call(message, seq, _CALL_SPIN_NS)
                if answer is NotImplemented:  # packed here first: struct or NumPy say what is wrong
                    self._pack_message(message, self._box_message_bytes, 0, self._box_message, 0)
                    answer = caller.call(self._box_message_bytes, seq, _call_spin_ns(timeout))
            except KeyboardInterrupt:
                raise self._interrupted_call(seq) from None
            self._box_seq = seq  # (sent: nothing raised before it was)
            if answer is None:  # not answered within the spin: a send waits for the dispatcher
                self._box_pending = True
                return self._call_late(seq, caller.sent_ns, timeout)
            self._next_send = self._next_recv = seq + 1
            if self._first_send_ns is None:
                self._first_send_ns = caller.sent_ns
            return answer
        slot = seq % self.capacity
        self._pack_message(message, self._request_bytes, slot * self.request_dtype.itemsize,
                           self._requests, slot)
        native = self._native
        if native is not None:
            return self._call_native(native, seq, slot, timeout)
        sent = time.perf_counter_ns()
        self._next_send = seq + 1
        self._head_due = seq
        answered, late = self._answered_words, False
        try:
            self._head_words[1] = seq  # the head, after the payload: publishes it
            if self._ring_bell is not None:
                self._ring_bell()
            if answered[slot] != seq:
                for _ in range(SPIN_POLLS):
                    if answered[slot] == seq:
                        break
                else:
                    late = True
        except KeyboardInterrupt:
            raise self._interrupted_call(seq) from None
        if late:  # slow: wait with the watchdog and fault checks of recv()
            return self._call_late(seq, sent, timeout)
        now = time.perf_counter_ns()
        i = self._answer_place()
        size = self.response_dtype.itemsize
        self._pool_bytes[i * size:(i + 1) * size] = self._response_bytes[slot * size:
                                                                         (slot + 1) * size]
        return self._call_answered(seq, slot, i, sent, now)

    def _call_native(self, native, seq: int, slot: int, timeout: float | None):
        """call()'s wait in C: the head published, the answer's word watched
        (the GIL released after the first 100 µs) and its bytes copied into the
        answer pool in one call; past a few milliseconds, recv()'s wait."""
        size, i = self.response_dtype.itemsize, self._answer_place()
        # (before any state changes: an inf or NaN timeout must not leave a message half sent)
        spin = _call_spin_ns(timeout)
        self._next_send = seq + 1
        self._head_due = seq
        try:
            t0 = time.perf_counter_ns()
            got = native.publish_wait(self._head_addr, seq, self._answered_addr + 8 * slot, seq,
                                      self._responses_addr + slot * size,
                                      self._pool_addr + i * size, size, spin, self._bell)
        except KeyboardInterrupt:
            raise self._interrupted_call(seq) from None
        if got is None:  # slow: wait with the watchdog and fault checks of recv()
            return self._call_late(seq, t0, timeout)
        sent, now = got
        return self._call_answered(seq, slot, i, sent, now)

    def _pack_message(self, message, data, offset: int, records: np.ndarray, index: int) -> None:
        """``message`` into ``data`` at ``offset`` (a tuple, by ``struct``) or into
        ``records[index]`` (anything else, by NumPy), or RingLayoutError."""
        if type(message) is not tuple:
            refuse_numbers(self, message)
        try:
            if self._pack is not None and type(message) is tuple:
                self._pack(data, offset, *message)
            else:
                records[index] = message
        except (TypeError, ValueError, OverflowError, struct.error) as exc:
            raise RingLayoutError(f"cannot make a message of dtype {self.request_dtype} from "
                                  f"{message!r}: {exc}") from None

    def _call_late(self, seq: int, sent: int, timeout: float | None):
        """A call()'s message sent and not answered within the spin: recv()'s
        wait, with the watchdog and the fault checks, for the rest of the timeout."""
        self._next_send = seq + 1
        self._sends.append([1, sent])
        self._progress_ns = sent
        left = None if timeout is None else max(0.0, timeout - (time.perf_counter_ns() - sent) * 1e-9)
        return self.recv(1, left)[0]  # (Ctrl-C in it stops the ring)

    def _interrupted_call(self, seq: int):
        """Ctrl-C during a call(): as in recv(), the ring stops (the message
        given up); returns the KeyboardInterrupt to raise."""
        self._next_send = seq + 1
        if not self._sends:
            self._sends.append([1, time.perf_counter_ns()])
        return self._stopped_by_interrupt()

    def _box_caller(self):
        """The words module's BoxCaller for the current buffer, or None: no box
        (messages too large), or no C words module (then call() takes a slot:
        in Python, watching the box's flagged words costs more than the box saves)."""
        box, native = self._box, self._native
        if box is None or native is None:
            return None
        return native.BoxCaller(self._box_addr, self.request_dtype.itemsize, 2 * box.request_lanes,
                                self._answer_addr, box.answer_words, self.response_dtype.itemsize,
                                _c_packable(tuple_fields(self.request_dtype)),
                                functools.partial(answer_pool, self.response_dtype,
                                                  _answer_places(self.response_dtype)),
                                self._single, self._bell)

    def _answer_place(self) -> int:
        """The answer pool's next free place (a new pool when it is used up)."""
        if self._pool_next == len(self._pool):
            self._new_answer_pool()
        return self._pool_next

    def _call_answered(self, seq: int, slot: int, i: int, sent: int, now: int):
        """A call()'s answer (through a slot), copied to place ``i`` of the answer
        pool: its figures kept."""
        self._pool_next = i + 1
        stamps = self._stamp_words
        self._next_recv = seq + 1
        self._single += _FIGURES.pack(now - sent, stamps[2 * slot + 1] - stamps[2 * slot])
        if self._first_send_ns is None:
            self._first_send_ns = sent
        self._last_recv_ns = now
        return self._pool[i]

    def _new_answer_pool(self) -> None:
        # (the old one lives on as long as answers taken from it do)
        self._pool = np.empty(_answer_places(self.response_dtype), dtype=self.response_dtype)
        self._pool_bytes = memoryview(self._pool.view(np.uint8))
        self._pool_addr = int(self._pool.ctypes.data)
        self._pool_next = 0

    async def acall(self, message, timeout: float | None = None):
        """:meth:`call` for asyncio: waits by yielding to the event loop."""
        if self._launch is None:
            self._check_running()
        if self.pending or self.depth:
            raise RingError(f"ring {self.name!r}: acall() needs an empty queue; receive the "
                            f"{self.pending + self.depth} outstanding answers first")
        self.send(message)
        deadline = None if timeout is None else time.monotonic() + timeout
        target = self.pending + 1
        while self.pending < target:
            if not self._collect():
                self._check_health()
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"ring {self.name!r}: no answer after {timeout:g} s")
                await asyncio.sleep(0)
        return self._take(target)[-1]

    def _settle_box(self, block: bool, timeout: float | None) -> None:
        """After a call through the box whose answer the host did not see (it
        timed out), wait until the dispatcher has answered it (its slot's
        answer written: it writes that last) before a send publishes a head: a
        head past a call's number that the dispatcher has not taken yet would
        leave the call to no one (its thread passes it over). This waits for its
        handler, as a full queue does (``block=False``, or nothing within
        ``timeout``: :class:`RingFull`, nothing sent). After a call answered
        through the box nothing waits: the dispatcher writes the slots of the
        calls it owes before it publishes a head past them."""
        slot, want = self._box_seq % self.capacity, self._box_seq
        words, native = self._answered_words, self._native
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while words[slot] != want:
                if native.wait_word(self._answered_addr + 8 * slot, want,
                                    SPIN_ROUND_NS if block else 0):
                    break
                if not block or (deadline is not None and time.monotonic() >= deadline):
                    raise RingFull(f"ring {self.name!r}: the call() of message {want} is still "
                                   "being answered, and nothing is sent before it is; wait, or "
                                   "send with block=True")
                self._check_health()
        except KeyboardInterrupt:  # as in _wait_for
            raise self._stopped_by_interrupt() from None
        self._caller.clear()  # (empty already, unless the call timed out)
        self._box_pending = False


def _c_packable(fields):
    """``fields`` where the C caller packs every one of their codes, else None."""
    if fields is None or any(code not in "fdbBhHiIqQ" for _, code in fields):
        return None
    return fields


def _call_spin_ns(timeout: float | None) -> int:
    """How long call() spins before recv()'s wait takes over (an inf or NaN timeout: no limit)."""
    if timeout is None or not timeout * 1e9 < _CALL_SPIN_NS:
        return _CALL_SPIN_NS
    return max(0, int(timeout * 1e9))
