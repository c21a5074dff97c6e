"""A ring's two queues, host side: the slots of the buffer both sides address
(requests with their sequence numbers, responses with theirs, the handler's
stamps), ``send`` and ``recv`` of batches, the head the host publishes and the
answers it collects in order, with the waits between (in C through the words
module's ``Slots`` where it builds, else in Python).

:class:`RingQueues` is one part of :class:`~workbench.rings.ring.Ring`: it
works on the views and counters the ring sets up (``_views``, ``start``).
"""
from __future__ import annotations

import ctypes
import functools
import platform
import threading
import time

import numpy as np

from .errors import RingError, RingFull, RingLayoutError

#: Polls the host spins (no sleep) before it starts sleeping between polls
#: (a poll is one word read: some 40-80 ns, so a few milliseconds of spinning).
SPIN_POLLS = 65536
_SPIN_ROUND = range(1024)
#: The same with the C watcher (:mod:`~workbench.backends.native_words`): it spins
#: this long per call, GIL released, between the Python checks (health, deadline,
#: Ctrl-C).
SPIN_ROUND_NS = 100_000
#: recv()'s answers (with the C words module) are slices of one private array of
#: this many bytes (or of one as large as the batch).
_BATCH_POOL_BYTES = 1 << 16


class RingQueues:
    """send/recv of batches through the ring's slots (a part of :class:`Ring`)."""

    @property
    def depth(self) -> int:
        """Messages sent and not yet answered by the device (or not yet collected)."""
        return self._next_send - self._next_recv

    @property
    def pending(self) -> int:
        """Answers collected by the host and not yet returned by :meth:`recv`."""
        return self._ready_count

    def _as_batch(self, batch) -> np.ndarray:
        if (type(batch) is np.ndarray and batch.dtype == self.request_dtype and batch.ndim == 1
                and batch.flags.c_contiguous):
            return batch  # already what the queue holds: copied into it as it is
        if isinstance(batch, np.ndarray) and batch.dtype.names:
            if batch.dtype != self.request_dtype:
                raise RingLayoutError(f"ring {self.name!r} takes messages of dtype "
                                      f"{self.request_dtype}, got {batch.dtype}")
            return np.ascontiguousarray(batch.reshape(-1))
        # NumPy would copy a plain number into every field of a message: refused
        refuse_numbers(self, batch)
        if isinstance(batch, list) and not all(isinstance(m, (tuple, np.void)) for m in batch):
            bad = next(m for m in batch if not isinstance(m, (tuple, np.void)))
            raise RingLayoutError(f"ring {self.name!r}: a list of messages holds a tuple of field "
                                  f"values (or a record) per message, not {type(bad).__name__} "
                                  f"{bad!r}; messages are {self.request_dtype}")
        try:
            return np.ascontiguousarray(np.asarray(batch, dtype=self.request_dtype).reshape(-1))
        except (TypeError, ValueError) as exc:
            raise RingLayoutError(f"cannot make messages of dtype {self.request_dtype} from "
                                  f"{type(batch).__name__}: {exc}") from None

    def send(self, batch, *, block: bool = True, timeout: float | None = None) -> int:
        """Queue ``batch`` (a structured array of the request dtype, a record,
        or a tuple of field values) and return the first message's sequence
        number. A full queue waits (``block=True``, up to ``timeout`` seconds)
        or raises :class:`RingFull`; answers that arrive meanwhile are kept."""
        slots = self._slots
        if (slots is not None and type(batch) is np.ndarray and batch.dtype == self.request_dtype
                and self._launch is not None and not self._box_pending):
            # the common send, its copy in C: an array of whole requests with room for all
            first = self._next_send
            now = slots.write(batch, first, self._next_recv)
            if now is not None:
                self._publish(first, len(batch), now)
                return first
        if self._launch is None:
            self._check_running()
        batch = self._as_batch(batch)
        if self._box_pending:
            self._settle_box(block, timeout)
        first = self._next_send
        n = len(batch)
        if n <= self.capacity - (first - self._next_recv):  # room for all of it: one write
            if n:
                self._write(batch)
            return first
        done = 0
        while done < n:
            room = self.capacity - self.depth
            if room == 0:
                try:
                    self._make_room(block, timeout)
                except RingFull as full:
                    raise _partly_sent(full, first, done, n) from None
                continue
            chunk = batch[done:done + room]
            self._write(chunk)
            done += len(chunk)
        return first

    def _write(self, chunk: np.ndarray) -> None:
        """Copy a C-contiguous chunk (no more than the free slots) into the
        queue and publish it."""
        now = time.perf_counter_ns()
        seq = self._next_send
        n, cap, size = len(chunk), self.capacity, self.request_dtype.itemsize
        slot = seq % cap
        # bytes to bytes: a memcpy, several times cheaper than NumPy's field-wise
        # assignment of a structured array; a small chunk goes through a bytes
        # copy (cheaper to make than a memoryview of a structured array)
        if n * size <= 4096:
            data = chunk.tobytes()
        else:
            try:
                data = chunk.data.cast("B")
            except (TypeError, ValueError, NotImplementedError):  # a dtype with no buffer format
                data = chunk.view(np.uint8)
        if slot + n <= cap:  # no wrap: one slice
            self._request_bytes[slot * size:(slot + n) * size] = data
        else:
            split = (cap - slot) * size
            self._request_bytes[slot * size:] = data[:split]
            self._request_bytes[:n * size - split] = data[split:]
        self._publish(seq, n, now)

    def _publish(self, seq: int, n: int, now: int) -> None:
        """Count messages ``seq .. seq + n - 1`` (written to their slots at
        ``now``) as sent, and publish them."""
        if seq == self._next_recv:  # the watchdog counts from the first message waiting
            self._progress_ns = now
        # The bookkeeping comes first: a Ctrl-C between statements then leaves
        # the head behind (_wait_for publishes it again), never messages
        # answered that the host does not count.
        self._sends.append([n, now])
        self._next_send = seq + n
        self._head_due = seq + n - 1
        # The head, after the payloads, publishes them: x86 keeps stores in order
        # (and glibc's memcpy fences the weakly ordered streaming stores it uses
        # for very large copies).
        self._head_words[1] = seq + n - 1
        if self._ring_bell is not None:
            self._ring_bell()

    def _make_room(self, block: bool, timeout: float | None) -> None:
        try:
            if self._collect():
                return
        except KeyboardInterrupt:  # as in _wait_for: a collection cut short must not be taken again
            raise self._stopped_by_interrupt() from None
        if not block:
            raise RingFull(f"ring {self.name!r}: all {self.capacity} slots hold unanswered "
                           "messages; wait, or send with block=True")
        try:
            self._wait_for(1, timeout, collecting_only=True)
        except TimeoutError:
            raise RingFull(f"ring {self.name!r}: the queue stayed full for {timeout:g} s "
                           f"({self.depth} unanswered messages)") from None

    def _answered_run(self, start: int, count: int) -> int:
        """How many of messages ``start .. start + count - 1`` are answered,
        counting in order up to the first that is not."""
        cap = self.capacity
        lo = start % cap
        first = min(count, cap - lo)  # up to the queue's end; the rest wraps to slot 0
        n = self._answered_in(lo, start, first)
        if n == first < count:
            n += self._answered_in(0, start + first, count - first)
        return n

    def _answered_in(self, lo: int, seq: int, count: int) -> int:
        """:meth:`_answered_run` within slots ``lo .. lo + count - 1``."""
        answered = self._answered_words
        if count > 1:
            # A slot's word never exceeds the number it should hold (a later
            # message for the slot is not sent yet), so the words are all right
            # exactly when their sum is: one sum instead of a comparison each.
            want = count * seq + count * (count - 1) // 2
            if count <= 256:  # summed over Python ints: cheaper than a NumPy call here
                if sum(answered[lo:lo + count]) == want:
                    return count
            else:
                words = self._response_seq[lo:lo + count]
                if int(words.sum()) == want:
                    return count
                done = words == np.arange(seq, seq + count)  # (more may have come meanwhile)
                return count if done.all() else int(np.argmin(done))
        n = 0  # one word, or some missing: Python ints through a memoryview
        while n < count and answered[lo + n] == seq + n:
            n += 1
        return n

    def _collect(self, limit: int | None = None) -> int:
        """Move answered messages, in order, from the queue to the host (at
        most ``limit``); how many."""
        start = self._next_recv
        count = self._next_send - start
        if limit is not None and limit < count:
            count = limit
        if count <= 0 or self._answered_words[start % self.capacity] != start:
            return 0  # (the common case while waiting)
        n = self._answered_run(start, count)
        if n:
            self._move(n)
        return n

    def _move(self, n: int) -> None:
        """Take the next ``n`` answers (all there) out of the queue: their bytes
        copied once into a new array, their stamps kept as bytes for stats();
        host latencies are one (ns, count) pair per send they came from."""
        now = time.perf_counter_ns()
        start, cap, size = self._next_recv, self.capacity, self.response_dtype.itemsize
        lo = start % cap
        responses, stamps = self._response_bytes, self._stamp_bytes
        if lo + n <= cap:
            data = bytearray(responses[lo * size:(lo + n) * size])
            self._stamp_chunks.append(bytes(stamps[lo * 16:(lo + n) * 16]))
        else:  # the run wraps around the queue's end
            rest = lo + n - cap
            data = bytearray(responses[lo * size:])
            data += responses[:rest * size]
            self._stamp_chunks.append(bytes(stamps[lo * 16:]) + bytes(stamps[:rest * 16]))
        self._ready.append(np.frombuffer(data, self.response_dtype))
        self._ready_count += n
        self._account(n, now)

    def _account(self, n: int, now: int) -> None:
        """The next ``n`` messages taken out of the queue at ``now``: their host
        latencies as one (ns, count) pair per send they came from."""
        sends, runs = self._sends, self._latency_runs
        if self._first_send_ns is None and sends:
            self._first_send_ns = sends[0][1]
        left = n
        while left and sends:  # (a Ctrl-C at the wrong moment can leave a send unrecorded)
            entry = sends[0]
            if entry[0] <= left:
                sends.popleft()
                runs.append((now - entry[1], entry[0]))
                left -= entry[0]
            else:
                entry[0] -= left
                runs.append((now - entry[1], left))
                left = 0
        self._next_recv += n
        self._last_recv_ns = self._progress_ns = now

    def _take(self, count: int) -> np.ndarray:
        ready = self._ready
        if len(ready) == 1 and len(ready[0]) == count:  # the common case: exactly one run
            self._ready_count = 0
            return ready.pop()
        out = np.concatenate(ready) if len(ready) != 1 else ready[0]
        self._ready = [out[count:]] if count < len(out) else []
        self._ready_count = len(out) - min(count, len(out))
        return out[:count]

    def _wait_for(self, count: int, timeout: float | None, collecting_only: bool = False) -> None:
        """Collect until ``count`` answers are ready (or, ``collecting_only``,
        until anything new arrives); the watchdog and faults are checked.

        Answers arrive out of order (each message has a thread of its own), so
        the poll watches one word: the LAST answer needed. Once it is there,
        the others are checked; if one is still missing, that one is watched
        next. All of them are then moved in one go, not run by partial run.
        Polls spin in rounds of 1024 with the health checks in between; after
        ``SPIN_POLLS`` they sleep, and collect what has come each time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._head_words[1] != self._head_due:  # a send cut short by Ctrl-C
            self._head_words[1] = self._head_due
            if self._ring_bell is not None:
                self._ring_bell()
        words, cap, native = self._answered_words, self.capacity, self._native
        target = self._ready_count + count
        watch = self._next_recv if collecting_only else self._next_recv + count - 1
        polls = 0
        try:
            while True:
                slot = watch % cap
                if words[slot] != watch:
                    if polls < SPIN_POLLS:
                        polls += 1024
                        if native is not None:  # C spins a while, GIL released
                            seen = native.wait_word(self._answered_addr + 8 * slot, watch,
                                                    SPIN_ROUND_NS)
                        else:
                            seen = False
                            for _ in _SPIN_ROUND:  # the tight part: one word read a poll
                                if words[slot] == watch:
                                    seen = True
                                    break
                        if not seen:
                            self._check_health()
                            self._check_deadline(deadline, timeout)
                            continue
                    else:
                        time.sleep(50e-6)
                        if self._collect(None if collecting_only else target - self._ready_count):
                            if collecting_only or self._ready_count >= target:
                                return
                        self._check_health()
                        self._check_deadline(deadline, timeout)
                        continue
                if collecting_only:
                    self._collect()
                    return
                start, need = self._next_recv, target - self._ready_count
                if need <= 0:
                    return
                lo = start % cap
                if need == 1 and watch == start:
                    n = 1
                elif native is not None and lo + need <= cap:
                    n = native.run_length(self._answered_addr + 8 * lo, start, need)
                elif (lo + need <= cap and need <= 256  # (inline: the common case)
                      and sum(words[lo:lo + need]) == need * start + need * (need - 1) // 2):
                    n = need  # (why a sum: see _answered_in)
                else:
                    n = self._answered_run(start, need)
                if n == need:
                    self._move(n)
                    return
                watch = start + n  # the first one still missing
        except KeyboardInterrupt:
            raise self._stopped_by_interrupt() from None

    def recv(self, count: int | None = None, timeout: float | None = None) -> np.ndarray:
        """The next ``count`` answers in order (default: every message sent and
        not yet received), as a structured array of the response dtype. On a
        timeout, answers that did arrive stay queued for the next call."""
        if count is not None and type(count) is not int:
            count = _whole_count(self, count)
        slots = self._slots
        if slots is not None and not self._ready_count and self._launch is not None:
            # the common recv, in C: watch for the answers, copy them out (else the path below)
            start = self._next_recv
            n = self._next_send - start if count is None else count
            if 0 < n <= self._next_send - start:
                try:
                    got = slots.take(start, n, self._head_due, SPIN_ROUND_NS)
                    if got is not None:
                        answers, stamps, now = got
                        self._stamp_chunks.append(stamps)
                        self._account(n, now)
                        return answers
                except KeyboardInterrupt:  # as in _wait_for: a half-counted collection is not retaken
                    raise self._stopped_by_interrupt() from None
        pending, depth = self._ready_count, self._next_send - self._next_recv
        if count is None:
            count = pending + depth
        if count < 0:
            raise RingError(f"ring {self.name!r}: recv(count): the count must be a whole number "
                            f"of answers, 0 or more (None: all {pending + depth} outstanding), "
                            f"not {count}")
        if count > pending:
            if count > pending + depth:
                raise RingError(f"ring {self.name!r}: asked for {count} answers but only "
                                f"{pending + depth} messages were sent and not received")
            if self._launch is None:
                self._check_running()
            self._wait_for(count - pending, timeout)
        if count == 0:
            return np.empty(0, dtype=self.response_dtype)
        return self._take(count)

    def _native_slots(self):
        """The words module's Slots for the current buffer (send() and recv()
        of whole batches in C), or None: no C words module."""
        native = self._native
        if native is None:
            return None
        size = self.response_dtype.itemsize
        return native.Slots(self._requests_addr, self._responses_addr, self._stamps_addr,
                            self._answered_addr, self._head_addr, self.capacity,
                            self.request_dtype.itemsize, size,
                            functools.partial(answer_pool, self.response_dtype,
                                              max(1, _BATCH_POOL_BYTES // size)), self._bell)


def answer_pool(dtype: np.dtype, places: int, need: int):
    """A new private array of answers for the C caller or slots: (array,
    address, length), ``places`` long or ``need`` where that is more. (Not a
    bound method: the caller would keep its ring alive.)"""
    pool = np.empty(max(places, need), dtype=dtype)
    return pool, int(pool.ctypes.data), len(pool)


def _whole_count(ring, count) -> int:
    """recv()'s count as an int, or RingError (a float, a string, a negative number)."""
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)):
        raise RingError(f"ring {ring.name!r}: recv(count): the count must be a whole number of "
                        f"answers, 0 or more (None: all outstanding), not {count!r}")
    return int(count)


def refuse_numbers(ring, message) -> None:
    """RingLayoutError for what NumPy would copy into every field of a message
    (a number, or an array of numbers): a message is a record or a tuple of
    field values."""
    if isinstance(message, np.ndarray) and not message.dtype.names:
        what = f"a {message.dtype} array"
    elif isinstance(message, (int, float, complex, np.number, np.bool_)):
        what = f"the number {message!r}"
    else:
        return
    raise RingLayoutError(
        f"ring {ring.name!r} takes messages of dtype {ring.request_dtype}; {what} would be "
        f"copied into every field of a message. Give a structured array of that dtype, a "
        f"record, or a tuple of field values per message (e.g. {_example(ring.request_dtype)}); "
        f"to send bytes on purpose, view them as the dtype (array.view(dtype)).")


def _example(dtype: np.dtype) -> str:
    return "(" + ", ".join("..." for _ in dtype.names) + ("," if len(dtype.names) == 1 else "") + ")"


def _partly_sent(full: RingFull, first: int, done: int, n: int) -> RingFull:
    """A RingFull raised part-way through a send, saying how much of it went
    (``sent``, and ``first``: the first message's number)."""
    if done:
        went = (f"{done} of the {n} messages were sent (numbers {first}-{first + done - 1}); "
                f"the other {n - done} were not")
    else:
        went = f"none of the {n} messages were sent"
    error = RingFull(f"{full} ({went})")
    error.sent, error.first = done, first
    return error


def bell_ringer(native, control: int | None, words: memoryview):
    """What wakes a ring's dispatcher after the host published something, or
    None where the kernel never sleeps (``control``: None). The simulator's
    dispatcher, with nothing to do for a while, sets ``control[2]`` and sleeps
    on a futex on ``control[3]``'s low half: after a publication the host
    fences, looks at the flag and, if set, clears it, counts the bell up and
    wakes it. In C (the words module's ``ring_bell``) where it builds; else in
    Python, whose lock round trip is the fence (a locked instruction on x86)."""
    if control is None:
        return None
    if native is not None:
        return functools.partial(native.ring_bell, control)
    fence = threading.Lock()
    futex = ctypes.CDLL(None, use_errno=True).syscall
    sys_futex = 202 if platform.machine().lower() in ("x86_64", "amd64") else 240
    bell = control + 24

    def ring() -> None:
        with fence:
            pass
        if words[2]:
            words[2] = 0
            words[3] = words[3] + 1
            futex(ctypes.c_long(sys_futex), ctypes.c_void_p(bell), ctypes.c_int(1),  # FUTEX_WAKE
                  ctypes.c_int(0x7FFFFFFF), None, None, ctypes.c_int(0))
    return ring
