"""What an instrumented launch counted: plain data, the same whatever backend
made it (the simulator's instrumented build: :meth:`Backend.count_launches`).

A *site* is one place of the compiled kernel that accesses memory (a load, a
store, an atomic) or a basic block. Its *requests* are warp-level
instructions: the k-th execution of the site by each lane of a warp between
two barriers is one instruction, whose active lanes are the lanes that ran it
a k-th time. The profiling layer names these figures as Nsight Compute does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: Shared-memory addresses in samples are canonical (the same in every block):
#: a static ``__shared__`` variable's bytes from this base on, at their offset
#: in the kernel library's thread-local segment ...
SHARED_STATIC_BASE = 1 << 40
#: ... and dynamic shared memory (``extern __shared__``) from this one.
SHARED_DYNAMIC_BASE = 2 << 40
#: The function (a basic block's ``function``) that a kernel's simulator code
#: calls to say it stands in for a different GPU kernel: a plain loop for a
#: tensor-core one (the simulator's prelude defines it).
STAND_IN_FUNCTION = "wbsim_stand_in"


@dataclass(frozen=True)
class AccessSample:
    """One warp-level instruction of a site: the first one of the lowest block
    and warp. ``addresses[lane]`` is the lane's byte address, None where the
    lane was inactive (global: device addresses; shared: canonical addresses,
    see :data:`SHARED_STATIC_BASE`)."""

    block: tuple[int, int, int]
    warp: int
    size: int
    addresses: tuple


@dataclass(frozen=True)
class SharedVariable:
    """A static ``__shared__`` variable: its name, its canonical address (see
    :data:`SHARED_STATIC_BASE`) and its size in bytes."""

    name: str
    address: int
    size: int


@dataclass(frozen=True)
class SiteCount:
    """What one site's warp-level instructions did, summed over the launch.

    ``kind``: ``"load"``, ``"store"``, ``"atomic"`` or ``"block"`` (a basic
    block: divergence); ``space``: ``"global"``, ``"shared"`` or ``""``.
    ``line``: the line of the module's source (1-based) the site belongs to,
    through inlined functions (None outside the source: the launcher);
    ``function`` the function it is in. ``requests``: warp-level instructions;
    ``lanes``: their active lanes, summed; ``bytes``: what the lanes asked for;
    ``units``: global: distinct 32-byte sectors, shared: wavefronts, summed;
    ``ideal``: the fewest units those instructions could have taken (global:
    the sectors their distinct bytes fill; shared: one wavefront per phase of
    the warp); ``worst``: the most units of one instruction. A basic block's
    ``instructions`` estimate the GPU instructions it stands for (the CPU's,
    without moves between registers and the counting's own calls: the
    divergence estimate's weight) and ``flops32`` / ``flops64`` the
    floating-point operations one lane does in it (an FMA is two).
    ``uneven``: the requests made in runs of an innermost loop whose lanes' trip
    counts n = 4q + r make 4 max q + max r exceed max n: were the loop unrolled
    by 4, as nvcc unrolls a counted loop, a GPU would issue more there.
    """

    kind: str
    space: str
    line: int | None
    function: str
    site: int
    piece: int
    requests: int
    lanes: int
    bytes: int
    units: int
    ideal: int
    worst: int
    sample: AccessSample | None = None
    instructions: float = 1.0
    flops32: float = 0.0
    flops64: float = 0.0
    uneven: int = 0


@dataclass
class LaunchCounts:
    """Everything one instrumented launch counted.

    ``footprint_read`` / ``footprint_written`` / ``footprint``: distinct
    32-byte sectors of global memory read, written, and either, at least once.
    ``reuse_loads`` / ``reuse_stores``: how many times a sector was accessed
    again (by loads; by stores and atomics), by the distance in blocks since
    its last access: bucket 0 the same block, bucket k from 2^(k-1) to
    2^k - 1 blocks before (a cache model decides which came from L2).
    ``blocks_recorded`` of ``blocks`` were counted (all, unless sampled: then
    every figure is scaled by the profiling layer). ``cut``: warp buffers
    delivered early (very long loops between barriers: instructions there may
    be split). ``cpu_seconds``: how long the instrumented launch ran.
    ``module_path``: the path of the backend's module the kernel ran from
    (which of several modules with a kernel of that name).
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    sites: list[SiteCount]
    blocks: int
    blocks_recorded: int
    footprint_read: int
    footprint_written: int
    footprint: int
    cut: int = 0
    cpu_seconds: float = 0.0
    shared_variables: tuple[SharedVariable, ...] = ()
    reuse_loads: tuple = field(default=(), repr=False)
    reuse_stores: tuple = field(default=(), repr=False)
    module_path: str = ""

    @property
    def stand_in(self) -> bool:
        """True when the kernel's simulator code called ``wbsim_stand_in()``:
        what ran is not the code a GPU runs, and the counts are not a GPU's."""
        return any(s.function == STAND_IN_FUNCTION for s in self.sites)
