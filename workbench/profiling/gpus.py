"""Published figures of the GPUs the simulator predicts times for.

Each row gives what the prediction model (:mod:`.predict`) needs, from the
vendor's data sheets and architecture white papers (the ``source`` of each
row). NVIDIA does not publish L2 bandwidth: those figures are estimates
from public microbenchmarks and say so in ``estimated``.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..errors import ArgumentValueError

MIB = 1 << 20


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's peak figures. Rates are per second at the boost clock."""

    key: str                    # the name users pass: "H100", "RTX 4090"...
    name: str
    multiprocessors: int
    clock_ghz: float            # boost clock
    dram_gbps: float            # peak DRAM bandwidth, GB/s
    l2_bytes: int
    l2_gbps: float              # L2 bandwidth, GB/s (estimated)
    fp32_lanes: int             # FP32 FMA lanes per SM (a lane does 2 FLOPs a clock)
    fp64_lanes: int
    dram_latency_ns: float      # a load that misses L2, unloaded
    source: str
    estimated: tuple[str, ...] = ("l2_gbps", "dram_latency_ns")
    shared_bytes_per_clock: int = 128   # per SM: 32 banks of 4 bytes (one wavefront)
    issue_per_clock: int = 4            # warp instructions per SM (4 schedulers)

    @property
    def fp32_gflops(self) -> float:
        return 2 * self.fp32_lanes * self.multiprocessors * self.clock_ghz

    @property
    def fp64_gflops(self) -> float:
        return 2 * self.fp64_lanes * self.multiprocessors * self.clock_ghz


FIGURES = {g.key: g for g in (
    GpuFigures("H100", "NVIDIA H100 SXM5 80GB", 132, 1.98, 3352, 50 * MIB, 7000, 128, 64, 550,
               "NVIDIA H100 Tensor Core GPU Architecture white paper (2022) and H100 data sheet"),
    GpuFigures("H200", "NVIDIA H200 SXM 141GB", 132, 1.98, 4800, 60 * MIB, 7000, 128, 64, 550,
               "NVIDIA H200 Tensor Core GPU data sheet (2024); L2 size as the device reports it"),
    GpuFigures("A100", "NVIDIA A100 SXM4 80GB", 108, 1.41, 2039, 40 * MIB, 5100, 64, 32, 600,
               "NVIDIA A100 Tensor Core GPU Architecture white paper (2020) and A100 data sheet"),
    GpuFigures("L4", "NVIDIA L4", 58, 2.04, 300, 48 * MIB, 1500, 128, 2, 500,
               "NVIDIA L4 Tensor Core GPU data sheet (2023); NVIDIA Ada GPU Architecture white paper"),
    GpuFigures("RTX 4090", "NVIDIA GeForce RTX 4090", 128, 2.52, 1008, 72 * MIB, 5000, 128, 2, 500,
               "NVIDIA Ada GPU Architecture white paper (2022)"),
    GpuFigures("T4", "NVIDIA Tesla T4", 40, 1.59, 320, 4 * MIB, 1300, 64, 2, 550,
               "NVIDIA T4 data sheet (2019); NVIDIA Turing GPU Architecture white paper"),
)}


def gpu_figures(device) -> GpuFigures:
    """The figures of ``device``: a key of :data:`FIGURES` (``"H100"``,
    ``"h200"``, ``"NVIDIA GeForce RTX 4090"``...) or a :class:`GpuFigures`."""
    if isinstance(device, GpuFigures):
        return device
    norm = str(device).upper().replace("NVIDIA", "").replace("GEFORCE", "").replace("TESLA", "")
    norm = " ".join(norm.replace("-", " ").split())
    for key in sorted(FIGURES, key=len, reverse=True):
        if norm == key or norm.startswith(key + " ") or norm.startswith(key):
            return FIGURES[key]
    raise ArgumentValueError(f"no published figures for device {device!r}; choose one of "
                             f"{', '.join(FIGURES)} (or pass a GpuFigures)")
