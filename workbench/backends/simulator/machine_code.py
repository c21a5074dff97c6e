"""What the counting build's machine code says, from objdump: each basic
block's estimated GPU instructions and floating-point operations (the
divergence and instruction estimates, the FLOPs of the prediction) and the
loops (the counters group an access inside a loop by its iterations). Each
function takes an ``instrumented.InstrumentedLibrary`` and keeps what it
found there (``blocks``, ``loops``, ``instructions``).
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

from ... import subprocesses
from ...errors import WorkbenchError


def binutils(tool: str, args: list[str], stdin: str | None = None) -> str:
    """``tool``'s output for ``args`` (binutils: objdump, readelf, addr2line)."""
    try:
        proc = subprocesses.run([tool, *args], input=stdin, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise WorkbenchError(f"counting accesses needs binutils' {tool} (it comes with g++): "
                             f"{exc}") from None
    if proc.returncode != 0:
        raise WorkbenchError(f"{tool} failed on the instrumented library: {proc.stderr.strip()}")
    return proc.stdout


#: Floating-point operations per lane of an x86 (SSE/AVX scalar) or aarch64
#: instruction, by mnemonic prefix, as Nsight Compute counts FLOPs: adds and
#: multiplies one, fused multiply-adds two (the build does not vectorise).
_FP_X86 = (("vfmadd", 2), ("vfmsub", 2), ("vfnmadd", 2), ("vfnmsub", 2), ("vadd", 1),
           ("vsub", 1), ("vmul", 1), ("vdiv", 1), ("add", 1), ("sub", 1), ("mul", 1),
           ("div", 1))
_FP_ARM = (("fmadd", 2), ("fmsub", 2), ("fnmadd", 2), ("fnmsub", 2), ("fadd", 1), ("fsub", 1),
           ("fmul", 1), ("fnmul", 1), ("fdiv", 1))
#: Library calls that are one floating-point instruction on a GPU (the
#: build has no FMA instruction): (flops, double precision).
_FP_CALLS = {"fmaf": (2, False), "fma": (2, True)}
#: Instructions a GPU spends on a call of the C library's math (expf, sinf...):
#: a few special-function and FMA instructions.
_MATH_CALL = 8
_MATH = re.compile(r"(?:exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|sinh|cosh|tanh|asin|acos|"
                   r"atan|atan2|erf|erfc|pow|sqrt|cbrt|hypot|sincos)f?$")
_SKIPPED = ("nop", "endbr", "push", "pop", "xchg")
#: A GPU's compiler unrolls loops and folds address arithmetic that the CPU
#: build keeps: the CPU's other instructions count this much each.
OTHER_WEIGHT = 0.15
_INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_CALLEE = re.compile(r"<([A-Za-z_][\w.]*)")
#: Instructions of a basic block whose lines are looked up to place it.
_LINE_CANDIDATES = 16


def _flops(mnemonic: str) -> tuple[int, bool]:
    """FLOPs per lane of a CPU instruction and whether they are double precision."""
    if mnemonic.endswith(("ss", "sd")):  # x86 scalar single / double
        for prefix, ops in _FP_X86:
            if mnemonic.startswith(prefix):
                return ops, mnemonic.endswith("sd")
        return 0, False
    if mnemonic.startswith("f"):
        for prefix, ops in _FP_ARM:
            if mnemonic.startswith(prefix):
                return ops, False
    return 0, False


def _gpu_like(mnemonic: str, operands: str) -> bool:
    """False for CPU instructions a GPU's code has no counterpart of: moves
    between registers (the GPU's instructions take three operands),
    prologues, padding."""
    if mnemonic.startswith(_SKIPPED):
        return False
    if "mov" in mnemonic and "(" not in operands and "[" not in operands and "$" not in operands:
        return False
    return True


def block_figures(lib) -> dict:
    """``basic-block site -> (instructions, flops32, flops64, addresses)``
    from objdump, over the instructions from one coverage call to the next:
    an estimate of the GPU instructions the block stands for (its memory
    accesses, one per access hook, and floating-point instructions, one each,
    then :data:`OTHER_WEIGHT` for each other instruction a GPU would execute
    too, see :func:`_gpu_like`), the FLOPs one lane does, and the block's first
    addresses (their lines place the block)."""
    if lib.blocks is not None:
        return lib.blocks
    figures: dict[int, tuple] = {}
    site, count, f32, f64, starting, previous, addresses = None, 0, 0, 0, False, "", []
    core = 0  # memory and floating-point instructions of the block

    def close():
        if site is not None:
            other = max(count - core, 0)
            figures[site] = (max(core + OTHER_WEIGHT * other, 0.1), f32, f64, tuple(addresses))

    for address, mnemonic, operands in _instructions(lib):
        if address is None:  # the next function
            close()
            site, starting = None, False
            continue
        if starting:
            site, count, f32, f64, starting, addresses, core = address, 0, 0, 0, False, [], 0
        if site is not None and len(addresses) < _LINE_CANDIDATES:
            addresses.append(address)
        if mnemonic.startswith("call") or mnemonic == "bl":
            callee = _CALLEE.search(operands)
            name = callee.group(1) if callee else ""
            if name == "__sanitizer_cov_trace_pc":
                close()
                site, starting, previous = None, True, ""
                continue
            if name.startswith("__tsan_") and (previous.endswith("%rdi") or previous.startswith("x0,")):
                count -= 1  # the address set-up belongs to the access
            if site is not None:
                if name.startswith("__tsan_") and "func_" not in name:
                    core += 1
                elif name in _FP_CALLS:
                    ops, double = _FP_CALLS[name]
                    f64, f32 = (f64 + ops, f32) if double else (f64, f32 + ops)
                    core += 1
                elif _MATH.match(name):
                    core += _MATH_CALL
        if site is not None and _gpu_like(mnemonic, operands):
            count += 1
            ops, double = _flops(mnemonic)
            f64, f32 = (f64 + ops, f32) if double else (f64, f32 + ops)
            core += ops > 0
        previous = operands
    close()
    lib.blocks = figures
    return figures


def _instructions(lib) -> list:
    """The library's instructions from objdump, once: ``(address, mnemonic,
    operands)`` (x86 prefixes taken off the mnemonic), each function's led by
    ``(None, name, "")``."""
    if lib.instructions is None:
        out = []
        for line in binutils("objdump", ["-d", "--no-show-raw-insn", lib.path]).splitlines():
            if line.endswith(">:"):
                out.append((None, line[line.find("<") + 1:-2], ""))
                continue
            m = _INSTRUCTION.match(line)
            if m:
                out.append((int(m[1], 16), *_instruction(m[2], m[3])))
        lib.instructions = out
    return lib.instructions


#: A direct branch's target in objdump's operands: ``1234 <function+0x56>``
#: (after the comment objdump may add: ``// b.any``, ``# 4018 <...>``).
_TARGET = re.compile(r"\b([0-9a-f]+) <[^>]*>\s*$")
_COMMENT = re.compile(r"\s+(?://|#).*$")
_ARM_BRANCHES = ("b", "cbz", "cbnz", "tbz", "tbnz")
#: x86 prefixes objdump prints before the mnemonic (``notrack jmp *%rax``, ``repz ret``).
_PREFIXES = ("notrack", "bnd", "rep", "repz", "repe", "repnz", "repne", "lock", "ds", "cs")


@dataclass(frozen=True)
class Loops:
    """The loops of a library's machine code (:func:`loop_sites`).

    ``markers``: ``(site, loop)`` ascending by site: entering the basic block
    whose coverage call returns to ``site`` counts an iteration of ``loop``
    (its header block's, or where the header has none, its latches': every
    iteration passes one of them once). ``parents``: each loop's enclosing
    loop, -1 for none. ``sites``: each memory-access hook's site (its return
    address) inside a loop, to its innermost loop.
    """

    markers: tuple = ()
    parents: tuple = ()
    sites: dict = field(default_factory=dict)


def _is_branch(mnemonic: str) -> bool:
    return mnemonic.startswith(("j", "b.")) or mnemonic in _ARM_BRANCHES


def _ends_flow(mnemonic: str) -> bool:
    """An unconditional jump or a return: no fall-through to the next instruction."""
    return mnemonic in ("jmp", "b", "br") or mnemonic.startswith(("ret", "ud2", "hlt"))


def _instruction(mnemonic: str, operands: str) -> tuple[str, str]:
    """``(mnemonic, operands)`` without x86 prefixes."""
    while mnemonic in _PREFIXES and operands:
        mnemonic, _, operands = operands.partition(" ")
        operands = operands.strip()
    return mnemonic, operands


def loop_sites(lib) -> Loops:
    """The library's loops, from objdump (:class:`Loops`). Per function: the
    basic blocks of the machine code, their dominators, and for each edge
    to a block that dominates its source (a back edge to the loop's header)
    the natural loop: the blocks that reach the edge's source without
    passing the header. A branch through a jump table may go to any block
    that nothing else reaches. The counters group an access inside a loop
    by the iterations of its loops (``native/access_counts.cpp``)."""
    if lib.loops is not None:
        return lib.loops
    functions: list[list[tuple[int, str, str]]] = []
    for instruction in _instructions(lib):
        if instruction[0] is None:
            functions.append([])
        elif functions:
            functions[-1].append(instruction)
    markers, parents, sites = [], [], {}
    for code in functions:
        if code:
            _function_loops(code, markers, parents, sites)
    lib.loops = Loops(tuple(sorted(markers)), tuple(parents), sites)
    return lib.loops


def _blocks(code: list):
    """A function's basic blocks: ``(starts, successors, coverage, hooks,
    indirect)``: block start addresses ascending, each block's successors,
    the return address of its first coverage call, the access hooks' sites
    with their block, and the blocks that end in an indirect jump."""
    first, last = code[0][0], code[-1][0]
    targets, leaders = {}, {first}
    for i, (address, mnemonic, operands) in enumerate(code):
        target = _TARGET.search(_COMMENT.sub("", operands)) if _is_branch(mnemonic) else None
        if target and first <= int(target[1], 16) <= last:
            targets[address] = int(target[1], 16)
            leaders.add(targets[address])
        if (_is_branch(mnemonic) or _ends_flow(mnemonic)) and i + 1 < len(code):
            leaders.add(code[i + 1][0])
    starts = sorted(leaders)
    successors = {start: [] for start in starts}
    coverage: dict[int, int] = {}
    hooks: dict[int, int] = {}
    indirect = []
    b = 0
    for i, (address, mnemonic, operands) in enumerate(code):
        while b + 1 < len(starts) and address >= starts[b + 1]:
            b += 1
        block = starts[b]
        following = code[i + 1][0] if i + 1 < len(code) else None
        if mnemonic.startswith("call") or mnemonic == "bl":
            callee = _CALLEE.search(operands)
            name = callee.group(1) if callee else ""
            if following is not None and name == "__sanitizer_cov_trace_pc":
                coverage.setdefault(block, following)
            elif following is not None and name.startswith("__tsan_") and "func_" not in name:
                hooks[following] = block
        if following is None or following in leaders:
            if address in targets:
                successors[block].append(targets[address])
            elif (mnemonic == "jmp" and operands.startswith("*%")) or mnemonic == "br":
                indirect.append(block)   # through a register: a jump table (a tail call goes
                                         # through memory, the GOT)
            if following is not None and not _ends_flow(mnemonic):
                successors[block].append(following)
    return starts, successors, coverage, hooks, indirect


def _dominators(entry: int, successors: dict) -> dict:
    """Immediate dominators of the blocks reachable from ``entry`` (Cooper,
    Harvey and Kennedy's iterative algorithm over reverse postorder)."""
    order, seen, stack = [], {entry}, [(entry, iter(successors[entry]))]
    while stack:
        block, it = stack[-1]
        n = next(it, None)
        if n is None:
            order.append(block)
            stack.pop()
        elif n not in seen:
            seen.add(n)
            stack.append((n, iter(successors[n])))
    order.reverse()
    rank = {b: i for i, b in enumerate(order)}
    predecessors: dict[int, list] = {b: [] for b in order}
    for b in order:
        for n in successors[b]:
            predecessors[n].append(b)
    idom = {entry: entry}
    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            done = [p for p in predecessors[b] if p in idom]
            new = done[0]
            for p in done[1:]:
                x, y = p, new
                while x != y:
                    while rank[x] > rank[y]:
                        x = idom[x]
                    while rank[y] > rank[x]:
                        y = idom[y]
                new = x
            if idom.get(b) != new:
                idom[b], changed = new, True
    return idom


def _dominates(idom: dict, a: int, b: int) -> bool:
    while True:
        if b == a:
            return True
        up = idom[b]
        if up == b:
            return False
        b = up


def _function_loops(code: list, markers: list, parents: list, sites: dict) -> None:
    """Add one function's loops (see :func:`loop_sites`): ``markers`` and
    ``parents`` get its loops with indices after those already there, and
    ``sites`` its access hooks inside them."""
    starts, successors, coverage, hooks, indirect = _blocks(code)
    reached = {n for nexts in successors.values() for n in nexts}
    orphans = [b for b in starts[1:] if b not in reached]
    for block in indirect:   # a jump table's targets: the blocks nothing else reaches
        successors[block] = successors[block] + orphans
    idom = _dominators(starts[0], successors)
    predecessors: dict[int, list] = {start: [] for start in starts}
    for block, nexts in successors.items():
        for n in nexts:
            predecessors[n].append(block)
    bodies: dict[int, set] = {}
    latches: dict[int, list] = {}
    for block, nexts in successors.items():
        if block not in idom:
            continue
        for header in nexts:
            if header in idom and _dominates(idom, header, block):
                latches.setdefault(header, []).append(block)
                body = bodies.setdefault(header, {header})
                stack = [block]
                while stack:
                    n = stack.pop()
                    if n not in body:
                        body.add(n)
                        stack.extend(predecessors[n])
    loops = []   # (body size, header, its marker sites)
    for header, body in bodies.items():
        if header in coverage:
            marks = [coverage[header]]
        elif all(latch in coverage for latch in latches[header]):
            marks = sorted({coverage[latch] for latch in latches[header]})
        else:
            continue   # no block that every iteration passes once can be seen
        loops.append((len(body), header, marks))
    loops.sort(key=lambda loop: (-loop[0], loop[1]))   # outer loops before the loops they hold
    taken = {mark for mark, _ in markers}
    kept: list[tuple[int, int]] = []    # (header, index) of the loops kept, outer ones first
    for _, header, marks in loops:
        if taken.intersection(marks):
            continue   # a block that already counts another loop's iterations: not this one's
        taken.update(marks)
        index = len(parents)
        outer = [i for h, i in kept if header in bodies[h]]
        parents.append(outer[-1] if outer else -1)
        kept.append((header, index))
        markers.extend((mark, index) for mark in marks)
        body = bodies[header]
        for site, block in hooks.items():
            if block in body:
                sites[site] = index   # inner loops come later and overwrite
