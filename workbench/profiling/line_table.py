"""The per-line table of a launch counted on the simulator: its source lines,
worst first, with what their warps did and what to change."""
from __future__ import annotations

from ..present.tables import html_table, pandas

_COLUMNS = ["line", "source", "access", "requests", "active_lanes", "per_request", "ideal_per_request",
            "advice"]
_HEADER = ["line", "source", "access", "requests", "active lanes", "sectors or wavefronts / request",
           "ideal", "what to change"]


def _per_request(row) -> str:
    if row.what == "branch":
        return ""
    unit = "wavefronts" if row.what.startswith("shared") else "sectors"
    return f"{row.units_per_request:.2f} {unit}" if row.units_per_request else ""


class LineTable:
    """Rows of :class:`.counters.LineRow`: a text and HTML table, ``to_pandas()``.
    Global rows give sectors per request, shared rows wavefronts per request
    (their ratio to the ideal is the bank-conflict degree), every row its
    active lanes per warp-level instruction."""

    def __init__(self, rows, kernel: str = ""):
        self.rows = list(rows)
        self.kernel = kernel

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def _cells(self, r) -> list:
        return [r.line, r.text, r.what, round(r.requests), round(r.lanes, 1), _per_request(r),
                round(r.ideal_per_request, 2) if r.what != "branch" else "", r.advice]

    def to_pandas(self):
        """One row per line and kind of access, worst first."""
        return pandas().DataFrame(
            [[r.line, r.text, r.what, r.requests, r.lanes, r.units_per_request,
              r.ideal_per_request, r.advice] for r in self.rows], columns=_COLUMNS)

    def __repr__(self) -> str:
        head = f"<lines of {self.kernel}, worst first (counted on the simulator)"
        if not self.rows:
            return head + ": no accesses>"
        out = [head + ":"]
        for r in self.rows:
            cells = self._cells(r)
            out.append(f"  line {cells[0]:>4}  {cells[2]:<14} {cells[3]:>10} requests  "
                       f"{cells[4]:>5} lanes  {cells[5]:<18} {r.text[:50]}")
            if r.advice:
                out.append(f"             -> {r.advice}")
        return "\n".join(out) + ">"

    def _repr_html_(self) -> str:
        return html_table([self._cells(r) for r in self.rows], _HEADER,
                          title=f"{self.kernel}: source lines, worst first",
                          notes=["counted on the CPU simulator, as Nsight Compute counts them: a "
                                 "request is one warp-level instruction; sectors are 32 bytes, "
                                 "a wavefront one pass of shared memory's 32 banks"])
