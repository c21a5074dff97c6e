"""``wb.sanitize`` on a GPU: the launch runs again in a child process under
NVIDIA's compute-sanitizer (as ``wb.profile`` runs ncu: :mod:`..ship`,
:mod:`..child`), and its report is read back into :class:`.report.Finding`s.

The child compiles the kernel's module with ``-lineinfo`` (compute-sanitizer
then names source lines, which are the module's own: the cell's once the
``%%cuda`` line is added), gets copies of the device arrays (the bytes of
``wb.allocate``'s arrays that nothing wrote stay unwritten there, for
initcheck) and launches the kernel once. compute-sanitizer's text report is
parsed: one finding per kind of report and source line (for a race, per pair
of lines), the first occurrence's thread, block and address kept.
"""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from ...errors import ProfileFailed
from .. import ship, tools
from ..ncu import _run, _tail, child_environment
from .report import Finding, SanitizerReport

#: Reports compute-sanitizer prints at most (each is counted: a finding's count).
PRINT_LIMIT = 1_000_000
_PREFIX = re.compile(r"^=+ ?")
_LOCATION = re.compile(r" in (\S+?):(\d+)\b")
_RACE = re.compile(r"^(Error|Warning): Race reported between (\w+) access at (.*)$")
_RACE_TAIL = re.compile(r"^and (\w+) access at (.*?)(?:\[(\d[\d,]*) hazards?\])?\s*$")
_INVALID = re.compile(r"^Invalid __(\w+)__ (read|write|atomic) of size (\d+) bytes?")
_MISALIGNED = re.compile(r"^Misaligned (?:Shared or Local )?Address", re.I)
_UNINIT = re.compile(r"^Uninitialized __(\w+)__ memory read of size (\d+) bytes?")
_BARRIER = re.compile(r"^Barrier error detected\. ?(.*)$")
_THREAD = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDRESS = re.compile(r"Address (0x[0-9a-f]+)")
_SKIPPED = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY",
            "Program hit", "Target application", "Saved host backtrace", "Host Frame",
            "Device Frame", "Note:", "Warning: ")


def command(executable: str, tool: str, target) -> list[str]:
    """The compute-sanitizer command line that checks ``target`` (a command list)."""
    cmd = [executable, "--tool", tool, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "analysis"]
    return cmd + [str(t) for t in target]


def sanitize(kernel, args, *, grid, block, shared_mem: int, n, tool: str,
             timeout: float = 600) -> SanitizerReport:
    """One launch of ``kernel(*args)`` checked by compute-sanitizer's ``tool``."""
    b = tools.require_gpu_backend("compute-sanitizer")
    executable = tools.require("sanitizer")
    folder = tempfile.mkdtemp(prefix="workbench-sanitize-")
    try:
        name = ship.write_kernel_spec(Path(folder), kernel, args, grid, block, shared_mem, n, 0,
                                      lineinfo=True, initialisation=tool == "initcheck")
        target = [sys.executable, "-m", "workbench.profiling.child", folder]
        result = _run(command(executable, tool, target), child_environment(b.name), timeout,
                      f"{name} under compute-sanitizer")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    output = result.stdout or ""
    if "========= " not in output and result.returncode != 0:
        raise ProfileFailed(f"compute-sanitizer could not run {name} (exit code "
                            f"{result.returncode}):\n{_tail(output)}")
    found = parse(output, tool, kernel)
    return SanitizerReport(tool, f"{name} (one launch)", found, 1, "compute-sanitizer",
                           output=output)


def _records(output: str):
    """compute-sanitizer's reports: (headline, [the lines under it])."""
    current = None
    for raw in output.splitlines():
        if not raw.startswith("="):
            continue
        text = _PREFIX.sub("", raw)
        if not text.strip():
            if current is not None:
                yield current
                current = None
            continue
        if text[0].isspace():
            if current is not None:
                current[1].append(text.strip())
            continue
        if current is not None:
            yield current
        keep = not text.startswith(_SKIPPED) or _RACE.match(text.strip())
        current = (text.strip(), []) if keep else None
    if current is not None:
        yield current


def _line(text: str):
    m = _LOCATION.search(text)
    return int(m.group(2)) if m else None


def parse(output: str, tool: str, kernel=None) -> list[Finding]:
    """compute-sanitizer's text report as findings, grouped by kind and line
    (lines are the cell's when ``kernel``, whose module was compiled, is given)."""
    module = getattr(kernel, "module", None)
    source = module.source.splitlines() if module is not None else []
    offset = module.line_offset if module is not None else 0
    name = getattr(kernel, "name", "")
    groups: dict[tuple, dict] = {}

    def add(key, count, **fields):
        entry = groups.get(key)
        if entry is None:
            groups[key] = dict(fields, count=count)
        else:
            entry["count"] += count

    for head, rest in _records(output):
        where = _THREAD.search(" ".join(rest))
        thread = tuple(int(v) for v in where.groups()[:3]) if where else None
        block = tuple(int(v) for v in where.groups()[3:]) if where else None
        address = _ADDRESS.search(" ".join(rest))
        address = int(address.group(1), 16) if address else None
        at = next((_line(r) for r in rest if r.startswith("at ")), None)
        race = _RACE.match(head)
        if race:
            severity, first, location = race.groups()
            tail = next((_RACE_TAIL.match(r) for r in rest if r.startswith("and ")), None)
            second = tail.group(1) if tail else "?"
            l1, l2 = _line(location), _line(tail.group(2)) if tail else None
            hazards = int(tail.group(3).replace(",", "")) if tail and tail.group(3) else 1
            kind = {"write": {"read": "RAW", "write": "WAW"},
                    "read": {"write": "WAR"}}.get(first.lower(), {}).get(second.lower(), "RAW")
            add(("racecheck", kind, severity, l1, l2), hazards, tool="racecheck", kind=kind,
                severity=severity.lower(), access=second.lower(), line=l2,
                other_access=first.lower(), other_line=l1, space="shared")
            continue
        m = _INVALID.match(head)
        if m:
            space, op, size = m.groups()
            misaligned = any("misaligned" in r for r in rest)
            kind = "misaligned" if misaligned else "out of bounds"
            add(("memcheck", kind, space, op, at), 1, tool="memcheck", kind=kind,
                severity="error", access=op, line=at, space=space, size=int(size),
                thread=thread, block=block, address=address)
            continue
        if _MISALIGNED.match(head):
            add(("memcheck", "misaligned", at), 1, tool="memcheck", kind="misaligned",
                severity="error", access="access", line=at, space="shared",
                thread=thread, block=block, address=address, detail=head)
            continue
        m = _UNINIT.match(head)
        if m:
            add(("initcheck", at), 1, tool="initcheck", kind="uninitialized read",
                severity="error", access="read", line=at, space=m.group(1), size=int(m.group(2)),
                thread=thread, block=block, address=address)
            continue
        m = _BARRIER.match(head)
        if m:
            what = (m.group(1) or "barrier error").strip().rstrip(".")
            kind = "invalid arguments" if "invalid argument" in what.lower() else what.lower()
            add(("synccheck", kind, at), 1, tool="synccheck", kind=kind, severity="error",
                access="__syncwarp" if kind == "invalid arguments" else "barrier", line=at,
                thread=thread, block=block, detail=head)
            continue
        add((tool, head, at), 1, tool=tool, kind=head, severity="error", access="", line=at,
            thread=thread, block=block, address=address)

    def cell(n):
        if n is None:
            return None, ""
        return n + offset, source[n - 1] if 0 < n <= len(source) else ""

    out = []
    for g in groups.values():
        line, text = cell(g.get("line"))
        other, other_text = cell(g.get("other_line"))
        out.append(Finding(
            tool=g["tool"], kind=g["kind"], severity=g["severity"], count=g["count"], kernel=name,
            line=line, source=text, access=g.get("access", ""), thread=g.get("thread"),
            block=g.get("block"), other_line=other, other_source=other_text,
            other_access=g.get("other_access", ""), space=g.get("space", ""),
            address=g.get("address"), size=g.get("size", 0), detail=g.get("detail", "")))
    out.sort(key=lambda f: (f.severity != "error", f.line is None, f.line or 0))
    return out
