"""The worker process that runs kernels, seen from the notebook side.

The worker is the executable built from ``native/*.cpp``, started with
``subprocess`` (never a fork of the notebook's kernel). It maps the device
arena at the notebook's address, loads kernel libraries and runs launches;
one request and one reply on a pipe per launch (:mod:`.protocol`). When it dies (a fault, a
time limit) the control page says why: :meth:`Worker.request` raises
:class:`WorkerDied` with that record, and the next request starts a new
worker. Device memory lives in the arena and survives.

Both sides poll their pipe for a short while before they block on it
(:data:`WORKER_SPIN_US`, :data:`REPLY_SPIN_US`): a process asleep on another
CPU takes tens of microseconds to wake (more in a virtual machine), longer
than an empty launch takes, so a series of launches finds the other side
awake and a round trip costs a few microseconds. With one CPU neither polls.
"""
from __future__ import annotations

import math
import os
import select
import signal
import struct
import subprocess
import tempfile
import threading
import time

from ...present.waiting import AFTER_S, Wait, shown_reporter
from .protocol import ABI_VERSION, FaultRecord, Op, pack_str

#: Seconds the notebook waits past the worker's own time limit before killing it.
GRACE_SECONDS = 5.0
#: Time limit of requests that run no kernel (load a library, read a global).
DEFAULT_TIMEOUT = 60.0
#: Microseconds the worker polls its request pipe after a reply before it
#: blocks (launches in a loop then never wait for it to wake up).
WORKER_SPIN_US = 100
#: Microseconds the notebook polls the reply pipe before it blocks (a short
#: kernel's reply then comes without a wake-up).
REPLY_SPIN_US = 50

#: A pause this long between two polls means another thread had the CPU.
_BUSY_CPU_S = 20e-6

_HEAD = struct.Struct("<II")    # request: op, payload length
_REPLY = struct.Struct("<iI")   # reply: status, payload length


class WorkerDied(Exception):
    """The worker ended during a request; ``record`` is its fault record
    (None when it left none), ``log`` the tail of its stderr."""

    def __init__(self, record: FaultRecord | None, returncode: int | None, log: str,
                 timed_out: bool = False):
        self.record = record
        self.returncode = returncode
        self.log = log
        self.timed_out = timed_out
        super().__init__(f"simulator worker ended (exit status {returncode})")


class WorkerGone(WorkerDied):
    """The worker had ended before the request was sent (killed while idle):
    nothing ran. A new worker starts on the next request; the caller sends
    its request again after loading its library into it."""


class WorkerError(Exception):
    """The worker refused a request (bad library, bad arguments...)."""


class Worker:
    """One worker process (started lazily, restarted after it dies)."""

    def __init__(self, arena, executable_factory, *, threads: int = 0, env: dict | None = None):
        self._arena = arena
        self._executable_factory = executable_factory
        self._threads = threads
        self._env = env or {}
        self._proc: subprocess.Popen | None = None
        self._rfd = self._wfd = -1
        self._poller = None                   # select.poll of the reply pipe
        self._returncode = None               # of a worker found ended while idle
        self._log_path: str | None = None
        # polling only helps when the two sides can run at once
        self._spin_s = REPLY_SPIN_US / 1e6 if len(os.sched_getaffinity(0)) > 1 else 0.0
        self.libraries: dict[str, int] = {}   # library path -> handle in this worker
        self.threads = 0                      # OS threads running blocks (from the first reply)
        #: Seconds the request had run when Ctrl-C during it ended this worker;
        #: None when it was not ended so (until a new one starts).
        self.interrupted_after_s: float | None = None
        #: One request and its reply at a time: the pipe is one channel, so
        #: requests from several Python threads take turns (held by callers
        #: that need several requests in a row, e.g. load then launch).
        self.lock = threading.RLock()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        self.interrupted_after_s = None
        exe = str(self._executable_factory())
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        fd, self._log_path = tempfile.mkstemp(prefix="wbsim-worker-", suffix=".log")
        env = dict(os.environ)
        env.update(self._env)
        arena = self._arena
        try:
            self._proc = subprocess.Popen(
                [exe, str(arena.fd), hex(arena.base), str(arena.size), str(req_r), str(rep_w),
                 str(self._threads), str(WORKER_SPIN_US if self._spin_s else 0)],
                pass_fds=(arena.fd, req_r, rep_w), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                env=env, start_new_session=True)
        except BaseException:
            os.close(req_w)
            os.close(rep_r)
            raise
        finally:
            os.close(fd)
            os.close(req_r)
            os.close(rep_w)
        self._wfd, self._rfd = req_w, rep_r
        self._poller = select.poll()
        self._poller.register(rep_r, select.POLLIN)
        self.libraries = {}
        status, payload = self._reply(30.0)
        if status != 0:
            self.stop()
            raise RuntimeError(f"the simulator's worker could not start: {payload.decode(errors='replace')}")
        version, self.threads = struct.unpack("<II", payload[:8])
        if version != ABI_VERSION:
            self.stop()
            raise RuntimeError(f"simulator worker speaks ABI {version}, expected {ABI_VERSION}")

    def stop(self) -> None:
        """End the worker (if running) and forget its libraries."""
        if self._proc is not None:
            if self._proc.poll() is None:
                try:
                    self._proc.kill()
                except ProcessLookupError:
                    pass
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for fd in (self._rfd, self._wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._rfd = self._wfd = -1
        self._poller = None
        self._proc = None
        self.libraries = {}
        if self._log_path and os.path.exists(self._log_path):
            try:
                os.unlink(self._log_path)
            except OSError:
                pass
        self._log_path = None

    # -- requests ----------------------------------------------------------------
    def request(self, op: Op, payload: bytes, timeout: float | None = None,
                what: str | None = None) -> bytes:
        """Send a request and return the reply's payload. ``what``: what the
        request does, in words (a text made once, not per request), for a wait
        long enough to be shown (:mod:`workbench.present.waiting`); None: never shown.

        Raises :class:`WorkerError` when the worker refuses it and
        :class:`WorkerDied` when the worker ends (it is restarted on the
        next request).
        """
        with self.lock:
            return self._request(op, payload, timeout, what)

    def _request(self, op: Op, payload: bytes, timeout: float | None,
                 what: str | None = None) -> bytes:
        # No liveness check here (a system call per launch): a worker that
        # ended while idle shows as a broken pipe. Loading a library then
        # simply goes to a new worker; other requests name libraries of the
        # old one, so the caller hears WorkerGone and sends them again.
        if self._proc is None:
            self.start()
        msg = _HEAD.pack(op, len(payload)) + payload
        started = time.monotonic()
        # From the first byte written to the last byte of the reply read, an
        # interruption (KeyboardInterrupt...) leaves the worker out of step with
        # us (a request half written, or a reply nobody reads): end it.
        try:
            try:
                _write_all(self._wfd, msg)
            except BrokenPipeError:
                self._gone()
                if op != Op.LOAD:
                    raise WorkerGone(None, self._returncode, "") from None
                self.start()
                try:
                    _write_all(self._wfd, msg)
                except OSError:
                    self._died(False)
            except OSError:
                self._died(False)
            status, data = self._read_reply(DEFAULT_TIMEOUT if timeout is None else timeout,
                                            what, started)
        except (WorkerDied, WorkerGone):
            raise
        except BaseException as exc:
            self._abandon(started if isinstance(exc, KeyboardInterrupt) else None)
            raise
        if status != 0:
            raise WorkerError(data.decode("utf-8", "replace"))
        return data

    def _reply(self, timeout: float) -> tuple[int, bytes]:
        """The next reply. Interrupted (KeyboardInterrupt...) with the reply
        still to come, this worker is out of step with us: end it."""
        started = time.monotonic()
        try:
            return self._read_reply(timeout, started=started)
        except WorkerDied:
            raise
        except BaseException as exc:
            self._abandon(started if isinstance(exc, KeyboardInterrupt) else None)
            raise

    def load(self, path: str) -> int:
        with self.lock:
            handle = self.libraries.get(path)
            if handle is None:
                data = self._request(Op.LOAD, pack_str(path), None)
                handle = struct.unpack("<I", data)[0]
                self.libraries[path] = handle
            return handle

    def _gone(self) -> None:
        """Forget a worker found ended between requests (its exit status in
        ``_returncode``)."""
        proc = self._proc
        self.stop()
        self._returncode = proc.returncode if proc is not None else None

    def _abandon(self, interrupted_since: float | None = None) -> None:
        """End the worker without waiting for its reply (SIGKILL) and forget
        any fault record it left; the next request starts a new one.
        ``interrupted_since``: ended by Ctrl-C during a request sent then
        (``time.monotonic()``; see :attr:`interrupted_after_s`)."""
        self.stop()
        if interrupted_since is not None:
            self.interrupted_after_s = time.monotonic() - interrupted_since
        self._arena.clear_fault()

    def _read_reply(self, timeout: float, what: str | None = None,
                    started: float | None = None) -> tuple[int, bytes]:
        """The reply to a request sent at ``started`` (``time.monotonic()``; None: now)."""
        if started is None:
            started = time.monotonic()
        deadline = started + timeout + GRACE_SECONDS
        if what is None:
            self._wait_readable(deadline)
        elif not self._wait_readable(deadline, started + AFTER_S):
            self._wait_shown(deadline, what, started)  # (a reply within AFTER_S: nothing to show)
        # Header and payload usually come in one read.
        buf = os.read(self._rfd, 1 << 16)
        while len(buf) < 8:
            if not buf:
                self._died(False)  # the pipe closed: the worker ended
            self._wait_readable(deadline)
            more = os.read(self._rfd, 1 << 16)
            if not more:
                self._died(False)
            buf += more
        status, length = _REPLY.unpack_from(buf)
        if len(buf) >= 8 + length:
            return status, buf[8:8 + length]
        # a large reply (a global read back): filled in place, not by growing bytes
        out = bytearray(length)
        view = memoryview(out)
        got = len(buf) - 8
        view[:got] = buf[8:]
        while got < length:
            self._wait_readable(deadline)
            n = os.readv(self._rfd, [view[got:]])
            if not n:
                self._died(False)
            got += n
        return status, bytes(out)

    def _wait_readable(self, deadline: float, until: float = math.inf) -> bool:
        """Return True when the reply pipe has data or has closed: poll it for up to
        :data:`REPLY_SPIN_US`, then block until ``deadline`` (past it the worker
        is stopped: :class:`WorkerDied` with ``timed_out``); False at ``until``
        if that comes first."""
        poll = self._poller.poll
        if poll(0):
            return True
        if self._spin_s:
            # As the worker polls (native/worker.cpp: wait_readable): the CPU
            # offered between polls, and no more polling once another thread took it.
            clock, give_way = time.perf_counter, os.sched_yield
            last = clock()
            end = last + self._spin_s
            while True:
                give_way()
                if poll(0):
                    return True
                now = clock()
                if now - last > _BUSY_CPU_S or now > end:
                    break
                last = now
        # (in slices: poll() takes at most 2**31 - 1 milliseconds)
        stop = min(deadline, until)
        while not poll(min(max(0.0, stop - time.monotonic()), 3600.0) * 1000.0):
            now = time.monotonic()
            if now >= deadline:
                self._died(True)
            if now >= until:
                return False
        return True

    def _wait_shown(self, deadline: float, what: str, started: float) -> None:
        """After a first :data:`AFTER_S` seconds with no reply, :meth:`_wait_readable`
        with the time waited told to a front end (:class:`~workbench.present.waiting.Wait`)
        until the reply comes, the worker dies or Ctrl-C."""
        if shown_reporter() is None:  # nobody to tell
            self._wait_readable(deadline)
            return
        wait = Wait(what, started)
        try:
            poll = self._poller.poll
            while True:
                now = time.monotonic()
                wait.tick(now)
                if poll(min(max(0.0, deadline - now), wait.block_s(now)) * 1000.0):
                    break
                if time.monotonic() >= deadline:
                    self._died(True)
        except KeyboardInterrupt:
            wait.end("interrupted")
            raise
        except BaseException:
            wait.end("failed")
            raise
        wait.end("done")

    def _died(self, timed_out: bool):
        proc = self._proc
        if timed_out and proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        returncode = proc.wait() if proc is not None else None
        log = self.log_tail()
        record = self._arena.fault_record()
        self.stop()
        raise WorkerDied(record, returncode, log, timed_out)

    def log_tail(self, limit: int = 20000) -> str:
        if not self._log_path or not os.path.exists(self._log_path):
            return ""
        with open(self._log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


def _write_all(fd: int, data: bytes) -> None:
    n = os.write(fd, data)  # all of it, unless it is larger than the pipe's buffer
    if n < len(data):
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(fd, view):]
