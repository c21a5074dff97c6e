"""Reading what NVRTC produced: ptxas's resource report in the log, thread
limits in the PTX, and the sections of the cubin (an ELF file).

NVRTC runs ptxas internally, and ``-Xptxas=-v`` makes it append ``ptxas
info`` lines to the program log. ``__constant__`` bytes are the size of the
cubin's ``.nv.constant3`` section, which ptxas no longer prints.
"""
from __future__ import annotations

import re
import struct

# NVRTC prefixes every ptxas line; the ptxas program leaves the prefix off "N bytes stack frame".
_PTXAS_LINE = re.compile(r"^(?:ptxas(?: info)?\s+[:.]|\s+\d+ bytes stack frame)")
_FUNCTION = re.compile(r"Function properties for (\S+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FIGURES = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def parse_ptxas_report(log: str) -> tuple[str, dict[str, dict[str, int]]]:
    """Split NVRTC's log into the user's log (without ``ptxas info`` lines)
    and ``{mangled name: {"registers": .., "smem": .., "stack": ..,
    "spill_stores": .., "spill_loads": .., "barriers": ..}}``."""
    kept: list[str] = []
    functions: dict[str, dict[str, int]] = {}
    entry = current = None
    for line in log.splitlines():
        if not _PTXAS_LINE.match(line):
            kept.append(line)
            continue
        if m := _ENTRY.search(line):
            entry = current = m.group(1)
            functions.setdefault(entry, {})
            continue
        if m := _FUNCTION.search(line):
            current = m.group(1)
            continue
        target = current if "stack frame" in line else entry
        if target is None:
            continue
        for figure, pattern in _FIGURES.items():
            if m := pattern.search(line):
                functions.setdefault(target, {})[figure] = int(m.group(1))
    text = "\n".join(kept).strip()
    return (text + "\n" if text else ""), functions


_ENTRY_PTX = re.compile(r"\.entry\s+([\w$]+)\s*\(.*?\)\s*([^{]*)\{", re.S)
_NTID = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def ptx_thread_limits(ptx: str) -> dict[str, int]:
    """``{entry: threads}`` from ``.maxntid``/``.reqntid`` (``__launch_bounds__``)."""
    limits = {}
    for m in _ENTRY_PTX.finditer(ptx):
        if d := _NTID.search(m.group(2)):
            limits[m.group(1)] = int(d.group(2)) * int(d.group(3) or 1) * int(d.group(4) or 1)
    return limits


def cubin_sections(cubin: bytes) -> dict[str, int]:
    """``{section name: size}`` of a 64-bit little-endian ELF (a cubin)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return {}
    (section_offset,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, section_offset + i * entry_size) for i in range(count)]
    names_offset = headers[names_index][4]
    sections = {}
    for name_at, _type, _flags, _addr, _offset, size in headers:
        start = names_offset + name_at
        sections[cubin[start:cubin.index(b"\0", start)].decode(errors="replace")] = size
    return sections


def constant_bank_bytes(cubin: bytes) -> int:
    """Bytes of user ``__constant__`` memory (the ``.nv.constant3`` bank)."""
    try:
        return cubin_sections(cubin).get(".nv.constant3", 0)
    except (struct.error, ValueError, IndexError):
        return 0
