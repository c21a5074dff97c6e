"""A kernel's time on a GPU, predicted from what the simulator counted.

A model, not a measurement (docs/profiling.md, "Predicted time"): the launch
takes as long as its slowest resource would need at its published peak,
plus a fixed launch cost. The resources:

* DRAM: the global memory the launch touches (its footprint, counted
  sector by sector) crosses DRAM once, at 90% of the peak bandwidth, and so
  does every access of a sector that comes back after more data than three
  quarters of L2 holds passed (its reuse distance in blocks, times the
  footprint per block; blocks resident together share their data); unless
  the whole footprint fits in three quarters of L2: then a launch in a loop
  (as ``wb.bench`` times it) finds it there and DRAM is idle;
* L2: every sector the warps' global requests touch, less the loads' L1
  hits (a sector the same block read before: its reuse distance is 0);
* L1 / shared memory: one wavefront a clock per SM, a global request's
  sectors four a clock;
* instruction issue: four warp instructions a clock per SM (the estimate of
  executed instructions, :data:`.counters.INSTRUCTIONS`);
* floating point: the FLOPs at the FP32 / FP64 peak;
* latency: each wave of resident warps (occupancy on the chosen device)
  takes as long as one warp's own path: its instructions, one a clock, and
  its waits for global loads (two in flight; an L1 hit waits L1's latency,
  the rest DRAM's, or L2's where the footprint fits there) and shared
  memory (four).

With fewer blocks than SMs only that many SMs work. The limiter is the
group of the slowest resource: memory (DRAM, L2, L1/shared), compute
(issue, floating point) or latency.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..backends.counting import LaunchCounts
from ..present.tables import html_fields
from . import counters
from .gpus import GpuFigures

#: The model's constants (docs/profiling.md).
LAUNCH_SECONDS = 2.0e-6          # a launch's fixed cost as CUPTI times it
DRAM_EFFICIENCY = 0.90           # of the peak, for streaming accesses
L2_RESIDENT = 0.75               # a footprint up to this much of L2 stays there between launches
SM_L2_BYTES_PER_CLOCK = 64       # one SM's share of the L2 / DRAM path
LOADS_IN_FLIGHT = 2              # global loads a warp overlaps
SHARED_LATENCY_CLOCKS = 30
SHARED_IN_FLIGHT = 4             # shared-memory accesses a warp overlaps
L2_LATENCY_FRACTION = 0.5        # an L2 hit's latency, of a DRAM access's
L1_LATENCY_CLOCKS = 35           # an L1 hit's

_GROUP = {"DRAM bandwidth": "memory", "L2 bandwidth": "memory", "L1/shared throughput": "memory",
          "instruction issue": "compute", "FP32/FP64 throughput": "compute", "latency": "latency"}


#: What a prediction of a stand-in says (LaunchCounts.stand_in).
STAND_IN_NOTE = ("the simulator ran a stand-in for this kernel (its code calls wbsim_stand_in(): "
                 "a plain loop, say, for a GPU's tensor-core kernel): these counts and this time "
                 "are the stand-in's, not the GPU kernel's; measure it on a GPU")


@dataclass(frozen=True)
class Prediction:
    """A launch's predicted time on one GPU (a model: see :mod:`.predict`).

    ``limits``: seconds each resource alone would need; ``bound`` names the
    largest, ``limiter`` its group (``"memory"``, ``"compute"`` or
    ``"latency"``). ``dram_bytes``, ``l2_bytes``, ``flops``, ``instructions``:
    the figures the model used; ``occupancy``: resident warps per SM over
    the device's maximum; ``waves``: of resident blocks.
    """

    device: str
    seconds: float
    bound: str
    limits: dict = field(default_factory=dict)
    dram_bytes: float = 0.0
    l2_bytes: float = 0.0
    flops: float = 0.0
    instructions: float = 0.0
    occupancy: float | None = None
    waves: float = 0.0
    notes: tuple = ()
    stand_in: bool = False   # the simulator ran a stand-in, not the GPU's kernel (see STAND_IN_NOTE)

    @property
    def limiter(self) -> str:
        return _GROUP.get(self.bound, "latency")

    @property
    def latency_bound(self) -> bool:
        """True when no resource is busy more than 60% of the predicted time."""
        busy = max((v for k, v in self.limits.items() if k != "latency"), default=0.0)
        return busy < 0.6 * self.seconds

    @property
    def intensity(self) -> float | None:
        """FLOPs per DRAM byte (per L2 byte when DRAM stays idle)."""
        moved = self.dram_bytes or self.l2_bytes
        return self.flops / moved if self.flops and moved else None

    @property
    def gflops(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds else None

    def __repr__(self) -> str:
        of = "; of the simulator's stand-in, not the GPU's kernel" if self.stand_in else ""
        return (f"<Prediction: {self.seconds * 1e6:.4g} µs on {self.device}, {self.limiter}-bound "
                f"({self.bound}); a model of the simulator's counts, not a measurement{of}>")

    def _repr_html_(self) -> str:
        fields = [("predicted time", f"{self.seconds * 1e6:.4g} µs"), ("limiter", self.limiter),
                  ("slowest resource", self.bound)]
        fields += [(f"{name} alone", f"{t * 1e6:.3g} µs") for name, t in self.limits.items()]
        fields += [("DRAM bytes", f"{self.dram_bytes:.4g}"), ("L2 bytes", f"{self.l2_bytes:.4g}"),
                   ("FLOPs", f"{self.flops:.4g}"), ("instructions (estimate)", f"{self.instructions:.4g}")]
        if self.occupancy is not None:
            fields.append(("occupancy", f"{self.occupancy:.0%}"))
        return html_fields(fields, title=f"Predicted on {self.device}",
                           notes=["a model of the simulator's counts, not a measurement",
                                  *self.notes])


def predict(counts: LaunchCounts, metrics: dict, gpu: GpuFigures,
            blocks_per_sm: int | None = None, max_warps_per_sm: int = 64) -> Prediction:
    """The predicted time of the launch ``counts`` on ``gpu``: ``metrics``
    from :func:`.counters.metrics`, ``blocks_per_sm`` the occupancy on that
    device (None: as many as threads allow), ``max_warps_per_sm`` its limit."""
    k = counters.scale(counts)
    threads = counts.block[0] * counts.block[1] * counts.block[2]
    warps_per_block = -(-threads // 32)
    blocks = max(1, counts.blocks)
    if not blocks_per_sm:
        blocks_per_sm = max(1, min(32, max_warps_per_sm * 32 // max(threads, 1)))
    active_sms = min(gpu.multiprocessors, blocks)
    clock = gpu.clock_ghz * 1e9
    sms_busy = active_sms / gpu.multiprocessors

    g = counters.GLOBAL
    sectors = sum(metrics.get(g.format(what="sectors", op=op), 0) for op in ("ld", "st", "atom", "red"))
    loads = metrics.get(g.format(what="requests", op="ld"), 0)
    shared_wavefronts = sum(metrics.get(counters.SHARED_WAVEFRONTS.format(op=op), 0) for op in ("ld", "st"))
    shared_requests = sum(metrics.get(counters.SHARED_INSTRUCTIONS.format(op=op), 0) for op in ("ld", "st"))
    instructions = metrics.get(counters.INSTRUCTIONS, 0)
    flops32 = sum(s.flops32 * s.lanes for s in counts.sites if s.kind == "block") * k
    flops64 = sum(s.flops64 * s.lanes for s in counts.sites if s.kind == "block") * k

    footprint = counts.footprint * 32 * k
    resident = footprint <= L2_RESIDENT * gpu.l2_bytes
    dram = 0.0
    if not resident:
        per_block = footprint / blocks  # the data one block brings, in the launch's order
        together = blocks_per_sm * gpu.multiprocessors
        dram = (counts.footprint_read + counts.footprint_written) * 32 * k
        for histogram in (counts.reuse_loads, counts.reuse_stores):
            dram += 32 * k * _misses(histogram, per_block, together, L2_RESIDENT * gpu.l2_bytes)
    # loads of sectors the same block read before (reuse distance 0): L1 hits
    load_sectors = metrics.get(g.format(what="sectors", op="ld"), 0)
    l1_hits = min(counts.reuse_loads[0] * k, load_sectors) if counts.reuse_loads else 0.0
    hit_fraction = l1_hits / load_sectors if load_sectors else 0.0
    l2_bytes = (sectors - l1_hits) * 32
    limits = {
        "DRAM bandwidth": dram / min(gpu.dram_gbps * 1e9 * DRAM_EFFICIENCY,
                                     active_sms * SM_L2_BYTES_PER_CLOCK * clock),
        "L2 bandwidth": l2_bytes / min(gpu.l2_gbps * 1e9, active_sms * SM_L2_BYTES_PER_CLOCK * clock),
        "L1/shared throughput": (shared_wavefronts + sectors / 4) / (active_sms * clock),
        "instruction issue": instructions / (gpu.issue_per_clock * active_sms * clock),
        "FP32/FP64 throughput": (flops32 / (gpu.fp32_gflops * 1e9 * sms_busy)
                                 + flops64 / (gpu.fp64_gflops * 1e9 * sms_busy)),
    }
    total_warps = blocks * warps_per_block
    waves = blocks / (blocks_per_sm * gpu.multiprocessors)
    latency = gpu.dram_latency_ns * gpu.clock_ghz * (L2_LATENCY_FRACTION if resident else 1.0)
    latency = (1 - hit_fraction) * latency + hit_fraction * L1_LATENCY_CLOCKS
    # one warp's path: its instructions issued one a clock, and its waits for
    # memory that nothing else of it can fill (other warps hide them: the
    # issue limit above covers that case)
    per_warp = ((loads / total_warps) / LOADS_IN_FLIGHT * latency
                + shared_requests / total_warps / SHARED_IN_FLIGHT * SHARED_LATENCY_CLOCKS
                + instructions / total_warps)
    limits["latency"] = math.ceil(waves) * per_warp / clock
    bound = max(limits, key=limits.get)
    notes = [STAND_IN_NOTE] if counts.stand_in else []
    if counts.blocks_recorded < counts.blocks:
        notes.append(f"counted {counts.blocks_recorded} of {counts.blocks} blocks, scaled up")
    if resident:
        notes.append("the footprint fits in L2: a launch in a loop finds its data there")
    occupancy = blocks_per_sm * warps_per_block / max_warps_per_sm
    return Prediction(gpu.key, LAUNCH_SECONDS + limits[bound], bound, limits, dram, l2_bytes,
                      flops32 + flops64, instructions, min(occupancy, 1.0) if occupancy else None,
                      waves, tuple(notes), counts.stand_in)


def _misses(histogram, per_block: float, together: int, capacity: float) -> float:
    """Re-accesses of sectors (a reuse-distance histogram in blocks) that
    miss L2: those further than the blocks resident together and than
    ``capacity`` bytes of data passing."""
    missed = 0.0
    for bucket, count in enumerate(histogram):
        if bucket == 0 or not count:
            continue
        distance = 2 ** (bucket - 1) * math.sqrt(2)  # the bucket's middle, in blocks
        if distance > together and distance * per_block > capacity:
            missed += count
    return missed
