"""A ring: a persistent kernel serving messages from a host-to-device queue and
answering on a device-to-host queue (see :func:`ring`).

The queues live in memory that both sides address directly
(:meth:`Backend.alloc_mapped`: page-locked host memory mapped into the GPU, or
the simulator's shared arena), one buffer holding, per slot, the request and
its sequence number, the response and its sequence number, and the handler's
device timestamps. The host writes a batch of requests and then their
sequence numbers; the device answers each and publishes its number. Host-side
reads and writes are plain operations on views of that buffer (memoryviews
and bytes copies, cheaper from Python than NumPy's), with no copy call in
between: on a GPU a copy call alone costs several microseconds, more than the
round trip a ring is for. The copies and waits of send(), recv() and call()
run in C where the words module builds (:mod:`workbench.backends.native_words`:
``Slots`` and ``BoxCaller``), else in Python.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import platform
import struct
import time
import weakref

import numpy as np

from ..backends import native_words
from ..runtime.session import backend as active_backend
from .errors import RingError, RingFull, RingHang, RingLayoutError, RingStopped
from .codegen import call_box
from .layout import compile_checked, offsets, packer, structured, tuple_fields
from .stats import RingStats

#: Polls the host spins (no sleep) before it starts sleeping between polls
#: (a poll is one word read: some 40-80 ns, so a few milliseconds of spinning).
_SPIN_POLLS = 65536
_SPIN_ROUND = range(1024)
#: The same with the C watcher (:mod:`~workbench.backends.native_words`): it spins
#: this long per call, GIL released, between the Python checks (health, deadline,
#: Ctrl-C), and call() this long before it falls back to recv()'s waiting.
_SPIN_ROUND_NS = 100_000
_CALL_SPIN_NS = 4_000_000
#: call()'s answers are records of a private array of this many, one each, so
#: that an answer costs a copy of its bytes and no new array; recv()'s answers
#: (with the C words module) are slices of one of this many bytes (or of one
#: as large as the batch).
_ANSWER_POOL = 256
_BATCH_POOL_BYTES = 1 << 16
#: Hosts whose stores and loads stay in program order (x86-TSO): the queues need no fences.
_STORES_IN_ORDER = frozenset({"x86_64", "amd64", "i686", "i386"})


def _shutdown(control: np.ndarray, launch, wait_s: float = 2.0) -> None:
    """Stop a ring's kernel (its object is gone, or the interpreter exits)."""
    control[0] = 1
    if launch is not None and not launch.wait_quietly(wait_s):
        launch.kill()


class Ring:
    """A running (or stopped) ring; made by :func:`ring`."""

    def __init__(self, source, *, request, response, handler: str = "handle",
                 request_type: str = "Request", response_type: str = "Response",
                 capacity: int = 8192, threads: int = 128, blocks: int | None = None,
                 name: str | None = None, watchdog_s: float = 10.0, max_backoff_ns: int = 64):
        self.request_dtype = structured(request, "request")
        self.response_dtype = structured(response, "response")
        if capacity < 32 or capacity % 32:
            raise RingError(f"capacity must be a positive multiple of 32 (a warp's slots), got "
                            f"{capacity}")
        self.capacity = int(capacity)
        self.name = name or handler
        self.watchdog_s = float(watchdog_s)
        self.backend = active_backend()
        text = getattr(source, "source", source)
        if not isinstance(text, str):
            raise RingError("source must be CUDA C++ text or a compiled module (wb.modules[...]), "
                            f"got {type(source).__name__}")
        self._pack = packer(self.request_dtype)
        self._box = call_box(self.request_dtype, self.response_dtype)  # None: call() uses a slot
        self._box_message = np.zeros(1, dtype=self.request_dtype)  # call()'s message, packed
        self._box_message_bytes = memoryview(self._box_message.view(np.uint8))
        self._box_seq = 0  # the last message call() sent through the box
        self._box_pending = False  # and the dispatcher may not be done with it yet
        self._caller = None  # the words module's BoxCaller for this buffer (start() makes it)
        self._slots = None  # and its Slots (send() and recv() of batches in C)
        self.module = compile_checked(text, handler, request_type, self.request_dtype,
                                      response_type, self.response_dtype, f"ring:{self.name}",
                                      max_backoff_ns)
        self._serve = self.module["wb_ring_serve"]
        self._batch = self.module["wb_ring_batch"]
        self.threads, self.blocks = self._grid(int(threads), blocks)
        self._buffer = None
        self._launch = None
        self._finalizer = None
        self._ready: list[np.ndarray] = []  # answers collected, not yet returned by recv()
        self._ready_count = 0
        self._native = native_words.module()  # None: the same work in Python
        self._new_answer_pool()
        self.reset_stats()

    # -- set-up ----------------------------------------------------------------------------
    def _grid(self, threads: int, blocks: int | None) -> tuple[int, int]:
        """Threads per block and blocks, checked to be co-resident."""
        occupancy = self._serve.occupancy(block=threads)
        sms = max(1, int(getattr(self.backend.device_properties(), "multiprocessors", 1) or 1))
        limit = occupancy.active_blocks * sms
        extra = self.backend.concurrent_blocks()
        why = f"{occupancy.active_blocks} per SM x {sms} SMs (occupancy: {occupancy.limit})"
        if extra is not None and extra < limit:
            limit, why = extra, f"the simulator runs {extra} blocks at once (one per OS thread)"
        if limit < 1:
            raise RingError(f"wb_ring_serve cannot run with {threads} threads a block "
                            f"({occupancy.limit}); use fewer threads")
        if blocks is None:
            blocks = min(limit, sms)
        if threads % 32:
            raise RingError(f"a ring's blocks must hold whole warps (its first warp dispatches): "
                            f"threads={threads} is not a multiple of 32")
        if blocks * threads < 64:
            raise RingError(f"a ring needs at least 64 threads in all (its first warp dispatches, "
                            f"the others answer); {blocks} blocks of {threads} threads have "
                            f"{blocks * threads}: ask for more threads")
        if blocks > limit:
            raise RingError(f"{blocks} blocks of {threads} threads cannot all be resident at "
                            f"once on this device: at most {limit} ({why}). A ring's blocks must "
                            "all run together; ask for fewer blocks or threads.")
        return threads, int(blocks)

    def _views(self, buffer):
        lay = offsets(self.capacity, self.request_dtype, self.response_dtype)

        def view(part, dtype):
            start, size = lay[part]
            return buffer.host[start:start + size].view(dtype)
        self._control = view("control", np.int64)  # [0] stop flag, [1] head
        self._response_seq = view("response_seq", np.int64)
        self._stamps = view("stamps", np.uint64).reshape(self.capacity, 2)
        self._requests = view("requests", self.request_dtype)
        # call()'s fast path reads and writes words through memoryviews: a
        # Python int per access, several times cheaper than NumPy scalars
        self._head_words = memoryview(self._control)
        self._answered_words = memoryview(self._response_seq)
        self._stamp_words = memoryview(self._stamps.reshape(-1))
        start, size = lay["stamps"]
        self._stamp_bytes = memoryview(buffer.host[start:start + size])
        start, size = lay["requests"]
        self._request_bytes = memoryview(buffer.host[start:start + size])
        start, size = lay["responses"]
        self._response_bytes = memoryview(buffer.host[start:start + size])
        self._responses = view("responses", self.response_dtype)
        # the C watcher's addresses (the buffer outlives them: the views above hold it)
        host = int(buffer.host.ctypes.data)
        self._head_addr = host + lay["control"][0] + 8
        self._answered_addr = host + lay["response_seq"][0]
        self._responses_addr = host + lay["responses"][0]
        self._requests_addr = host + lay["requests"][0]
        self._stamps_addr = host + lay["stamps"][0]
        self._box_addr = host + lay["call_box"][0]
        self._answer_addr = host + lay["answer_box"][0]
        base = buffer.device_ptr
        return [base + lay[p][0] for p in ("requests", "responses", "response_seq", "stamps",
                                            "control")], [base + lay[p][0] for p in
                                                          ("call_box", "answer_box")]

    # -- life cycle ------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        """Threads that answer messages (all but the dispatching first warp)."""
        return self.blocks * self.threads - 32

    @property
    def running(self) -> bool:
        launch = self._launch  # read once: a panel's thread asks too
        return launch is not None and not launch.done()

    def start(self) -> "Ring":
        """Launch the persistent kernel (again, after :meth:`stop`)."""
        if self.running:
            return self
        if platform.machine().lower() not in _STORES_IN_ORDER:
            raise RingError(
                f"ring {self.name!r}: the host side relies on x86's memory order (payloads "
                f"written before the head, answers read after their sequence word, with no "
                f"fences); this host is {platform.machine()}, where that order is not "
                f"guaranteed. Use one kernel launch per batch here (ring.launch_batch).")
        if self._buffer is None:  # (a new one after a hang: the stuck kernel may still write)
            self._buffer = self.backend.alloc_mapped(
                offsets(self.capacity, self.request_dtype, self.response_dtype)["total"][1])
        addresses, boxes = self._views(self._buffer)
        self._buffer.host[:] = 0
        self._caller = self._box_caller()
        self._slots = self._native_slots()
        self._device_head = self.backend.to_device(np.zeros(1, dtype=np.int64))
        # per slot, the last call() the dispatcher answered through the box (device memory:
        # its worker reads it beside the payload, from L2, and passes the message over)
        self._call_marks = self.backend.to_device(np.zeros(self.capacity if self._box else 1,
                                                            dtype=np.int64))
        self._next_send = self._next_recv = 1
        # the head the host means to publish: the last message sent through a slot
        # (one sent through the call box is published by the dispatcher)
        self._head_due = 0
        self._box_seq, self._box_pending = 0, False
        # [count, host send time ns] per send not yet collected, in order (the
        # messages of a stop without draining are forgotten with their numbers)
        self._sends = collections.deque()
        args = self._serve.convert_args((*addresses, self.backend.device_pointer(self._device_head),
                                         self.capacity,
                                         self.backend.device_pointer(self._call_marks), *boxes))
        self._launch = self.backend.launch_persistent(
            self._serve.function, (self.blocks, 1, 1), (self.threads, 1, 1), args)
        self._finalizer = weakref.finalize(self, _shutdown, self._control, _Quiet(self._launch))
        self._progress_ns = time.perf_counter_ns()  # (a monotonic clock, as the stats' times)
        return self

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

    def __enter__(self) -> "Ring":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(drain=exc_type is None)

    # -- messages --------------------------------------------------------------------------
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
                self._make_room(block, timeout)
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

    def _settle_box(self, block: bool, timeout: float | None) -> None:
        """Wait until the dispatcher is done with the last call through the box
        (its slot's answer written: it writes that last) before a send publishes
        a head: a head past a call's number that the dispatcher has not taken
        yet would leave the call to no one (its thread passes it over), and the
        slot's late writes must land before the slot is used again. Mostly done
        already; after a call that timed out, this waits for its handler, as a
        full queue does (``block=False``, or nothing within ``timeout``:
        :class:`RingFull`, nothing sent)."""
        slot, want = self._box_seq % self.capacity, self._box_seq
        words, native = self._answered_words, self._native
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while words[slot] != want:
                if native.wait_word(self._answered_addr + 8 * slot, want,
                                    _SPIN_ROUND_NS if block else 0):
                    break
                if not block or (deadline is not None and time.monotonic() >= deadline):
                    raise RingFull(f"ring {self.name!r}: the call() of message {want} is still "
                                   "being answered, and nothing is sent before it is; wait, or "
                                   "send with block=True")
                self._check_health()
        except KeyboardInterrupt:  # as in _wait_for
            self.stop(drain=False, timeout=2.0)
            raise
        self._caller.clear()  # (empty already, unless the call timed out)
        self._box_pending = False

    def _make_room(self, block: bool, timeout: float | None) -> None:
        try:
            if self._collect():
                return
        except KeyboardInterrupt:  # as in _wait_for: a collection cut short must not be taken again
            self.stop(drain=False, timeout=2.0)
            raise
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
        ``_SPIN_POLLS`` they sleep, and collect what has come each time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._head_words[1] != self._head_due:  # a send cut short by Ctrl-C
            self._head_words[1] = self._head_due
        words, cap, native = self._answered_words, self.capacity, self._native
        target = self._ready_count + count
        watch = self._next_recv if collecting_only else self._next_recv + count - 1
        polls = 0
        try:
            while True:
                slot = watch % cap
                if words[slot] != watch:
                    if polls < _SPIN_POLLS:
                        polls += 1024
                        if native is not None:  # C spins a while, GIL released
                            seen = native.wait_word(self._answered_addr + 8 * slot, watch,
                                                    _SPIN_ROUND_NS)
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
            self.stop(drain=False, timeout=2.0)
            raise

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

    def recv(self, count: int | None = None, timeout: float | None = None) -> np.ndarray:
        """The next ``count`` answers in order (default: every message sent and
        not yet received), as a structured array of the response dtype. On a
        timeout, answers that did arrive stay queued for the next call."""
        slots = self._slots
        if slots is not None and not self._ready_count and self._launch is not None:
            # the common recv, in C: watch for the answers, copy them out (else the path below)
            start = self._next_recv
            n = self._next_send - start if count is None else count
            if 0 < n <= self._next_send - start:
                try:
                    got = slots.take(start, n, self._head_due, _SPIN_ROUND_NS)
                    if got is not None:
                        answers, stamps, now = got
                        self._stamp_chunks.append(stamps)
                        self._account(n, now)
                        return answers
                except KeyboardInterrupt:  # as in _wait_for: a half-counted collection is not retaken
                    self.stop(drain=False, timeout=2.0)
                    raise
        pending, depth = self._ready_count, self._next_send - self._next_recv
        if count is None:
            count = pending + depth
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

    def call(self, message, timeout: float | None = None):
        """Send one message and return its answer (a record of the response dtype).

        The fast path of a ring. Where the messages are small enough (up to
        256 bytes, answers up to 248) and the C words module is there, the
        message goes through the call box and the dispatching warp answers it
        itself (see :mod:`~workbench.rings.codegen`); a tuple of field values is
        packed, written, watched for and answered in one C call. Otherwise
        one slot is written, the head published and one word polled. Nothing
        is allocated until the answer is there: the answer is a record of a
        small private array that holds the next answers too, each in a place
        of its own."""
        seq = self._next_send
        if self._ready or seq != self._next_recv:
            raise RingError(f"ring {self.name!r}: call() needs an empty queue; receive the "
                            f"{self.pending + self.depth} outstanding answers first")
        if self._launch is None:
            self._check_running()
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
                self._interrupted_call(seq)
                raise
            self._box_seq, self._box_pending = seq, True  # (sent: nothing raised before it was)
            if answer is None:  # not answered within the spin
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
            if answered[slot] != seq:
                for _ in range(_SPIN_POLLS):
                    if answered[slot] == seq:
                        break
                else:
                    late = True
        except KeyboardInterrupt:
            self._interrupted_call(seq)
            raise
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
                                      self._pool_addr + i * size, size, spin)
        except KeyboardInterrupt:
            self._interrupted_call(seq)
            raise
        if got is None:  # slow: wait with the watchdog and fault checks of recv()
            return self._call_late(seq, t0, timeout)
        sent, now = got
        return self._call_answered(seq, slot, i, sent, now)

    def _pack_message(self, message, data, offset: int, records: np.ndarray, index: int) -> None:
        """``message`` into ``data`` at ``offset`` (a tuple, by ``struct``) or into
        ``records[index]`` (anything else, by NumPy), or RingLayoutError."""
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

    def _interrupted_call(self, seq: int) -> None:
        """Ctrl-C during a call(): as in recv(), the ring stops (the message given up)."""
        self._next_send = seq + 1
        if not self._sends:
            self._sends.append([1, time.perf_counter_ns()])
        self.stop(drain=False, timeout=2.0)

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
                                functools.partial(_answer_pool, self.response_dtype, _ANSWER_POOL),
                                self._single)

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
                            functools.partial(_answer_pool, self.response_dtype,
                                              max(1, _BATCH_POOL_BYTES // size)))

    def _answer_place(self) -> int:
        """The answer pool's next free place (a new pool when it is used up)."""
        if self._pool_next == _ANSWER_POOL:
            self._new_answer_pool()
        return self._pool_next

    def _call_answered(self, seq: int, slot: int, i: int, sent: int, now: int):
        """A call()'s answer (through a slot), copied to place ``i`` of the answer
        pool: its figures kept."""
        self._pool_next = i + 1
        stamps = self._stamp_words
        self._next_recv = seq + 1
        self._single.append((now - sent, stamps[2 * slot + 1] - stamps[2 * slot]))
        if self._first_send_ns is None:
            self._first_send_ns = sent
        self._last_recv_ns = now
        return self._pool[i]

    def _new_answer_pool(self) -> None:
        # (the old one lives on as long as answers taken from it do)
        self._pool = np.empty(_ANSWER_POOL, dtype=self.response_dtype)
        self._pool_bytes = memoryview(self._pool.view(np.uint8))
        self._pool_addr = int(self._pool.ctypes.data)
        self._pool_next = 0

    async def acall(self, message, timeout: float | None = None):
        """:meth:`call` for asyncio: waits by yielding to the event loop."""
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

    def launch_batch(self, batch) -> np.ndarray:
        """Answer ``batch`` with one ordinary kernel launch instead of the ring
        (copy in, launch, copy out): the comparison a ring is measured against."""
        batch = self._as_batch(batch)
        n = len(batch)
        if n == 0:
            return np.empty(0, dtype=self.response_dtype)
        b = self.backend
        d_in = b.to_device(batch.view(np.uint8))
        d_out = b.allocate((n * self.response_dtype.itemsize,), np.uint8)
        block = min(256, -(-n // 32) * 32)
        self._batch(b.device_pointer(d_in), b.device_pointer(d_out), n,
                    grid=-(-n // block), block=block)
        return b.to_host(d_out).view(self.response_dtype)

    # -- figures ---------------------------------------------------------------------------
    def reset_stats(self) -> None:
        """Forget the figures so far (:meth:`stats` starts again)."""
        self._single: list[tuple[int, int]] = []  # (round trip, handler) ns of call()s
        if self._caller is not None:
            self._caller.single = self._single  # (the C caller appends to it)
        # (round trip ns, messages) per send's part of a collection; the stamps
        # (device start and end, u64 pairs) of each collection's messages
        self._latency_runs: list[tuple[int, int]] = []
        self._stamp_chunks: list[bytes] = []
        self._first_send_ns = None
        self._last_recv_ns = None

    def stats(self) -> RingStats:
        """Messages answered, rate and latency percentiles so far."""
        # lists read once each: a panel's thread asks while the ring collects
        single = np.array(self._single, dtype=np.float64).reshape(-1, 2) * 1e-9
        runs = np.array(self._latency_runs, dtype=np.int64).reshape(-1, 2)
        stamps = np.frombuffer(b"".join(self._stamp_chunks), dtype=np.uint64).reshape(-1, 2)
        n = min(int(runs[:, 1].sum()), len(stamps))  # (a collection read half-way: left out)
        host = np.repeat(runs[:, 0], runs[:, 1])[:n].astype(np.float64) * 1e-9
        device = (stamps[:n, 1] - stamps[:n, 0]).astype(np.float64) * 1e-9
        host = np.concatenate([host, single[:, 0]])
        device = np.concatenate([device, single[:, 1]])
        last, caller = self._last_recv_ns or 0, self._caller
        if caller is not None and self._first_send_ns is not None:
            last = max(last, caller.seen_ns)  # (the C caller's calls leave _last_recv_ns be)
        seconds = (last - self._first_send_ns) * 1e-9 if self._first_send_ns is not None else 0.0
        return RingStats(self.name, self.backend.name, host, device, seconds, self.workers,
                         self.capacity)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (f"<Ring {self.name!r} {state} on {self.backend.name}: {self.blocks} blocks x "
                f"{self.threads} threads, {self.capacity} slots, depth {self.depth}>")

    def _repr_html_(self) -> str:
        return self.stats()._repr_html_()


def _answer_pool(dtype: np.dtype, places: int, need: int):
    """A new private array of answers for the C caller or slots: (array,
    address, length), ``places`` long or ``need`` where that is more. (Not a
    bound method: the caller would keep its ring alive.)"""
    pool = np.empty(max(places, need), dtype=dtype)
    return pool, int(pool.ctypes.data), len(pool)


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


def ring(source, *, request, response, handler: str = "handle", start: bool = True,
         **options) -> Ring:
    """Turn a CUDA C++ message handler into a persistent GPU service.

    ``source`` (CUDA C++ text or a compiled module) defines the message structs
    and ``__device__ void handler(const Request& in, Response& out)``;
    ``request`` and ``response`` are the matching NumPy structured dtypes,
    checked against the structs' sizes and field offsets as the compiler lays
    them out. The workbench generates the persistent kernel around the handler
    and launches it with every block resident at once (refusing when the
    device cannot hold them). Options: ``request_type``/``response_type`` (the
    struct names, default ``Request``/``Response``), ``capacity`` (queue slots,
    a multiple of 32), ``threads`` per block, ``blocks``, ``watchdog_s`` (a
    handler making no progress for this long is reported), ``name``.

    Use it as a context manager (``with wb.ring(...) as r: r.call(msg)``) or
    call ``stop()``; a ring whose object is gone is stopped by its finalizer.
    """
    r = Ring(source, request=request, response=response, handler=handler, **options)
    return r.start() if start else r
