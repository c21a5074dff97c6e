"""A ring: a persistent kernel serving messages from a host-to-device queue and
answering on a device-to-host queue (see :func:`ring`).

The queues live in memory that both sides address directly
(:meth:`Backend.alloc_mapped`: page-locked host memory mapped into the GPU, or
the simulator's shared arena), one buffer holding, per slot, the request and
its sequence number, the response and its sequence number, and the handler's
device timestamps. The host writes a batch of requests and then their
sequence numbers; the device answers each and publishes its number. Host-side
reads and writes are plain NumPy operations on views of that buffer, with no
copy call in between: on a GPU a copy call alone costs several microseconds,
more than the round trip a ring is for.
"""
from __future__ import annotations

import asyncio
import struct
import time
import weakref

import numpy as np

from ..core.compiler import compile as compile_source
from ..errors import CompileError, WorkbenchError
from ..runtime.session import backend as active_backend
from . import codegen
from .stats import RingStats

_CONTROL_BYTES = 128
_ALIGN = 128
#: Polls the host spins (no sleep) before it starts sleeping between polls.
_SPIN_POLLS = 20000


class RingError(WorkbenchError):
    """A ring could not be made, started or used as asked."""


class RingLayoutError(RingError, TypeError):
    """A message dtype does not match its C struct."""


class RingFull(RingError):
    """The request queue stayed full (the device is not answering fast enough)."""


class RingHang(RingError):
    """No message was answered within the watchdog's time."""


class RingStopped(RingError):
    """The ring is not running."""


def _structured(dtype, what: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if not dtype.names:
        raise RingLayoutError(f"{what} must be a structured NumPy dtype whose fields are the C "
                              f"struct's members, got {dtype}; e.g. np.dtype([('a', 'f4'), "
                              "('b', 'f4')]) for struct { float a, b; }")
    return dtype


_STRUCT_CODES = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i",
                 "u4": "I", "i8": "q", "u8": "Q", "b1": "?"}


def _packer(dtype: np.dtype):
    """``pack_into(buffer, offset, *values)`` writing one message of ``dtype``
    (little-endian scalar fields only), or None where NumPy must convert."""
    fmt, at = "<", 0
    for name in dtype.names:  # the tuple's order: offsets must increase along it
        t, offset = dtype.fields[name][:2]
        code = _STRUCT_CODES.get(f"{t.kind}{t.itemsize}")
        if code is None or t.shape or t.byteorder == ">" or offset < at:
            return None
        fmt += "x" * (offset - at) + code
        at = offset + t.itemsize
    return struct.Struct(fmt).pack_into


def _offsets(capacity: int, request: np.dtype, response: np.dtype) -> dict[str, tuple[int, int]]:
    """Byte (offset, size) of each part of the shared buffer."""
    parts = {"control": _CONTROL_BYTES,
             "response_seq": 8 * capacity, "stamps": 16 * capacity,
             "requests": request.itemsize * capacity, "responses": response.itemsize * capacity}
    layout, at = {}, 0
    for name, size in parts.items():
        layout[name] = (at, size)
        at += -(-size // _ALIGN) * _ALIGN
    layout["total"] = (0, at)
    return layout


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
        self.request_dtype = _structured(request, "request")
        self.response_dtype = _structured(response, "response")
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
        self._pack = _packer(self.request_dtype)
        self.module = _compile(text, handler, request_type, self.request_dtype, response_type,
                               self.response_dtype, f"ring:{self.name}", max_backoff_ns)
        self._serve = self.module["wb_ring_serve"]
        self._batch = self.module["wb_ring_batch"]
        self.threads, self.blocks = self._grid(int(threads), blocks)
        self._buffer = None
        self._launch = None
        self._finalizer = None
        self._ready: list[np.ndarray] = []  # answers collected, not yet returned by recv()
        self._ready_count = 0
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
        lay = _offsets(self.capacity, self.request_dtype, self.response_dtype)

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
        start, size = lay["requests"]
        self._request_bytes = memoryview(buffer.host[start:start + size])
        start, size = lay["responses"]
        self._response_bytes = memoryview(buffer.host[start:start + size])
        self._responses = view("responses", self.response_dtype)
        self._sent_ns = np.zeros(self.capacity, dtype=np.int64)
        base = buffer.device_ptr
        return [base + lay[p][0] for p in ("requests", "responses", "response_seq", "stamps",
                                            "control")]

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
        if self._buffer is None:  # (a new one after a hang: the stuck kernel may still write)
            self._buffer = self.backend.alloc_mapped(
                _offsets(self.capacity, self.request_dtype, self.response_dtype)["total"][1])
        addresses = self._views(self._buffer)
        self._buffer.host[:] = 0
        self._device_head = self.backend.to_device(np.zeros(1, dtype=np.int64))
        self._next_send = self._next_recv = 1
        args = self._serve.convert_args((*addresses, self.backend.device_pointer(self._device_head),
                                         self.capacity))
        self._launch = self.backend.launch_persistent(
            self._serve.function, (self.blocks, 1, 1), (self.threads, 1, 1), args)
        self._finalizer = weakref.finalize(self, _shutdown, self._control, _Quiet(self._launch))
        self._progress_at = time.monotonic()
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
        if isinstance(batch, np.ndarray) and batch.dtype.names:
            if batch.dtype != self.request_dtype:
                raise RingLayoutError(f"ring {self.name!r} takes messages of dtype "
                                      f"{self.request_dtype}, got {batch.dtype}")
            return np.ascontiguousarray(batch.reshape(-1))
        try:
            return np.atleast_1d(np.asarray(batch, dtype=self.request_dtype))
        except (TypeError, ValueError) as exc:
            raise RingLayoutError(f"cannot make messages of dtype {self.request_dtype} from "
                                  f"{type(batch).__name__}: {exc}") from None

    def send(self, batch, *, block: bool = True, timeout: float | None = None) -> int:
        """Queue ``batch`` (a structured array of the request dtype, a record,
        or a tuple of field values) and return the first message's sequence
        number. A full queue waits (``block=True``, up to ``timeout`` seconds)
        or raises :class:`RingFull`; answers that arrive meanwhile are kept."""
        self._check_running()
        batch = self._as_batch(batch)
        done = 0
        first = self._next_send
        while done < len(batch):
            room = self.capacity - self.depth
            if room == 0:
                self._make_room(block, timeout)
                continue
            chunk = batch[done:done + room]
            self._write(chunk)
            done += len(chunk)
        return first

    def _write(self, chunk: np.ndarray) -> None:
        now = time.perf_counter_ns()
        if self.depth == 0:  # the watchdog counts from the first message waiting
            self._progress_at = time.monotonic()
        n, slot = len(chunk), self._next_send % self.capacity
        if slot + n <= self.capacity:  # no wrap: one slice
            self._requests[slot:slot + n] = chunk
            self._sent_ns[slot:slot + n] = now
        else:
            for lo, hi, at in _runs(self._next_send, n, self.capacity):
                self._requests[at:at + hi - lo] = chunk[lo:hi]
                self._sent_ns[at:at + hi - lo] = now
        self._next_send += n
        # The head, after the payloads, publishes them: x86 keeps stores in order
        # (NumPy copies chunks of at most the queue's size, well below the sizes
        # where memcpy switches to weakly ordered streaming stores).
        self._control[1] = self._next_send - 1

    def _make_room(self, block: bool, timeout: float | None) -> None:
        if self._collect():
            return
        if not block:
            raise RingFull(f"ring {self.name!r}: all {self.capacity} slots hold unanswered "
                           "messages; wait, or send with block=True")
        try:
            self._wait_for(1, timeout, collecting_only=True)
        except TimeoutError:
            raise RingFull(f"ring {self.name!r}: the queue stayed full for {timeout:g} s "
                           f"({self.depth} unanswered messages)") from None

    def _collect(self) -> int:
        """Move answered messages, in order, from the queue to the host; how many.

        Cheap for the small batches a ring is for: slices, not index arrays,
        unless the answers wrap around the queue's end; the latencies are
        worked out only when :meth:`stats` asks."""
        count = self._next_send - self._next_recv
        if count == 0:
            return 0
        start, cap = self._next_recv, self.capacity
        lo = start % cap
        if self._answered_words[lo] != start:  # the common case while waiting
            return 0
        if lo + count <= cap:
            if count <= 16:  # a few words: a Python loop beats building arrays
                answered, n = self._answered_words, 1
                while n < count and answered[lo + n] == start + n:
                    n += 1
            else:
                done = self._response_seq[lo:lo + count] == np.arange(start, start + count)
                n = count if done.all() else int(np.argmin(done))
            taken = slice(lo, lo + n)
        else:
            seqs = np.arange(start, start + count, dtype=np.int64)
            slots = seqs % cap
            done = self._response_seq[slots] == seqs
            n = count if done.all() else int(np.argmin(done))
            taken = slots[:n]
        now = time.perf_counter_ns()
        self._ready.append(self._responses[taken].copy())
        self._ready_count += n
        sent = self._sent_ns[taken].copy()
        self._answered.append((now, sent, self._stamps[taken].copy()))
        if self._first_send_ns is None:
            self._first_send_ns = int(sent[0])
        self._last_recv_ns = now
        self._next_recv += n
        self._progress_at = time.monotonic()
        return n

    def _take(self, count: int) -> np.ndarray:
        out = np.concatenate(self._ready) if len(self._ready) != 1 else self._ready[0]
        self._ready = [out[count:]] if count < len(out) else []
        self._ready_count = len(out) - min(count, len(out))
        return out[:count]

    def _wait_for(self, count: int, timeout: float | None, collecting_only: bool = False) -> None:
        """Collect until ``count`` answers are ready (or, ``collecting_only``,
        until anything new arrives); the watchdog and faults are checked."""
        deadline = None if timeout is None else time.monotonic() + timeout
        polls = 0
        target = self.pending + count if not collecting_only else None
        try:
            while True:
                got = self._collect()
                if collecting_only and got:
                    return
                if target is not None and self.pending >= target:
                    return
                polls += 1
                if polls > _SPIN_POLLS:
                    time.sleep(50e-6)
                    self._check_health()
                elif polls % 1024 == 0:
                    self._check_health()
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"ring {self.name!r}: {self.depth} messages still "
                                       f"unanswered after {timeout:g} s")
        except KeyboardInterrupt:
            self.stop(drain=False, timeout=2.0)
            raise

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
        idle = time.monotonic() - self._progress_at
        if self.depth and idle > self.watchdog_s:
            seq = self._next_recv
            index = (seq - 1) % self.workers + 32  # the first warp dispatches
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
        if count is None:
            count = self.pending + self.depth
        if count > self.pending:
            if count > self.pending + self.depth:
                raise RingError(f"ring {self.name!r}: asked for {count} answers but only "
                                f"{self.pending + self.depth} messages were sent and not received")
            if self._launch is None:
                self._check_running()
            self._wait_for(count - self.pending, timeout)
        if count == 0:
            return np.empty(0, dtype=self.response_dtype)
        return self._take(count)

    def call(self, message, timeout: float | None = None):
        """Send one message and return its answer (a record of the response dtype).

        The fast path of a ring: one slot written, the head published, one
        word polled; nothing is allocated until the answer is there. A tuple
        of field values is packed straight into the slot."""
        if self._ready or self._next_send != self._next_recv:
            raise RingError(f"ring {self.name!r}: call() needs an empty queue; receive the "
                            f"{self.pending + self.depth} outstanding answers first")
        if self._launch is None:
            self._check_running()
        seq = self._next_send
        slot = seq % self.capacity
        try:
            if self._pack is not None and type(message) is tuple:
                self._pack(self._request_bytes, slot * self.request_dtype.itemsize, *message)
            else:
                self._requests[slot] = message
        except (TypeError, ValueError, struct.error) as exc:
            raise RingLayoutError(f"cannot make a message of dtype {self.request_dtype} from "
                                  f"{message!r}: {exc}") from None
        sent = time.perf_counter_ns()
        self._next_send = seq + 1
        self._head_words[1] = seq  # the head, after the payload: publishes it
        answered = self._answered_words
        for _ in range(_SPIN_POLLS):
            if answered[slot] == seq:
                break
        else:  # slow: wait with the watchdog and fault checks of recv()
            self._sent_ns[slot] = sent
            self._progress_at = time.monotonic()
            return self.recv(1, timeout)[0]
        now = time.perf_counter_ns()
        size = self.response_dtype.itemsize  # (a record over a private copy: cheaper than .copy())
        answer = np.frombuffer(bytearray(self._response_bytes[slot * size:(slot + 1) * size]),
                               self.response_dtype)[0]
        stamps = self._stamp_words
        self._next_recv = seq + 1
        self._single.append(((now - sent) * 1e-9, (stamps[2 * slot + 1] - stamps[2 * slot]) * 1e-9))
        if self._first_send_ns is None:
            self._first_send_ns = sent
        self._last_recv_ns = now
        self._progress_at = time.monotonic()
        return answer

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
        self._single: list[tuple[float, float]] = []  # (round trip, handler) of call()s
        # (when collected, when each was sent, its device start/end stamps) per collection
        self._answered: list[tuple[int, np.ndarray, np.ndarray]] = []
        self._first_send_ns = None
        self._last_recv_ns = None


    def stats(self) -> RingStats:
        """Messages answered, rate and latency percentiles so far."""
        single = np.array(self._single, dtype=np.float64).reshape(-1, 2)
        host = np.concatenate([*((now - sent) * 1e-9 for now, sent, _ in self._answered),
                               single[:, 0]])
        device = np.concatenate([*((st[:, 1] - st[:, 0]).astype(np.float64) * 1e-9
                                   for _, _, st in self._answered), single[:, 1]])
        seconds = ((self._last_recv_ns - self._first_send_ns) * 1e-9
                   if self._first_send_ns is not None else 0.0)
        return RingStats(self.name, self.backend.name, host, device, seconds, self.workers,
                         self.capacity)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (f"<Ring {self.name!r} {state} on {self.backend.name}: {self.blocks} blocks x "
                f"{self.threads} threads, {self.capacity} slots, depth {self.depth}>")

    def _repr_html_(self) -> str:
        return self.stats()._repr_html_()


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


def _runs(first_seq: int, count: int, capacity: int):
    """(lo, hi, slot) runs of ``count`` consecutive sequence numbers from
    ``first_seq`` that are contiguous in the slots (a wrap splits them)."""
    lo = 0
    while lo < count:
        slot = (first_seq + lo) % capacity
        hi = min(count, lo + capacity - slot)
        yield lo, hi, slot
        lo = hi


def _compile(text, handler, request_type, request, response_type, response, name,
             max_backoff_ns):
    """The user's source with the ring's kernels, its structs checked against the dtypes."""
    serve = codegen.serve_source(handler, request_type, response_type, max_backoff_ns)
    structs = [(request_type, request), (response_type, response)]
    probe, labels = codegen.probe_source(structs)
    try:
        module = compile_source(text + serve + probe, name=name)
    except CompileError as probe_error:
        try:
            compile_source(text + serve, name=name)
        except CompileError:
            raise  # the user's code or the handler's signature: the diagnostics say where
        fields = "; ".join(f"{s}: {', '.join(d.names)}" for s, d in structs)
        errors = [d.message for d in getattr(probe_error, "diagnostics", ())
                  if d.severity == "error"] or [str(probe_error)]
        raise RingLayoutError(f"the message dtypes' fields are not all members of their C "
                              f"structs ({fields}): name each field as its struct member "
                              f"(the compiler: {errors[0]})") from None
    out = module.backend.xp.zeros(len(labels), dtype=np.int64)
    module["wb_ring_layout"](out, grid=1, block=1)
    got = module.backend.to_host(out).tolist()
    want = codegen.expected_layout(structs)
    wrong = [f"{label}: C says {g}, the dtype {w}" for label, g, w in zip(labels, got, want)
             if g != w]
    if wrong:
        raise RingLayoutError("the message dtypes do not match the C structs (" + "; ".join(wrong)
                              + "). Give the dtype the struct's padding (np.dtype(..., align=True) "
                              "lays fields out as C does) or reorder its fields.")
    return module


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
