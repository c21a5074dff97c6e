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

This module sets a ring up, starts it and keeps its figures; its parts are
queues.py (send, recv), calls.py (call through the call box) and watchdog.py
(stop, the watchdog and the fault checks).
"""
from __future__ import annotations

import collections
import platform
import time
import weakref

import numpy as np

from ..backends import native_words
from ..present.units import format_bytes
from ..runtime.session import backend as active_backend
from .calls import RingCalls
from .callbox import call_box
from .codegen import serve_source
from .cooperative import refuse_large_answers, rounds_source
from .errors import RingError
from .layout import compile_checked, offsets, packer, structured
from .queues import RingQueues, bell_ringer
from .stats import RingStats
from .watchdog import RingWatchdog, _Quiet, _shutdown

#: Hosts whose stores and loads stay in program order (x86-TSO): the queues need no fences.
_STORES_IN_ORDER = frozenset({"x86_64", "amd64", "i686", "i386"})
#: A queue takes at most this much page-locked host memory unless asked (max_queue_bytes=)...
MAX_QUEUE_BYTES = 1 << 30
#: ... and the default capacity (8192 slots) is cut down to keep it within this.
DEFAULT_QUEUE_BYTES = 256 << 20
DEFAULT_CAPACITY = 8192


def queue_capacity(capacity: int | None, request: np.dtype, response: np.dtype,
                   max_queue_bytes: int) -> int:
    """The queue's slots: ``capacity`` checked (a multiple of 32 whose queue
    fits ``max_queue_bytes``), or the default (8192 slots, fewer where they
    would take more than DEFAULT_QUEUE_BYTES)."""
    def size(slots: int) -> int:
        return offsets(slots, request, response)["total"][1]
    if capacity is None:
        capacity = DEFAULT_CAPACITY
        while capacity > 32 and size(capacity) > min(DEFAULT_QUEUE_BYTES, max_queue_bytes):
            capacity = max(32, (capacity // 2 + 31) // 32 * 32)
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) \
            or capacity < 32 or capacity % 32:
        raise RingError(f"capacity must be a positive multiple of 32 (a warp's slots), got "
                        f"{capacity!r}")
    capacity = int(capacity)
    if size(capacity) > max_queue_bytes:
        per_slot = size(64) - size(32)
        fits = max(0, (max_queue_bytes - size(32)) // per_slot // 32 * 32 + 32)
        raise RingError(
            f"a queue of {capacity} slots for {request.itemsize}-byte messages and "
            f"{response.itemsize}-byte answers would take {format_bytes(size(capacity))} of "
            f"page-locked host memory; a ring takes at most {format_bytes(max_queue_bytes)} "
            f"(max_queue_bytes=). Ask for fewer slots"
            + (f" (capacity={fits} fits)" if fits >= 32 and size(fits) <= max_queue_bytes
               else " (capacity=32 is the least)")
            + ", or raise max_queue_bytes if the host can spare it.")
    return capacity


class Ring(RingQueues, RingCalls, RingWatchdog):
    """A running (or stopped) ring; made by :func:`ring`.

    Its parts: the queues (:class:`~workbench.rings.queues.RingQueues`: send,
    recv), the call box (:class:`~workbench.rings.calls.RingCalls`: call,
    acall) and the watchdog (:class:`~workbench.rings.watchdog.RingWatchdog`:
    stop, the health checks); this class sets up the state they share."""

    def __init__(self, source, *, request, response, handler: str | None = None,
                 request_type: str = "Request", response_type: str = "Response",
                 capacity: int | None = None, threads: int = 128, blocks: int | None = None,
                 name: str | None = None, watchdog_s: float = 10.0, max_backoff_ns: int = 64,
                 cooperative: bool | None = None, batch: bool = False,
                 max_queue_bytes: int = MAX_QUEUE_BYTES):
        self.request_dtype = structured(request, "request")
        self.response_dtype = structured(response, "response")
        self.batch = bool(batch)
        if cooperative is None:
            cooperative = self.batch
        elif self.batch and not cooperative:
            raise RingError("a batch handler runs in grid-wide rounds (its threads sync the grid "
                            "between its steps), which needs a cooperative launch: leave out "
                            "cooperative=False")
        self.cooperative = bool(cooperative)
        handler = handler or ("handle_batch" if self.batch else "handle")
        self.capacity = queue_capacity(capacity, self.request_dtype, self.response_dtype,
                                       max_queue_bytes)
        self.name = name or handler
        self.watchdog_s = float(watchdog_s)
        self.backend = active_backend()
        text = getattr(source, "source", source)
        if not isinstance(text, str):
            raise RingError("source must be CUDA C++ text or a compiled module (wb.modules[...]), "
                            f"got {type(source).__name__}")
        self._pack = packer(self.request_dtype)
        # call()'s boxes, where the messages fit them (None: call() uses a slot); a cooperative
        # ring has no dispatching warp to answer them
        self._box = None if self.cooperative else call_box(self.request_dtype, self.response_dtype)
        self._box_message = np.zeros(1, dtype=self.request_dtype)  # call()'s message, packed
        self._box_message_bytes = memoryview(self._box_message.view(np.uint8))
        self._box_seq = 0  # the last message call() sent through the box
        self._box_pending = False  # a call timed out: the dispatcher may not have taken it yet
        self._caller = None  # the words module's BoxCaller for this buffer (start() makes it)
        self._slots = None  # and its Slots (send() and recv() of batches in C)
        if self.cooperative:
            why = refuse_large_answers(self.response_dtype.itemsize, self.batch)
            if why:
                raise RingError(f"ring {self.name!r}: {why}")
            serve = rounds_source(handler, request_type, response_type, self.batch)
        else:
            serve = serve_source(handler, request_type, response_type, max_backoff_ns, self._box,
                                 self.request_dtype.itemsize, self.response_dtype.itemsize)
        self.module = compile_checked(text, serve, request_type, self.request_dtype,
                                      response_type, self.response_dtype, f"ring:{self.name}",
                                      handler=handler)
        self._serve = self.module["wb_ring_rounds" if self.cooperative else "wb_ring_serve"]
        self._batch = self.module["wb_ring_batch"]
        self.threads, self.blocks = self._grid(int(threads), blocks)
        self._buffer = None
        self._launch = None
        self._finalizer = None
        self._ready: list[np.ndarray] = []  # answers collected, not yet returned by recv()
        self._ready_count = 0
        self._next_send = self._next_recv = 1
        self._bell = None  # the control words' address where the kernel may sleep (start())
        self._ring_bell = None  # and what wakes it after a publication
        self._native = native_words.module()  # None: the same work in Python
        #: Messages sent and never answered: given up when the kernel faulted, hung or was
        #: stopped without draining (over the ring's life; the error at the time says which).
        self.lost = 0
        self._stopped_why = None  # why the kernel is not running, when it ran before
        self._new_answer_pool()
        self.reset_stats()

    # -- set-up ----------------------------------------------------------------------------
    def _grid(self, threads: int, blocks: int | None) -> tuple[int, int]:
        """Threads per block and blocks, checked to be co-resident (a
        cooperative launch: checked as ``cudaLaunchCooperativeKernel`` does)."""
        kernel = self._serve.name
        if self.cooperative and self.backend.device_attribute("cudaDevAttrCooperativeLaunch") == 0:
            raise RingError(f"ring {self.name!r}: this device cannot launch kernels cooperatively "
                            "(cudaDevAttrCooperativeLaunch is 0: under MPS, say, or on a device "
                            "that lacks it), which a cooperative ring needs; make the ring with "
                            "cooperative=False (a per-message handler)")
        occupancy = self._serve.occupancy(block=threads)
        sms = max(1, int(getattr(self.backend.device_properties(), "multiprocessors", 1) or 1))
        limit = occupancy.active_blocks * sms
        extra = self.backend.concurrent_blocks(self.cooperative, threads)
        why = f"{occupancy.active_blocks} per SM x {sms} SMs (occupancy: {occupancy.limit})"
        if extra is not None and extra < limit:
            limit, why = extra, (f"the simulator runs at most {extra} blocks of {threads} threads "
                                 "of a cooperative launch (every thread needs a stack of its own)"
                                 if self.cooperative else
                                 f"the simulator runs {extra} blocks at once (one per OS thread)")
        if limit < 1:
            raise RingError(f"{kernel} cannot run with {threads} threads a block "
                            f"({occupancy.limit}); use fewer threads")
        if blocks is None:
            blocks = min(limit, sms)
            if self.cooperative and self.backend.simulated:
                blocks = min(blocks, 2)  # (each an OS thread: two, so that rounds cross blocks)
        if self.cooperative:
            if threads < 1 or blocks < 1:
                raise RingError(f"a ring needs at least one block of one thread; got {blocks} "
                                f"blocks of {threads} threads")
        elif threads % 32:
            raise RingError(f"a ring's blocks must hold whole warps (its first warp dispatches): "
                            f"threads={threads} is not a multiple of 32")
        elif blocks * threads < 64:
            raise RingError(f"a ring needs at least 64 threads in all (its first warp dispatches, "
                            f"the others answer); {blocks} blocks of {threads} threads have "
                            f"{blocks * threads}: ask for more threads")
        if blocks > limit:
            if self.cooperative:
                raise RingError(
                    f"a cooperative launch runs every block at once, and this device holds at "
                    f"most {limit} blocks of {threads} threads of {kernel} ({why}); the ring asks "
                    f"for {blocks}. Ask for fewer blocks or threads (blocks={limit}), as "
                    f"cudaLaunchCooperativeKernel would refuse the launch.")
            raise RingError(f"{blocks} blocks of {threads} threads cannot all be resident at "
                            f"once on this device: at most {limit} ({why}). A ring's blocks must "
                            "all run together; ask for fewer blocks or threads.")
        return threads, int(blocks)

    def _layout(self) -> dict[str, tuple[int, int]]:
        return offsets(self.capacity, self.request_dtype, self.response_dtype,
                       box=self._box is not None)

    @property
    def queue_bytes(self) -> int:
        """Bytes of mapped (page-locked) host memory the ring's queues take."""
        return self._layout()["total"][1]

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory the ring takes besides (a cooperative ring
        stages each round's messages and answers there)."""
        if self.cooperative:
            return self.capacity * (self.request_dtype.itemsize + self.response_dtype.itemsize) + 24
        return 16 + 8 * (self.capacity if self._box else 1)

    def _views(self, buffer):
        lay = self._layout()

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
        self._control_addr = host + lay["control"][0]
        self._head_addr = self._control_addr + 8
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
        """Threads that answer messages (all but the dispatching first warp;
        in a cooperative ring, every thread works on every round)."""
        return self.blocks * self.threads - (0 if self.cooperative else 32)

    @property
    def state(self) -> str:
        """``"running"``, ``"stopped"``, ``"faulted"`` or ``"hung"`` (then
        :attr:`lost` says how many messages went unanswered)."""
        if self.running:
            return "running"
        why = self._stopped_why or ""
        return "faulted" if why.startswith("its kernel faulted") else (
            "hung" if "hung" in why or "did not stop" in why else "stopped")

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
            self._buffer = self.backend.alloc_mapped(self.queue_bytes)
        addresses, boxes = self._views(self._buffer)
        self._buffer.host[:] = 0
        # the simulator's dispatcher sleeps when it has nothing to do: whoever publishes wakes it
        self._bell = self._control_addr if self.backend.simulated else None
        self._ring_bell = bell_ringer(self._native, self._bell, self._head_words)
        self._caller = self._box_caller()
        self._slots = self._native_slots()
        b = self.backend
        if self.cooperative:
            # [0] the round's last message, [1] and [2] its handler's start and end; the
            # round's messages and answers in device memory
            self._device_head = b.to_device(np.zeros(3, dtype=np.int64))
            self._stage = b.allocate((max(1, self.device_bytes - 24),), np.uint8)
            stage = b.device_pointer(self._stage)
            extra = (b.device_pointer(self._device_head), self.capacity, stage,
                     stage + self.capacity * self.request_dtype.itemsize)
        else:
            # [0] the head the dispatcher published, [1] the messages taken (the simulator's)
            self._device_head = b.to_device(np.zeros(2, dtype=np.int64))
            # per slot, the last call() the dispatcher answered through the box (device memory:
            # its worker reads it beside the payload, from L2, and passes the message over)
            self._call_marks = b.to_device(np.zeros(self.capacity if self._box else 1,
                                                    dtype=np.int64))
            extra = (b.device_pointer(self._device_head), self.capacity,
                     b.device_pointer(self._call_marks), *boxes)
        self._next_send = self._next_recv = 1
        # the head the host means to publish: the last message sent through a slot
        # (one sent through the call box is published by the dispatcher)
        self._head_due = 0
        self._box_seq, self._box_pending = 0, False
        self._stopped_why = None
        # [count, host send time ns] per send not yet collected, in order (the
        # messages of a stop without draining are forgotten with their numbers)
        self._sends = collections.deque()
        args = self._serve.convert_args((*addresses, *extra))
        self._launch = b.launch_persistent(self._serve.function, (self.blocks, 1, 1),
                                           (self.threads, 1, 1), args,
                                           cooperative=self.cooperative)
        self._finalizer = weakref.finalize(self, _shutdown, self._control, _Quiet(self._launch),
                                           self._ring_bell)
        self._progress_ns = time.perf_counter_ns()  # (a monotonic clock, as the stats' times)
        return self

    def __enter__(self) -> "Ring":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(drain=exc_type is None)

    # -- the comparison --------------------------------------------------------------------
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
        if self.cooperative:  # the round's handler phase, on the ring's grid
            self._batch(b.device_pointer(d_in), b.device_pointer(d_out), n, grid=self.blocks,
                        block=self.threads, cooperative=True)
        else:
            block = min(256, -(-n // 32) * 32)
            self._batch(b.device_pointer(d_in), b.device_pointer(d_out), n,
                        grid=-(-n // block), block=block)
        return b.to_host(d_out).view(self.response_dtype)

    # -- figures ---------------------------------------------------------------------------
    def reset_stats(self) -> None:
        """Forget the figures so far (:meth:`stats` starts again)."""
        self._single = bytearray()  # (round trip, handler) ns of call()s, int64 pairs
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
        single = np.frombuffer(bytes(self._single), dtype=np.int64).reshape(-1, 2) * 1e-9
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
        state = self.state
        if state != "running" and self._stopped_why:
            state += f" ({self._stopped_why})"
        kind = ", cooperative" + (", batch handler" if self.batch else "") if self.cooperative else ""
        lost = f", {self.lost} lost" if self.lost else ""
        return (f"<Ring {self.name!r} {state} on {self.backend.name}: {self.blocks} blocks x "
                f"{self.threads} threads{kind}, {self.capacity} slots "
                f"({format_bytes(self.queue_bytes)} of mapped host memory), depth {self.depth}"
                f"{lost}>")

    def _repr_html_(self) -> str:
        return self.stats()._repr_html_()


def ring(source, *, request, response, handler: str | None = None, start: bool = True,
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
    a multiple of 32; by default 8192, fewer where their queue would take more
    than 256 MiB), ``max_queue_bytes`` (a queue larger than this, 1 GiB by
    default, is refused), ``threads`` per block, ``blocks``, ``watchdog_s`` (a
    handler making no progress for this long is reported), ``name``.

    ``cooperative=True`` launches the kernel cooperatively
    (``cudaLaunchCooperativeKernel``: every block resident, or refused) and
    answers in grid-wide rounds, so that the handler may call
    ``cooperative_groups::this_grid().sync()``: every thread of the grid
    calls it on each message in turn (the answer kept is grid thread 0's).
    ``batch=True`` takes a batch handler instead, ``__device__ void
    handle_batch(const Request* in, Response* out, int count)`` (the default
    name then), called by every thread of the grid once per round with the
    round's messages; it is always cooperative. See
    :mod:`workbench.rings.cooperative` for the phases of a round.

    Use it as a context manager (``with wb.ring(...) as r: r.call(msg)``) or
    call ``stop()``; a ring whose object is gone is stopped by its finalizer.
    """
    r = Ring(source, request=request, response=response, handler=handler, **options)
    return r.start() if start else r
