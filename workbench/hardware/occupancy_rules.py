"""CUDA's occupancy rules: how many blocks of a kernel fit on one SM.

A pure calculation on numbers, following what the driver does in
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (and what NVIDIA documents in
``cuda_occupancy.h``). Four limits, the smallest binds:

* **warps**: ``max threads per SM / warp size`` warps, blocks take whole warps;
* **blocks**: the SM's maximum number of resident blocks;
* **registers**: registers go to warps in units of 256, each of the SM's four
  sub-partitions holds whole warps; a block whose registers exceed the
  per-block limit cannot launch;
* **shared memory**: static + dynamic shared memory plus the driver's
  per-block reserve (1 KiB from compute capability 8.0), rounded up to the
  allocation unit (128 B from 8.0, 256 B before). The SM offers its whole
  shared memory unless the kernel asked for a smaller L1/shared carve-out, in
  which case the preference is rounded up to a size the architecture
  supports.

Nothing here touches a device; :mod:`workbench.hardware.occupancy` builds the
inputs from a kernel and a device and presents the result.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..backends.contract import DeviceProperties
from ..backends.registers import ALLOCATION_UNIT, registers_per_warp, round_up, warps_in_register_file

KIB = 1024

#: Configurable shared-memory sizes per SM (the L1/shared carve-outs), in KiB,
#: by compute capability. Sizes a carve-out preference is rounded up to.
CARVEOUTS_KIB: dict[tuple[int, int], tuple[int, ...]] = {
    (7, 0): (0, 8, 16, 32, 64, 96),
    (7, 2): (0, 8, 16, 32, 64, 96),
    (7, 5): (32, 64),
    (8, 0): (0, 8, 16, 32, 64, 100, 132, 164),
    (8, 7): (0, 8, 16, 32, 64, 100, 132, 164),
    (8, 6): (0, 8, 16, 32, 64, 100),
    (8, 9): (0, 8, 16, 32, 64, 100),
    (9, 0): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (10, 0): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (10, 3): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (12, 0): (0, 8, 16, 32, 64, 100),
}
_ALL_CARVEOUTS_KIB = (0, 8, 16, 32, 64, 96, 100, 132, 164, 196, 228)

#: Names of the limits, in the order they are reported.
WARPS, REGISTERS, SHARED, BLOCKS = "warps", "registers", "shared memory", "blocks"
LIMIT_NAMES = (WARPS, REGISTERS, SHARED, BLOCKS)
#: Pseudo-limits: the launch itself is impossible.
BLOCK_SIZE = "block size"            # block larger than the kernel allows
DYNAMIC_SHARED = "dynamic shared memory"  # more than the kernel's max dynamic size


@dataclass(frozen=True)
class SMModel:
    """The per-SM resources of one device that occupancy depends on."""

    compute_capability: tuple[int, int]
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_unit: int                 # registers are allocated per warp in these units
    sub_partitions: int
    shared_per_sm: int
    shared_per_block: int              # without opting in
    shared_per_block_optin: int
    shared_reserved_per_block: int     # taken by the driver from every block
    shared_unit: int                   # allocation granularity
    carveouts: tuple[int, ...]         # bytes

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @classmethod
    def from_properties(cls, p: DeviceProperties) -> "SMModel":
        """The model of device ``p`` (real or simulated)."""
        cc = tuple(p.compute_capability)
        major = cc[0]
        extra = p.extra or {}
        reserved = extra.get("reservedSharedMemPerBlock")
        if reserved is None:
            reserved = KIB if major >= 8 else 0
        kib = CARVEOUTS_KIB.get(cc)
        if kib is None:  # an architecture newer than this table: what fits
            limit = p.shared_memory_per_multiprocessor
            kib = tuple(k for k in _ALL_CARVEOUTS_KIB if k * KIB < limit) + (limit // KIB,)
        return cls(
            compute_capability=cc,
            warp_size=p.warp_size,
            max_threads_per_block=p.max_threads_per_block,
            max_threads_per_sm=p.max_threads_per_multiprocessor,
            max_blocks_per_sm=p.max_blocks_per_multiprocessor,
            registers_per_sm=p.registers_per_multiprocessor,
            registers_per_block=p.registers_per_block,
            max_registers_per_thread=256 if major >= 7 else 255,
            register_unit=ALLOCATION_UNIT,
            sub_partitions=2 if cc == (6, 0) else 4,
            shared_per_sm=p.shared_memory_per_multiprocessor,
            shared_per_block=p.shared_memory_per_block,
            shared_per_block_optin=p.shared_memory_per_block_optin,
            shared_reserved_per_block=int(reserved),
            shared_unit=128 if major >= 8 else 256,
            carveouts=tuple(k * KIB for k in kib),
        )

    def align_carveout(self, size: int) -> int:
        """The smallest configurable shared-memory size per SM holding ``size``
        bytes (the largest one when nothing holds it)."""
        for c in self.carveouts:
            if size <= c:
                return c
        return self.carveouts[-1]


@dataclass(frozen=True)
class KernelUsage:
    """What one kernel needs, as the occupancy rules see it.

    ``registers`` per thread (``None``: unknown, no register limit applied);
    ``static_shared`` bytes per block; ``max_threads_per_block`` from the
    compiled kernel (launch bounds, registers); ``max_dynamic_shared`` is the
    kernel's ``cudaFuncAttributeMaxDynamicSharedMemorySize`` (``None``: the
    default, the per-block limit less the static size); ``carveout`` the
    kernel's preferred shared-memory carve-out in percent (``None``: default).
    """

    registers: int | None = None
    static_shared: int = 0
    max_threads_per_block: int | None = None
    max_dynamic_shared: int | None = None
    carveout: int | None = None


@dataclass(frozen=True)
class BlockLimits:
    """Blocks per SM allowed by each limit, and the result."""

    block_size: int
    dynamic_shared: int
    warps_per_block: int
    by_limit: dict          # limit name -> blocks per SM (None: not applied)
    active_blocks: int
    binding: tuple[str, ...]
    registers_per_block: int | None   # allocated
    shared_per_block: int             # allocated, reserve included
    shared_per_sm: int                # the shared memory the SM is configured with


def registers_limit(sm: SMModel, registers: int, warps_per_block: int) -> tuple[int, int]:
    """Blocks per SM allowed by registers, and registers allocated per block."""
    per_warp = registers_per_warp(registers, sm.warp_size, sm.register_unit)
    per_block = per_warp * warps_per_block
    if per_warp == 0:
        return 1 << 30, 0
    # The hardware check assumes every sub-partition receives warps at once: the block's
    # warps must fit the per-block register limit spread evenly over the sub-partitions.
    if (warps_per_block > warps_in_register_file(per_warp, sm.registers_per_block, sm.sub_partitions)
            or registers > sm.max_registers_per_thread):
        return 0, per_block
    return warps_in_register_file(per_warp, sm.registers_per_sm, sm.sub_partitions) // warps_per_block, per_block


def shared_limit(sm: SMModel, usage: KernelUsage, dynamic_shared: int) -> tuple[int, int, int, bool]:
    """Blocks per SM allowed by shared memory, shared bytes allocated per
    block, the SM's shared-memory size used, and whether the dynamic size
    exceeds the kernel's maximum."""
    static = usage.static_shared + sm.shared_reserved_per_block
    allocated = round_up(static + dynamic_shared, sm.shared_unit)
    max_dynamic = usage.max_dynamic_shared
    if max_dynamic is None:
        max_dynamic = max(sm.shared_per_block - usage.static_shared, 0)
    dynamic_too_large = dynamic_shared > max_dynamic
    # The per-block limit: opting in raises it to the opt-in size.
    per_block_limit = (sm.shared_per_block_optin if static + max_dynamic > sm.shared_per_block
                       else sm.shared_per_block)
    if sm.compute_capability[0] >= 8:
        per_block_limit += sm.shared_reserved_per_block
    if sm.compute_capability[0] >= 7:
        if usage.carveout is None or usage.carveout < 0:
            preferred = sm.align_carveout(sm.shared_per_sm)
        else:
            preferred = sm.align_carveout(usage.carveout * sm.shared_per_sm // 100)
        per_sm = preferred if preferred >= allocated else sm.align_carveout(allocated)
    else:
        per_sm = sm.shared_per_sm
    if dynamic_too_large or allocated > per_block_limit:
        return 0, allocated, per_sm, dynamic_too_large
    return (per_sm // allocated if allocated else 1 << 30), allocated, per_sm, False


def blocks_per_sm(sm: SMModel, usage: KernelUsage, block_size: int,
                  dynamic_shared: int = 0) -> BlockLimits:
    """Apply every rule for one block size and dynamic shared-memory size."""
    warps = -(-block_size // sm.warp_size)
    by_limit: dict = {WARPS: sm.max_warps_per_sm // warps, BLOCKS: sm.max_blocks_per_sm}
    reg_alloc = None
    if usage.registers is not None:
        by_limit[REGISTERS], reg_alloc = registers_limit(sm, usage.registers, warps)
    else:
        by_limit[REGISTERS] = None
    by_limit[SHARED], shared_alloc, shared_sm, dyn_too_large = shared_limit(sm, usage, dynamic_shared)
    by_limit = {name: by_limit[name] for name in LIMIT_NAMES}

    kernel_max = usage.max_threads_per_block or sm.max_threads_per_block
    if block_size > min(kernel_max, sm.max_threads_per_block):
        return BlockLimits(block_size, dynamic_shared, warps, by_limit, 0, (BLOCK_SIZE,),
                           reg_alloc, shared_alloc, shared_sm)
    applied = {k: v for k, v in by_limit.items() if v is not None}
    active = min(applied.values())
    binding = tuple(k for k, v in applied.items() if v == active)
    if dyn_too_large:
        binding = (DYNAMIC_SHARED,)
    return BlockLimits(block_size, dynamic_shared, warps, by_limit, active, binding,
                       reg_alloc, shared_alloc, shared_sm)
