"""The register file: how many warps of a kernel its registers let in.

Registers go to warps in units of 256 (every architecture from sm_50), and a
multiprocessor's register file is split evenly between its sub-partitions
(four from sm_70), each of which holds whole warps. These rules decide both
the largest block a kernel can be launched with (:func:`max_threads_per_block`,
what NVRTC's results report) and how many blocks share an SM
(:mod:`workbench.hardware.occupancy_rules`).
"""
from __future__ import annotations

WARP_SIZE = 32
#: Registers are allocated to a warp in multiples of this many.
ALLOCATION_UNIT = 256
#: Registers one block may use (every sm_50+ GPU).
REGISTERS_PER_BLOCK = 65536
#: Sub-partitions of a multiprocessor (every sm_70+ GPU).
SUB_PARTITIONS = 4
#: The largest block CUDA allows.
MAX_THREADS_PER_BLOCK = 1024


def round_up(x: int, unit: int) -> int:
    """``x`` rounded up to a multiple of ``unit``."""
    return -(-x // unit) * unit


def registers_per_warp(registers: int, warp_size: int = WARP_SIZE,
                       unit: int = ALLOCATION_UNIT) -> int:
    """Registers allocated to one warp of a kernel using ``registers`` per thread."""
    return round_up(registers * warp_size, unit)


def warps_in_register_file(per_warp: int, register_file: int,
                           sub_partitions: int = SUB_PARTITIONS) -> int:
    """The most warps of ``per_warp`` registers that a register file of
    ``register_file`` registers holds, each sub-partition holding whole warps
    of its equal share. ``per_warp`` must be positive."""
    return (register_file // sub_partitions) // per_warp * sub_partitions


def max_threads_per_block(registers: int | None, thread_limit: int | None = None) -> int | None:
    """The largest block the kernel can be launched with: 1024, less where
    ``__launch_bounds__``/``.maxntid`` (``thread_limit``) says so or where the
    block's registers would exceed 64 K. A block's warps are spread over the
    four sub-partitions (16 K registers each), so its warp count rounds up to
    a multiple of 4. ``None`` when ``registers`` is unknown."""
    if registers is None:
        return None
    limit = MAX_THREADS_PER_BLOCK if thread_limit is None else min(MAX_THREADS_PER_BLOCK, thread_limit)
    if registers > 0:
        warps = warps_in_register_file(registers_per_warp(registers), REGISTERS_PER_BLOCK)
        limit = min(limit, warps * WARP_SIZE)
    return limit
