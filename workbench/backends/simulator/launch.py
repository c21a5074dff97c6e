"""A launch as the worker reads it: the configuration checked against the
virtual device, the kernel's arguments as bytes, and the request payload
(:attr:`.protocol.Op.LAUNCH`).

Payload, little-endian: ``u32 library handle``, kernel entry symbol (u32
length, bytes), ``u32 grid[3], u32 block[3], u64 shared bytes, u32 time limit
in ms, u32 argument count``, ``u32`` size of each argument, the arguments'
bytes, ``u64`` the end of the arena's allocated part (the worker makes what
lies beyond inaccessible, so wild writes fault), ``u32`` flags (1: a
cooperative launch); for a checked worker then ``u64 low, u64 high, u32 count`` and
``(u64 address, u64 bytes)`` per live block: the arena range to poison and
the blocks to leave readable.
"""
from __future__ import annotations

import struct
from typing import Callable, Sequence

import numpy as np

from ...errors import KernelArgumentError, LaunchConfigError
from ..base import DeviceProperties
from .arena import Arena
from .protocol import ARENA_RESERVED, pack_str


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
        return struct.pack("<Q", a.__array_interface__["data"][0])
    if isinstance(a, np.generic):
        return a.tobytes()
    if isinstance(a, (bytes, bytearray)):
        return bytes(a)
    if hasattr(a, "tobytes"):
        return a.tobytes()
    raise KernelArgumentError(
        f"argument {index + 1} ({type(a).__name__}) is neither a device array nor a NumPy "
        "scalar of the kernel parameter's type")


def launch_request(handle: int, symbol: str, grid, block, shared_mem: int, timeout_s: float,
                   blobs: Sequence[bytes], arena: Arena, checked: bool = False,
                   cooperative: bool = False, whole_arena: bool = False) -> bytes:
    """The payload of a launch request (see the module docstring). The arena
    past its allocated part is inaccessible during the launch, except with
    ``whole_arena`` (a persistent kernel, which meets arrays allocated later)."""
    timeout_ms = max(1, int(timeout_s * 1000))
    payload = [struct.pack("<I", handle), pack_str(symbol),
               struct.pack("<3I3IQII", *grid, *block, int(shared_mem), timeout_ms, len(blobs)),
               struct.pack(f"<{len(blobs)}I", *map(len, blobs)), *blobs,
               struct.pack("<QI", arena.base + (arena.size if whole_arena else arena.high_water),
                           int(bool(cooperative)))]
    if checked:
        checked_arena = arena
        arena = checked_arena
        live = arena.live_blocks()
        payload.append(struct.pack("<QQI", arena.base + ARENA_RESERVED,
                                   arena.base + arena.high_water, len(live)))
        payload.append(b"".join(struct.pack("<QQ", a, n) for a, n in live))
    return b"".join(payload)
