"""A launch as the worker reads it: the configuration checked against the
virtual device, the kernel's arguments as bytes, and the request payload
(:attr:`.protocol.Op.LAUNCH`).

Payload, little-endian: ``u32 library handle``, kernel entry symbol (u32
length, bytes), ``u32 grid[3], u32 block[3], u64 shared bytes, u32 time limit
in ms, u32 argument count``, ``u32`` size of each argument, the arguments'
bytes, ``u64`` the end of the arena's allocated part (the worker makes what
lies beyond inaccessible, so wild writes fault), ``u32`` flags (1: a
cooperative launch; 2: a schedule to explore, whose ``u64`` seed follows); for a checked worker then ``u64 low, u64 high, u32 count`` and
``(u64 address, u64 bytes)`` per live block: the arena range to poison and
the blocks to leave readable, then ``u32 count`` and ``(i64 offset, u64
bytes)`` per redzone of the library's thread-locals to poison (memcheck's
build; offsets from its anchor variable).

The part up to the argument count depends only on the kernel, its library
handle and the configuration: :func:`request_prefix` makes it and the
backend keeps it per kernel. :class:`ArgumentLayout` packs a kernel's
arguments with one precomputed :class:`struct.Struct` where its parameters
are all pointers and plain numbers.
"""
from __future__ import annotations

import ctypes
import struct
from typing import Callable, Sequence

import numpy as np

from ...errors import KernelArgumentError, LaunchConfigError
from ..contract import DeviceProperties
from .arena import Arena
from .protocol import ARENA_RESERVED, pack_str


_U32 = struct.Struct("<I")
_CONFIG = struct.Struct("<3I3IQI")  # grid, block, shared bytes, time limit (ms)
_TAIL = struct.Struct("<QI")        # end of the accessible arena, flags
_NO_ARGUMENTS = _U32.pack(0)

#: NumPy dtype char -> struct code of the same C type (C long is 64 bits here).
_STRUCT_CODES = {"?": "?", "b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I",
                 "l": "q", "L": "Q", "q": "q", "Q": "Q", "e": "e", "f": "f", "d": "d"}

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def address(a: np.ndarray) -> int:
    """The address of ``a``'s first byte (through the buffer protocol, five
    times cheaper than ``__array_interface__``, which builds a dict)."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError, BufferError):  # read-only, empty or strided
        return a.__array_interface__["data"][0]


def dims(value, what: str) -> tuple[int, int, int]:
    """``value`` (an int or 1 to 3 ints) as three dimensions."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    result = tuple(int(v) for v in value)
    if not 1 <= len(result) <= 3:
        raise LaunchConfigError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    return result + (1,) * (3 - len(result))


def check_config(p: DeviceProperties, grid, block, shared_mem: int) -> None:
    """Raise :class:`LaunchConfigError` where a GPU like ``p`` would refuse the launch."""
    threads = block[0] * block[1] * block[2]
    if min(grid) < 1 or min(block) < 1:
        raise LaunchConfigError(f"grid {grid} and block {block} need every dimension >= 1")
    if threads > p.max_threads_per_block:
        raise LaunchConfigError(f"block {block} has {threads} threads; at most "
                                f"{p.max_threads_per_block} are allowed")
    for d, (b, m) in enumerate(zip(block, p.max_block_dims)):
        if b > m:
            raise LaunchConfigError(f"block dimension {'xyz'[d]} is {b}; at most {m}")
    for d, (g, m) in enumerate(zip(grid, p.max_grid_dims)):
        if g > m:
            raise LaunchConfigError(f"grid dimension {'xyz'[d]} is {g}; at most {m}")
    if shared_mem < 0 or shared_mem > p.shared_memory_per_block_optin:
        raise LaunchConfigError(f"{shared_mem} bytes of dynamic shared memory requested; at "
                                f"most {p.shared_memory_per_block_optin} per block")


def argument_bytes(a, index: int, is_device_array: Callable[[object], bool]) -> bytes:
    """Kernel argument ``index`` as the kernel receives it: a device array's
    address, a scalar's or a structured value's bytes; None is a null pointer."""
    if a is None:
        return bytes(8)
    if isinstance(a, np.ndarray):
        if a.ndim == 0 and not is_device_array(a):
            return a.tobytes()
        if not is_device_array(a):
            raise KernelArgumentError(
                f"argument {index + 1} is a host NumPy array; kernels need device arrays: "
                "copy it with wb.to_device(x) or create it with wb.xp")
        return struct.pack("<Q", address(a))
    if isinstance(a, np.generic):
        return a.tobytes()
    if isinstance(a, (bytes, bytearray)):
        return bytes(a)
    if hasattr(a, "tobytes"):
        return a.tobytes()
    raise KernelArgumentError(
        f"argument {index + 1} ({type(a).__name__}) is neither a device array nor a NumPy "
        "scalar of the kernel parameter's type")


def request_prefix(handle: int, symbol: str, grid, block, shared_mem: int,
                   timeout_s: float) -> bytes:
    """The payload up to the argument count (library, entry point,
    configuration, time limit): the same for every launch of one kernel
    with one configuration."""
    return (_U32.pack(handle) + pack_str(symbol)
            + _CONFIG.pack(*grid, *block, int(shared_mem), max(1, int(timeout_s * 1000))))


def arguments_part(blobs: Sequence[bytes]) -> bytes:
    """The argument count, sizes and bytes of a payload."""
    if not blobs:
        return _NO_ARGUMENTS
    return b"".join((struct.pack(f"<{len(blobs) + 1}I", len(blobs), *map(len, blobs)), *blobs))


def request_tail(arena: Arena, checked: bool = False, cooperative: bool = False,
                 whole_arena: bool = False, seed: int | None = None, redzones=()) -> bytes:
    """The payload after the arguments: the end of the arena's accessible part,
    the flags (then the seed of a schedule to explore: ``native/grid.cpp``)
    and, for a checked worker, the ranges to poison and to leave, then the
    library's ``redzones`` to poison in each OS thread (memcheck's build:
    ``(offset from its anchor variable, bytes)``)."""
    flags = int(bool(cooperative)) | (2 if seed is not None else 0)
    tail = _TAIL.pack(arena.base + (arena.size if whole_arena else arena.high_water), flags)
    if seed is not None:
        tail += struct.pack("<Q", int(seed) & 0xFFFFFFFFFFFFFFFF or 1)
    if not checked:
        return tail
    live = arena.live_blocks()
    return b"".join((tail, struct.pack("<QQI", arena.base + ARENA_RESERVED,
                                       arena.base + arena.high_water, len(live)),
                     *(struct.pack("<QQ", a, n) for a, n in live),
                     struct.pack("<I", len(redzones)),
                     *(struct.pack("<qQ", offset, n) for offset, n in redzones)))


def launch_request(handle: int, symbol: str, grid, block, shared_mem: int, timeout_s: float,
                   blobs: Sequence[bytes], arena: Arena, checked: bool = False,
                   cooperative: bool = False, whole_arena: bool = False) -> bytes:
    """The payload of a launch request (see the module docstring). The arena
    past its allocated part is inaccessible during the launch, except with
    ``whole_arena`` (a persistent kernel, which meets arrays allocated later)."""
    return (request_prefix(handle, symbol, grid, block, shared_mem, timeout_s)
            + arguments_part(blobs) + request_tail(arena, checked, cooperative, whole_arena))


def number_params(params) -> tuple:
    """``(index, NumPy scalar type)`` of each parameter that is a plain number."""
    return tuple((i, p.dtype.type) for i, p in enumerate(params)
                 if not p.is_pointer and p.dtype is not None and p.dtype.kind in "biuf")


def exact_numbers(args, scalars) -> tuple:
    """``args`` with the Python ints and floats at ``scalars``' indices made
    NumPy scalars of their types (a caller that checked their ranges may pass
    them as they are: see ``Backend.make_launcher``)."""
    values = list(args)
    for i, scalar_type in scalars:
        if i < len(values) and type(values[i]) in (int, float):
            values[i] = scalar_type(values[i])
    return tuple(values)


class ArgumentLayout:
    """The arguments part of a kernel's payload, packed by one precomputed
    ``struct.Struct`` (count, sizes, then each value: a pointer's address or
    a number in its parameter's C type). :meth:`for_params` gives None when a
    parameter is neither (a struct or vector by value): those kernels take
    :func:`argument_bytes`."""

    __slots__ = ("pack", "pointers", "count", "scalars")

    def __init__(self, codes: Sequence[str], sizes: Sequence[int], pointers: Sequence[int],
                 scalars: Sequence[tuple] = ()):
        packer = struct.Struct("<" + "I" * (len(codes) + 1) + "".join(codes))
        head = (len(codes), *sizes)
        self.pack = lambda values: packer.pack(*head, *values)
        self.pointers = tuple(pointers)
        self.count = len(codes)
        self.scalars = tuple(scalars)  # (index, NumPy scalar type) of each number parameter

    def exact(self, args) -> tuple:
        """``args`` with Python ints and floats made NumPy scalars of their
        parameters' types (as :func:`argument_bytes` takes them)."""
        return exact_numbers(args, self.scalars)

    @classmethod
    def for_params(cls, params) -> "ArgumentLayout | None":
        codes, sizes, pointers = [], [], []
        for i, p in enumerate(params):
            if p.is_pointer:
                codes.append("Q")
                sizes.append(8)
                pointers.append(i)
                continue
            dt = p.dtype
            code = _STRUCT_CODES.get(dt.char) if dt is not None else None
            if code is None or struct.calcsize("<" + code) != dt.itemsize:
                return None
            codes.append(code)
            sizes.append(dt.itemsize)
        return cls(codes, sizes, pointers, number_params(params))
