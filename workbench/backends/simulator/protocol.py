"""What the notebook process and the simulator's worker share: the requests
on the pipe, the fault kinds and the control page at the start of the arena.

Every name and value here mirrors one in ``prelude/wbsim_control.h`` (the
control page, the fault record, the request operations) or
``prelude/wbsim_abi.h`` (the ABI version); tests compile the headers and
compare them field by field.

Pipe protocol, little-endian: a request is ``u32 op, u32 length, payload``;
a reply is ``i32 status, u32 length, payload`` (status 0: done).
"""
from __future__ import annotations

import ctypes
import enum
import struct

#: ``WBSIM_ABI_VERSION``: the worker says it in its first reply.
ABI_VERSION = 9

CONTROL_MAGIC = 0x57425349        # WBSIM_CONTROL_MAGIC
PRINTF_OFFSET = 65536             # WBSIM_PRINTF_OFFSET
PRINTF_BYTES = 1 << 20            # WBSIM_PRINTF_BYTES
#: Bytes at the start of the arena for the control page and the printf buffer.
ARENA_RESERVED = 2 << 20          # WBSIM_ARENA_RESERVED


class Op(enum.IntEnum):
    """A request to the worker (``enum wbsim_op``, ``WBSIM_OP_*``)."""

    LOAD = 1            # u32 path length, path -> u32 library handle
    LAUNCH = 2          # see launch.launch_request -> u64 kernel nanoseconds
    SYMBOL_WRITE = 3    # u32 handle, name, u64 offset, u64 bytes, data -> nothing
    SYMBOL_READ = 4     # u32 handle, name, u64 offset, u64 bytes -> data
    INSTRUMENTED_LAUNCH = 5  # a launch of an instrumented library -> nanoseconds, counts


class FaultKind(enum.IntEnum):
    """Why the worker ended (``enum wbsim_fault_kind``, ``WBSIM_FAULT_*``)."""

    NONE = 0
    SIGNAL = 1
    TRAP = 2
    ASSERT = 3
    DEADLOCK = 4
    TIMEOUT = 5
    ASAN = 6
    ERROR = 7
    UNSUPPORTED = 8


class FaultRecord(ctypes.Structure):
    """``struct wbsim_fault``: what the worker writes before it ends.

    ``kind`` is written last, so a nonzero kind means the record is whole.
    """

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("signo", ctypes.c_int32),
        ("has_block", ctypes.c_int32),
        ("has_thread", ctypes.c_int32),
        ("block", ctypes.c_uint32 * 3),
        ("thread", ctypes.c_uint32 * 3),
        ("address", ctypes.c_uint64),
        ("line", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("kernel", ctypes.c_char * 128),
        ("message", ctypes.c_char * 1024),
    ]

    @property
    def fault_kind(self) -> FaultKind:
        try:
            return FaultKind(self.kind)
        except ValueError:
            return FaultKind.ERROR

    @property
    def block_index(self) -> tuple[int, int, int] | None:
        """The faulting block's index, or None when the fault was outside a kernel."""
        return tuple(self.block) if self.has_block else None

    @property
    def thread_index(self) -> tuple[int, int, int] | None:
        return tuple(self.thread) if self.has_thread else None

    @property
    def source_line(self) -> int | None:
        return self.line or None

    @property
    def text(self) -> str:
        """The message, decoded."""
        return self.message.decode("utf-8", "replace")

    def copy(self) -> "FaultRecord":
        """A snapshot that does not change when the control page does."""
        return FaultRecord.from_buffer_copy(bytes(self))


class ControlPage(ctypes.Structure):
    """``struct wbsim_control``, at the arena's first byte."""

    _fields_ = [
        ("magic", ctypes.c_uint64),
        ("printf_len", ctypes.c_uint64),        # bytes claimed (may exceed the capacity)
        ("printf_dropped", ctypes.c_uint64),
        ("printf_capacity", ctypes.c_uint64),
        ("printf_committed", ctypes.c_uint64),  # bytes of whole messages in the buffer
        ("reserved", ctypes.c_uint64 * 3),
        ("fault", FaultRecord),
    ]


def pack_str(s: str) -> bytes:
    """A string as the worker reads one: u32 length, UTF-8 bytes."""
    b = s.encode()
    return struct.pack("<I", len(b)) + b
