"""What the simulator counted, under Nsight Compute's metric names, and per
source line.

:func:`metrics` turns one launch's :class:`~workbench.backends.counting.LaunchCounts`
into the figures ncu reports where the addresses decide them (requests and
sectors of global loads, stores and atomics; wavefronts and bank conflicts
of shared memory), plus estimates that ncu measures from the GPU's own
instructions (:data:`ESTIMATED`). :func:`line_rows` sums the same per line
of the kernel's source, worst first, each with one sentence on what to
change (:mod:`.advice`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..backends.counting import LaunchCounts, SiteCount
from .advice import advise
from .source_loops import runtime_unrolled

GLOBAL = "l1tex__t_{what}_pipe_lsu_mem_global_op_{op}.sum"
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"
SHARED_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"
SHARED_INSTRUCTIONS = "smsp__sass_inst_executed_op_shared_{op}.sum"
#: The wavefronts the shared instructions' own addresses need (ncu's SASS-level
#: count). The l1tex counters above also carry wavefronts that arbitration with
#: other L1 traffic adds (a few percent, on conflict-free kernels too); the
#: simulator counts what the addresses need, so it gives the same value to both.
SHARED_INSTRUCTION_WAVEFRONTS = "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"
LANES_PER_INSTRUCTION = "smsp__thread_inst_executed_per_inst_executed.ratio"
INSTRUCTIONS = "smsp__inst_executed.sum"
SECTORS_PER_REQUEST = "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{op}.ratio"

#: The counted metrics, as ncu is asked for them on a GPU (the same names
#: hold the measured values there).
COUNTED = tuple(
    [GLOBAL.format(what=w, op=op) for op in ("ld", "st", "atom", "red") for w in ("requests", "sectors")]
    + [f.format(op=op) for op in ("ld", "st") for f in (SHARED_WAVEFRONTS, SHARED_CONFLICTS,
                                                         SHARED_INSTRUCTIONS,
                                                         SHARED_INSTRUCTION_WAVEFRONTS)])
#: Metrics the simulator estimates rather than counts: they depend on the
#: GPU's own instructions, which the simulator does not have.
ESTIMATED = (LANES_PER_INSTRUCTION, INSTRUCTIONS)
#: Every metric the simulator gives (and a GPU profile is asked for).
ALL = COUNTED + ESTIMATED + tuple(SECTORS_PER_REQUEST.format(op=op) for op in ("ld", "st"))

_ATOMIC_CALL = re.compile(r"\b(atomic\w+)\s*\(")
# a call whose value is not used: at the start of a statement
_STATEMENT_START = re.compile(r"(?:^|[;{}:]|\belse|\bdo|\)\s*)\s*$")


def atomic_ops(source_line: str) -> str:
    """``"red"`` when the atomics on this source line discard their result
    (the GPU's compiler then issues RED, a reduction without a return value),
    else ``"atom"``. atomicCAS and atomicExch always return (ATOM)."""
    for m in _ATOMIC_CALL.finditer(source_line):
        name = m.group(1)
        if name.startswith(("atomicCAS", "atomicExch")):
            return "atom"
        before = source_line[:m.start()]
        before = re.sub(r"\b(?:if|while|for)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", "", before)
        if not _STATEMENT_START.search(before):
            return "atom"
    return "red"


_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_FUNCTION = re.compile(r"__(?:global|device)__[^(;{=]*\(([^)]*)\)\s*(?:const\s*)?\{")
_UNIFORM_NAMES = {"blockIdx", "blockDim", "gridDim", "const", "int", "long", "unsigned", "size_t"}
_MEMBER = re.compile(r"\.\s*[xyz]\b")


def function_parameters(source: str) -> list[tuple[int, set[str]]]:
    """``(line, parameter names)`` of every ``__global__`` and ``__device__``
    function defined in ``source``, by the line its definition starts on."""
    found = []
    for m in _FUNCTION.finditer(source):
        names = {ids[-1] for parameter in m.group(1).split(",")
                 if (ids := _IDENTIFIER.findall(parameter))}
        found.append((source.count("\n", 0, m.start()) + 1, names))
    return found


def _parameters_at(functions: list[tuple[int, set[str]]], line: int | None) -> set[str]:
    """The parameters of the function a source line is in (the last defined above it)."""
    enclosing = [names for start, names in functions if line is not None and start <= line]
    return enclosing[-1] if enclosing else set()


def atomic_address_is_uniform(source_line: str, parameters: set[str]) -> bool:
    """Whether the first atomic on this line takes an address the GPU's
    compiler can prove the same in every lane (kernel parameters, blockIdx,
    constants): it then makes one atomic a warp of the lanes' sum
    (warp-aggregated), one sector, where lanes on one word whose address it
    cannot prove uniform are applied one by one, a sector each."""
    m = _ATOMIC_CALL.search(source_line)
    if m is None:
        return False
    depth, end = 1, m.end()
    while end < len(source_line) and depth:
        depth += {"(": 1, ")": -1}.get(source_line[end], 0)
        if depth == 1 and source_line[end] == ",":
            break
        end += 1
    address = _MEMBER.sub("", source_line[m.end():end])
    return all(name in parameters or name in _UNIFORM_NAMES
               for name in _IDENTIFIER.findall(address))


def _op(site: SiteCount, lines: list[str]) -> str:
    if site.kind == "load":
        return "ld"
    if site.kind == "store":
        return "st"
    text = lines[site.line - 1] if site.line and site.line <= len(lines) else ""
    return atomic_ops(text)


def _sectors(site: SiteCount, lines: list[str], functions) -> float:
    """A global site's sectors: for atomics, the distinct sectors (``ideal``)
    where the compiler aggregates a warp's lanes, else a transaction per lane
    on one word (``units``)."""
    if site.kind != "atomic":
        return site.units
    text = lines[site.line - 1] if site.line and site.line <= len(lines) else ""
    uniform = atomic_address_is_uniform(text, _parameters_at(functions, site.line))
    return site.ideal if uniform else site.units


def scale(counts: LaunchCounts) -> float:
    """The factor from the counted blocks to the whole launch (1 unless sampled)."""
    if not counts.blocks_recorded:
        return 0.0
    return counts.blocks / counts.blocks_recorded


def metrics(counts: LaunchCounts, source: str = "") -> dict[str, float]:
    """The launch's figures under Nsight Compute's metric names (:data:`ALL`)."""
    lines = source.splitlines()
    functions = function_parameters(source)
    k = scale(counts)
    out = {name: 0.0 for name in COUNTED}
    weighted_lanes = weighted_runs = instructions = 0.0
    for s in counts.sites:
        if s.kind == "block":
            if s.line is not None:  # the kernel's own blocks, not the launcher's
                weighted_lanes += s.instructions * s.lanes
                weighted_runs += s.instructions * s.requests
            instructions += s.instructions * s.requests
            continue
        if s.space == "global":
            op = _op(s, lines)
            out[GLOBAL.format(what="requests", op=op)] += s.requests * k
            out[GLOBAL.format(what="sectors", op=op)] += _sectors(s, lines, functions) * k
        elif s.space == "shared" and s.kind != "atomic":
            op = "ld" if s.kind == "load" else "st"
            out[SHARED_WAVEFRONTS.format(op=op)] += s.units * k
            out[SHARED_INSTRUCTION_WAVEFRONTS.format(op=op)] += s.units * k
            out[SHARED_CONFLICTS.format(op=op)] += (s.units - s.ideal) * k
            out[SHARED_INSTRUCTIONS.format(op=op)] += s.requests * k
    for op in ("ld", "st"):
        requests = out[GLOBAL.format(what="requests", op=op)]
        out[SECTORS_PER_REQUEST.format(op=op)] = (
            out[GLOBAL.format(what="sectors", op=op)] / requests if requests else 0.0)
    out[LANES_PER_INSTRUCTION] = weighted_lanes / weighted_runs if weighted_runs else 0.0
    out[INSTRUCTIONS] = instructions * k
    return {name: (round(v) if name in COUNTED else v) for name, v in out.items()}


def instruction_level(measured: dict[str, float]) -> dict[str, float]:
    """A GPU profile's metrics with the shared-memory wavefronts and bank
    conflicts as the instructions' addresses decide them: the l1tex counters
    less the wavefronts arbitration added (l1tex wavefronts - SASS-level
    wavefronts), which is what the simulator counts. Metrics without the
    SASS-level count are returned as they are."""
    out = dict(measured)
    for op in ("ld", "st"):
        extra = arbitration_wavefronts(measured, op)
        if extra is None:
            continue
        out[SHARED_WAVEFRONTS.format(op=op)] = measured[SHARED_INSTRUCTION_WAVEFRONTS.format(op=op)]
        conflicts = measured.get(SHARED_CONFLICTS.format(op=op))
        if conflicts is not None:
            out[SHARED_CONFLICTS.format(op=op)] = max(0.0, conflicts - extra)
    return out


def arbitration_wavefronts(measured: dict[str, float], op: str) -> float | None:
    """The shared-memory wavefronts (``op``: "ld" or "st") a GPU profile's
    l1tex counter carries beyond what the instructions' addresses need; None
    without both counts."""
    hardware = measured.get(SHARED_WAVEFRONTS.format(op=op))
    needed = measured.get(SHARED_INSTRUCTION_WAVEFRONTS.format(op=op))
    if hardware is None or needed is None:
        return None
    return hardware - needed


@dataclass
class LineRow:
    """One kind of access on one source line, summed over the launch."""

    line: int                 # in the cell (the module's line offset added)
    text: str
    what: str                 # "global load", "shared store", "global atomic", ...
    requests: float           # warp-level instructions
    lanes: float              # active lanes per instruction (32: none idle)
    units_per_request: float  # global: sectors; shared: wavefronts
    ideal_per_request: float  # the fewest the same bytes need
    bytes: float
    advice: str = ""
    sample: object = None     # an AccessSample of this line (the access map draws it)
    uneven: float = 0.0       # share of the requests in runs of a loop nvcc unrolls where a GPU
                              # issues more (lanes' trip counts uneven: SiteCount.uneven)

    @property
    def excess(self) -> float:
        """Sectors or wavefronts more than needed, summed over the launch."""
        return (self.units_per_request - self.ideal_per_request) * self.requests

    @property
    def ways(self) -> float:
        """Shared memory: the bank-conflict degree (wavefronts per ideal wavefront)."""
        return self.units_per_request / self.ideal_per_request if self.ideal_per_request else 0.0


def line_rows(counts: LaunchCounts, source: str, line_offset: int = 0) -> list[LineRow]:
    """Per source line and kind of access: requests, active lanes, sectors or
    wavefronts per request and what they could be, worst lines first (the
    most excess sectors and wavefronts, then the fewest active lanes), each
    with advice (:func:`.advice.advise`)."""
    from .advice import advise  # (a sibling module: the sentences)
    lines = source.splitlines()
    k = scale(counts)
    groups: dict[tuple, list[SiteCount]] = {}
    for s in counts.sites:
        if s.line is None or s.kind == "block":
            continue
        what = f"{s.space} {'atomic' if s.kind == 'atomic' else s.kind}"
        groups.setdefault((s.line, what), []).append(s)
    rows = []
    for (line, what), sites in groups.items():
        requests = sum(s.requests for s in sites)
        units = sum(s.units for s in sites)
        ideal = sum(s.ideal for s in sites)
        sample = max(sites, key=lambda s: (s.worst, s.requests)).sample
        row = LineRow(line + line_offset, lines[line - 1].strip() if line <= len(lines) else "",
                      what, requests * k, sum(s.lanes for s in sites) / requests if requests else 0,
                      units / requests if requests else 0, ideal / requests if requests else 0,
                      sum(s.bytes for s in sites) * k, sample=sample)
        # (a warp's buffer delivered mid-run splits its loop runs: no trip counts then)
        if requests and not counts.cut and runtime_unrolled(lines, line):
            row.uneven = sum(s.uneven for s in sites) / requests
        row.advice = advise(row)
        rows.append(row)
    divergent = _divergent_lines(counts, lines, line_offset, {r.line for r in rows})
    rows.extend(divergent)
    rows.sort(key=lambda r: (-r.excess, r.lanes, -r.requests, r.line))
    return rows


def _divergent_lines(counts: LaunchCounts, lines, line_offset: int, known: set) -> list[LineRow]:
    """Lines whose basic blocks run with idle lanes and that have no access
    row of their own (a branch around arithmetic)."""
    k = scale(counts)
    per_line: dict[int, list[float]] = {}
    for s in counts.sites:
        if s.kind != "block" or s.line is None:
            continue
        acc = per_line.setdefault(s.line, [0.0, 0.0, 0.0])
        acc[0] += s.instructions * s.lanes
        acc[1] += s.instructions * s.requests
        acc[2] += s.requests
    rows = []
    for line, (lanes, runs, requests) in per_line.items():
        if not runs or line + line_offset in known or lanes / runs > 31.5:
            continue
        row = LineRow(line + line_offset, lines[line - 1].strip() if line <= len(lines) else "",
                      "branch", requests * k, lanes / runs, 0.0, 0.0, 0.0)
        row.advice = advise(row)
        rows.append(row)
    return rows
