"""call()'s way through a ring: a mailbox of LL words beside the queue.

The mailbox holds one request and one answer as *LL words* (NCCL's
low-latency protocol): each 8-byte word carries 4 bytes of data and a 4-byte
flag, the call's number, stored and loaded whole. The ring's dispatcher polls
the request's words; once all carry a number it has not answered, the request
is there, data included, and it answers with the handler's time in ns in a
last word. The host watches the answer's words for its call's number. Neither
side reads a ready word first, and the GPU writes no fence.

The host side here: the request packed into a small buffer, then one C call
(:mod:`workbench.backends.native_words` ``ll_exchange``) that writes it out,
watches the answer with the GIL released and copies it into a record of a
private pool (256 answers each, each in a place of its own); without the C
module the same in Python, slower. Numbers are 32-bit and never 0 (a zeroed
mailbox holds no call); a restarted ring numbers from 1 again.
"""
from __future__ import annotations

import functools
import struct
import time

import numpy as np

from .layout import ll_words

#: call()'s answers are records of a private array of this many, one each, so
#: that an answer costs a copy of its bytes and no new array.
ANSWER_POOL = 256
#: The C exchange spins this long (GIL released) before Python's checks take over.
CALL_SPIN_NS = 4_000_000
#: Then the wait looks in rounds of this long (C) or this many polls (Python)...
_ROUND_NS = 100_000
_PYTHON_POLLS = 65536
#: ...for this long in all, after which it sleeps between looks.
_SPIN_TOTAL_NS = 10_000_000


class Mailbox:
    """One ring's call() mailbox on the host (made again at each start: the
    buffer may be new)."""

    def __init__(self, request: np.dtype, response: np.dtype, out: np.ndarray, back: np.ndarray,
                 native):
        """``out``, ``back``: the mailbox's request and answer words (uint64
        views of the ring's mapped buffer); ``native``: the C words module or None."""
        self.response = response
        self.out = memoryview(out)
        self.back = memoryview(back)
        self.number = 0  # calls sent since the start
        self.scratch = bytearray(4 * ll_words(request.itemsize))
        scratch = np.frombuffer(self.scratch, dtype=np.uint8)
        self.record = np.ndarray((1,), dtype=request, buffer=scratch)  # (a record goes in here)
        self._unpack = struct.Struct(f"<{len(self.scratch) // 4}I").unpack
        self._back_addr = int(back.ctypes.data)
        self._back_bytes = 4 * len(back)
        # Answer i of the pool: at byte i * stride, its handler's ns in 4-byte word
        # i * stride_words + took (call() reads both inline: it is the hot path)
        self.took = ll_words(response.itemsize)
        self.stride = 4 * (self.took + 1)
        self.stride_words = self.took + 1
        self._native = native
        # the exchange in C with its fixed arguments bound: (answer's place, flag, spin ns)
        self.exchange = None if native is None else functools.partial(
            native.ll_exchange, int(out.ctypes.data), int(scratch.ctypes.data), len(self.scratch),
            self._back_addr, self._back_bytes)
        self._sent = 0
        self.new_pool()

    def new_pool(self) -> None:
        # Answers land here as the mailbox holds them: the response's bytes padded
        # to 4, then the handler's ns (hence the stride). The old pool lives on as
        # long as answers taken from it do.
        self._raw = bytearray(ANSWER_POOL * self.stride)
        raw = np.frombuffer(self._raw, dtype=np.uint8)
        self.pool = np.ndarray((ANSWER_POOL,), dtype=self.response, buffer=raw,
                               strides=(self.stride,))
        self.words = memoryview(self._raw).cast("I")
        self.pool_addr = int(raw.ctypes.data)
        self.next = 0

    def place(self, i: int) -> int:
        """The address answer ``i`` of the pool is copied to."""
        return self.pool_addr + i * self.stride

    # -- without the C module ----------------------------------------------------------------
    def _take(self, flag: int, i: int) -> bool:
        """The answer into place ``i`` of the pool, if every word carries ``flag``."""
        words = self.back.tolist()  # (each word read whole: 8-byte loads)
        if any(w >> 32 != flag for w in words):
            return False
        struct.pack_into(f"<{len(words)}I", self._raw, i * self.stride,
                         *[w & 0xFFFFFFFF for w in words])
        return True

    def exchange_python(self, flag: int, i: int):
        """The exchange without the C module: the request's words written one
        by one, the answer's last word watched, then all of them. ``(sent,
        seen)`` ns, or None if the answer has not come within the spin."""
        high = flag << 32
        out = self.out
        sent = self._sent = time.perf_counter_ns()
        for k, word in enumerate(self._unpack(self.scratch)):
            out[k] = high | word
        back, last = self.back, len(self.back) - 1
        for _ in range(_PYTHON_POLLS):
            if back[last] >> 32 == flag and self._take(flag, i):
                return sent, time.perf_counter_ns()
        return None

    # -- the slow wait -----------------------------------------------------------------------
    def wait(self, flag: int, i: int, check) -> tuple[int, int]:
        """Wait on for the answer after the first spin: looks in rounds, and
        ``check(sent_ns)`` between them (it raises to give up: fault,
        watchdog, deadline); after ``_SPIN_TOTAL_NS`` of looking it sleeps
        50 µs between looks. ``(sent, seen)`` ns."""
        native = self._native
        sent = time.perf_counter_ns() - CALL_SPIN_NS if native is not None else self._sent
        spin_until = time.perf_counter_ns() + _SPIN_TOTAL_NS
        dst = self.place(i)
        while True:
            if native is not None:
                spinning = time.perf_counter_ns() < spin_until
                if native.ll_wait(self._back_addr, self._back_bytes, flag, dst,
                                  _ROUND_NS if spinning else 0):
                    return sent, time.perf_counter_ns()
            else:
                spinning = False
                if self._take(flag, i):
                    return sent, time.perf_counter_ns()
            check(sent)
            if not spinning:
                time.sleep(50e-6)
