"""Kernel start and end times from CUPTI's activity API, for the launch
timing log: no event records on the launch path.

CUPTI writes a record for every kernel that runs (``CONCURRENT_KERNEL``
activity) into buffers it hands back when they are full or flushed. A launch
through the log then costs the launch alone plus CUPTI's own bookkeeping
(measured in C on an H100: about 0.7 µs on ``cuLaunchKernel``, where two
event records cost 2.5 µs), and the durations come from the GPU's own
timestamps.

Two collectors, the first that works here:

- **in C** (:mod:`.native_cupti`, ``native/cupti_records.c``), where CUPTI's
  headers and a C compiler are found: the buffers are recycled, zeroed off the
  launching thread, and their records kept as C structs until the log is read;
- **through cupti-python** (the ``[cupti]`` extra): every record becomes a
  Python object on CUPTI's thread, and every buffer is new, which CUPTI zeroes
  on the launching thread (the first launches after each read of the log pay
  for it: tens of milliseconds for a 64 MiB buffer).

The records name the kernel by its symbol (mangled for C++), carry a
correlation id that grows with every CUDA call, and come back in no
particular order across buffers; both collectors' ``take()`` sort what
arrived. Matching records to log entries is the log's business
(:mod:`workbench.runtime.timing`).

CUPTI is process-wide and admits one subscriber: under Nsight (which injects
its own CUPTI client through ``CUDA_INJECTION64_PATH``), or with
``WORKBENCH_TIMING=events``, the log keeps using events.
"""
from __future__ import annotations

import os
import threading

from . import native_cupti

#: One per process (CUPTI's callbacks are process-wide): made on first use.
_instance = None
_unavailable: str | None = None
_lock = threading.Lock()

#: Bytes of each buffer handed to CUPTI. Kernel records take a few hundred
#: bytes, and turning one into Python costs microseconds: a buffer that comes
#: back full in the middle of a loop of launches slows the loop down (CUPTI's
#: thread takes the GIL), so buffers are large enough for a few hundred
#: thousand launches and are normally read when the log is.
BUFFER_BYTES = 64 * 1024 * 1024
#: Bytes of each buffer the C collector hands to CUPTI (recycled: about
#: 40 000 kernel records each; CUPTI asks for another when one is full).
NATIVE_BUFFER_BYTES = 8 * 1024 * 1024


class _Collector:
    """What both collectors share: recording turned off and on (``_switch``)."""

    enabled = True

    def _switch(self, on: bool) -> None:
        raise NotImplementedError

    def pause(self) -> None:
        """Stop recording kernels launched from now on (benchmarks time their own)."""
        if self.enabled:
            self._switch(False)
            self.enabled = False

    def resume(self) -> None:
        if not self.enabled:
            self._switch(True)
            self.enabled = True


class NativeKernelActivity(_Collector):
    """CUPTI's kernel records, collected in C in the background, taken in launch order."""

    collector = "in C (native/cupti_records.c)"

    def __init__(self, built, library):
        built.start(str(library), NATIVE_BUFFER_BYTES)
        self._built = built

    def _switch(self, on: bool) -> None:
        (self._built.enable if on else self._built.disable)()

    def timestamp_ns(self) -> int | None:
        """CUPTI's clock now (``cuptiGetTimestamp``, the clock of its records' start and end)."""
        try:
            return int(self._built.timestamp())
        except Exception:
            return None

    def take(self, forced: bool = True) -> list[tuple[int, str, int, int]]:
        """Records of the kernels that have finished since the last call, as
        ``(correlation id, symbol, start ns, end ns)`` in launch order. Flushes
        CUPTI's buffers (``forced``: the one being filled too); does not wait
        for running kernels."""
        return self._built.take(forced)


class KernelActivity(_Collector):
    """CUPTI's kernel records, collected through cupti-python in the
    background, taken in launch order."""

    collector = "through cupti-python"

    def __init__(self, cupti):
        self._cupti = cupti
        self._kind = cupti.ActivityKind.CONCURRENT_KERNEL
        self._arrived: list[tuple[int, str, int, int]] = []
        self._arrived_lock = threading.Lock()
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        cupti.activity_enable(self._kind)

    def _switch(self, on: bool) -> None:
        (self._cupti.activity_enable if on else self._cupti.activity_disable)(self._kind)

    # CUPTI's threads call these two
    @staticmethod
    def _buffer_requested():
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities) -> None:
        kind = self._kind
        got = [(a.correlation_id, a.name, a.start, a.end) for a in activities if a.kind == kind]
        if got:
            with self._arrived_lock:
                self._arrived.extend(got)


    def timestamp_ns(self) -> int | None:
        """CUPTI's clock now (``cuptiGetTimestamp``, the clock of its records'
        start and end), or None where the binding lacks ``get_timestamp``."""
        clock = getattr(self._cupti, "get_timestamp", None)
        if clock is None:
            return None
        try:
            return int(clock())
        except Exception:
            return None

    def take(self, forced: bool = True) -> list[tuple[int, str, int, int]]:
        """As :meth:`NativeKernelActivity.take`."""
        self._cupti.activity_flush_all(1 if forced else 0)  # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
        with self._arrived_lock:
            got, self._arrived = self._arrived, []
        got.sort()
        return got


def kernel_activity() -> NativeKernelActivity | KernelActivity | None:
    """The process's collector of CUPTI's kernel records (a
    :class:`NativeKernelActivity` or a :class:`KernelActivity`), or None where
    CUPTI cannot time launches here (see :func:`unavailable_reason`)."""
    global _instance, _unavailable
    if _instance is not None or _unavailable is not None:
        return _instance
    with _lock:
        if _instance is None and _unavailable is None:
            _instance, _unavailable = _start()
    return _instance


def unavailable_reason() -> str | None:
    """Why launches are timed with events instead (None: CUPTI times them, or
    :func:`kernel_activity` was not asked yet)."""
    return _unavailable


def _start() -> tuple[NativeKernelActivity | KernelActivity | None, str | None]:
    choice = os.environ.get("WORKBENCH_TIMING", "").strip().lower()
    if choice == "events":
        return None, "WORKBENCH_TIMING=events"
    if os.environ.get("CUDA_INJECTION64_PATH"):
        return None, "a profiler (Nsight) holds CUPTI in this process"
    built, library = native_cupti.module()
    if built is not None:
        try:
            return NativeKernelActivity(built, library), None
        except Exception as exc:  # e.g. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
            native_cupti.failed(str(exc).splitlines()[0])
    native_failed = native_cupti.unavailable_reason()
    try:
        from cupti import cupti  # lazy: an optional package (the [cupti] extra)
    except Exception as exc:  # not installed, or no libcupti it can load
        return None, (f"CUPTI's C collector: {native_failed}; cupti-python is not usable "
                      + f"({type(exc).__name__}: {exc}".splitlines()[0] + ")")
    try:
        return KernelActivity(cupti), None
    except Exception as exc:  # e.g. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
        return None, f"CUPTI refused kernel activity ({exc})".splitlines()[0]
