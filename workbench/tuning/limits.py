"""The device's limits, applied to a tune's configurations.

A configuration the device can never launch is left out, as Kernel Tuner
does, instead of being compiled and counted as a failure: before compiling,
from its launch options (threads per block, per dimension, dynamic shared
memory); after compiling, from the kernel's resources (the registers cap the
threads per block; static plus dynamic shared memory), or from a compiler
that refuses the static shared memory itself. Each becomes a row with status
``"restricted"`` and the reason, never a failure.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: The compiler's message for static shared memory beyond the device's limit:
#: "Entry function 'k' uses too much shared data (0x13880 bytes, 0xc000 max)".
_TOO_MUCH_SHARED = re.compile(r"too much shared data \((0x[0-9a-fA-F]+|\d+) bytes, "
                              r"(0x[0-9a-fA-F]+|\d+) max\)")


def _dims(block) -> tuple[int, int, int] | None:
    if block is None:
        return None
    dims = (block,) if isinstance(block, (int,)) or not hasattr(block, "__iter__") else tuple(block)
    try:
        dims = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        return None
    return (dims + (1, 1, 1))[:3] if len(dims) <= 3 else None


@dataclass(frozen=True)
class DeviceLimits:
    """What one block may use on a device (from its :class:`DeviceProperties`)."""

    max_threads: int
    max_block: tuple[int, int, int]
    max_shared: int           # bytes per block, static and dynamic together (opt-in limit)
    registers_per_block: int

    @classmethod
    def of(cls, props) -> "DeviceLimits":
        return cls(int(props.max_threads_per_block), tuple(int(d) for d in props.max_block_dims),
                   int(props.shared_memory_per_block_optin), int(props.registers_per_block))

    def before_compile(self, options: dict) -> str:
        """Why a launch with ``options`` (block, shared_mem) can never run on
        this device, or ""; a block the workbench picks (``n=`` without a
        block) is not judged here."""
        dims = _dims(options.get("block"))
        if dims is not None:
            threads = math.prod(dims)
            if threads > self.max_threads:
                return (f"device limit: {threads} threads per block (block {dims[:_rank(dims)]}); "
                        f"the device allows {self.max_threads}")
            for axis, d, m in zip("xyz", dims, self.max_block):
                if d > m:
                    return (f"device limit: block {axis} = {d}; the device allows {m} in {axis}")
        shared = int(options.get("shared_mem") or 0)
        if shared > self.max_shared:
            return (f"device limit: {shared} bytes of dynamic shared memory per block; the device "
                    f"allows {self.max_shared}")
        return ""

    def after_compile(self, resources, options: dict) -> str:
        """Why the compiled kernel (its ``resources``) cannot run with
        ``options``, or "" (also when the resources are unknown)."""
        if resources is None:
            return ""
        dims = _dims(options.get("block"))
        threads = math.prod(dims) if dims is not None else None
        cap = resources.max_threads_per_block
        if threads is not None and cap is not None and threads > cap:
            regs = (f" ({resources.registers} registers per thread, "
                    f"{self.registers_per_block} per block)" if resources.registers else "")
            return (f"device limit: {threads} threads per block; the compiled kernel can be "
                    f"launched with at most {cap}{regs}")
        static = resources.shared_bytes or 0
        shared = static + int(options.get("shared_mem") or 0)
        if shared > self.max_shared:
            return (f"device limit: {shared} bytes of shared memory per block ({static} static, "
                    f"{shared - static} dynamic); the device allows {self.max_shared}")
        return ""


def _rank(dims) -> int:
    return 3 if dims[2] > 1 else 2 if dims[1] > 1 else 1


def shared_memory_refused(log: str) -> str:
    """The restriction's reason when a compiler ``log`` refuses the kernel's
    static shared memory ("uses too much shared data"), else ""."""
    m = _TOO_MUCH_SHARED.search(log or "")
    if not m:
        return ""
    used, limit = (int(v, 0) for v in m.groups())
    return (f"device limit: {used} bytes of static shared memory per block; the compiler allows "
            f"{limit} (larger blocks of shared memory are dynamic: shared_mem=)")


__all__ = ["DeviceLimits", "shared_memory_refused"]
