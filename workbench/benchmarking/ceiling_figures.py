"""One device's measured ceilings (:class:`Ceilings`), as results quote them.

Measuring them and caching them on disk is :mod:`.ceilings`; benchmark
results hold the record made there to show their rates as percentages.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..present.tables import html_fields, pandas

#: Bump when the way ceilings are measured changes (old cache entries are ignored).
CEILINGS_SCHEMA = "workbench.ceilings/1"


@dataclass(eq=False)
class Ceilings:
    """Measured ceilings of one device.

    ``copy_gbps``: device-to-device copy, GB/s counting bytes read and
    written. ``fma_gflops``: float32 FMA-bound kernel, GFLOP/s (an FMA counts
    as 2). ``gemm_gflops``: best matrix multiply per dtype, GFLOP/s.
    """

    device: str
    backend: str
    simulated: bool
    copy_gbps: float
    fma_gflops: float | None
    gemm_gflops: dict[str, float] = field(default_factory=dict)
    measured: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def compute_gflops(self) -> float | None:
        """The float32 compute ceiling: the better of the FMA kernel and the
        float32 GEMM (what a hand-written float32 kernel can hope for)."""
        values = [v for v in (self.fma_gflops, self.gemm_gflops.get("float32")) if v]
        return max(values) if values else None

    @property
    def ridge_point(self) -> float | None:
        """Arithmetic intensity (FLOP/byte) where the roofline bends."""
        if not self.compute_gflops or not self.copy_gbps:
            return None
        return self.compute_gflops / self.copy_gbps

    def to_dict(self) -> dict[str, Any]:
        return {"schema": CEILINGS_SCHEMA, "device": self.device, "backend": self.backend,
                "simulated": self.simulated, "copy_gbps": self.copy_gbps,
                "fma_gflops": self.fma_gflops, "gemm_gflops": dict(self.gemm_gflops),
                "measured": self.measured, "versions": dict(self.versions),
                "details": dict(self.details)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Ceilings":
        return cls(device=d["device"], backend=d["backend"], simulated=bool(d["simulated"]),
                   copy_gbps=float(d["copy_gbps"]), fma_gflops=d.get("fma_gflops"),
                   gemm_gflops={k: float(v) for k, v in d.get("gemm_gflops", {}).items()},
                   measured=d.get("measured", ""), versions=dict(d.get("versions", {})),
                   details=dict(d.get("details", {})))

    def rows(self) -> list[tuple[str, float | None, str]]:
        out = [("copy bandwidth (read + write)", self.copy_gbps, "GB/s"),
               ("float32 FMA kernel", self.fma_gflops, "GFLOP/s")]
        out += [(f"GEMM {dtype}", v, "GFLOP/s") for dtype, v in self.gemm_gflops.items()]
        return out

    def to_pandas(self):
        """One row per ceiling: ``ceiling``, ``value`` and ``unit``."""
        return pandas().DataFrame(self.rows(), columns=["ceiling", "value", "unit"])

    def __str__(self) -> str:
        label = " [simulated: measured on the CPU]" if self.simulated else ""
        lines = [f"Ceilings of {self.device} ({self.backend}){label}"]
        for what, value, unit in self.rows():
            lines.append(f"  {what:<30} {'N/A' if value is None else f'{value:,.1f}'} {unit}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Ceilings {self.device}: copy {self.copy_gbps:.4g} GB/s, compute " \
               f"{self.compute_gflops or float('nan'):.4g} GFLOP/s{' (simulated)' if self.simulated else ''}>"

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def _repr_html_(self) -> str:
        fields = [(w, "N/A" if v is None else f"{v:,.1f}", u) for w, v, u in self.rows()]
        return html_fields(fields, title=f"Ceilings of {self.device}",
                           caption=f"{self.backend}, measured {self.measured}",
                           notes=["simulated: measured on the CPU"] if self.simulated else ())
