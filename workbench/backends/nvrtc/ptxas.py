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


def _section_headers(cubin: bytes) -> tuple[list[tuple], list[str]]:
    """The section headers of a 64-bit little-endian ELF (a cubin), each
    ``(name, type, flags, addr, offset, size, link, info, align, entsize)``,
    and their names; empty for anything else."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return [], []
    (section_offset,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, section_offset + i * entry_size)
               for i in range(count)]
    names_offset = headers[names_index][4]
    return headers, [_c_string(cubin, names_offset + h[0]) for h in headers]


def _c_string(data: bytes, start: int) -> str:
    return data[start:data.index(b"\0", start)].decode(errors="replace")


def cubin_sections(cubin: bytes) -> dict[str, int]:
    """``{section name: size}`` of a 64-bit little-endian ELF (a cubin)."""
    headers, names = _section_headers(cubin)
    return {name: h[5] for name, h in zip(names, headers)}


# .nv.info attributes (EIATTR_*) that carry (symbol index, figure) pairs
_REGCOUNT, _FRAME_SIZE = 0x2F, 0x11
#: A kernel's own .nv.info attribute of (kind, instruction offset) pairs; kind 1
#: marks the local loads and stores ptxas added to spill registers (a local
#: array's loads and stores are not marked), which its -v report sums.
_ANNOTATIONS, _SPILL = 0x55, 1
#: SASS opcodes (the low 12 bits of a 128-bit instruction, Volta and later)
_STL, _LDL = 0x387, 0x983
#: Bytes moved per width code (bits 73-75 of a local load or store)
_WIDTH_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 8, 6: 16, 7: 16}
#: The shared memory a block keeps for the system on sm_90 and later; the
#: section of a kernel's __shared__ variables includes it where the cubin has
#: a ``.nv.shared.reserved.0`` section.
_RESERVED_SHARED = 1024


def cubin_resources(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per kernel symbol, what ptxas's ``-v`` report says, read from the cubin
    itself (for an NVRTC whose log leaves the report out): ``registers`` and
    ``stack`` (the frame: local memory per thread) from the ``.nv.info``
    attributes, ``smem`` from the size of the kernel's ``.nv.shared.`` section
    (the system's reserved kilobyte taken off where there is one; ptxas may
    count a few bytes of alignment more)."""
    try:
        headers, names = _section_headers(cubin)
        by_name = dict(zip(names, headers))
        kernels = {name[len(".text."):]: {} for name in names if name.startswith(".text.")}
        symtab, info = by_name.get(".symtab"), by_name.get(".nv.info")
        if symtab is not None and info is not None:
            strings = headers[symtab[6]][4]
            at, end = info[4], info[4] + info[5]
            while at + 4 <= end:
                form, attribute, size = struct.unpack_from("<BBH", cubin, at)
                at += 4
                if form != 4:  # EIFMT_SVAL: a payload of `size` bytes follows; others carry none
                    continue
                if attribute in (_REGCOUNT, _FRAME_SIZE) and size >= 8:
                    index, figure = struct.unpack_from("<II", cubin, at)
                    (name_at,) = struct.unpack_from("<I", cubin, symtab[4] + 24 * index)
                    key = "registers" if attribute == _REGCOUNT else "stack"
                    kernels.setdefault(_c_string(cubin, strings + name_at), {})[key] = figure
                at += size
        reserved = _RESERVED_SHARED if ".nv.shared.reserved.0" in by_name else 0
        spills = {name: _spill_bytes(cubin, by_name, name) for name in kernels}
        marks_spills = any(s is not None for s in spills.values())
        for name, figures in kernels.items():
            section = by_name.get(".nv.shared." + name)
            figures["smem"] = max(0, section[5] - reserved) if section is not None else 0
            spilled = spills[name]
            if spilled is None and (marks_spills or figures.get("stack") == 0):
                spilled = (0, 0)  # no local memory, or a ptxas that marks spills marked none here
            if spilled is not None:
                figures["spill_stores"], figures["spill_loads"] = spilled
        return {name: figures for name, figures in kernels.items() if "registers" in figures}
    except (struct.error, ValueError, IndexError):
        return {}


def _spill_bytes(cubin: bytes, by_name: dict, kernel: str) -> tuple[int, int] | None:
    """``(store bytes, load bytes)`` of the spill instructions marked in the
    kernel's ``.nv.info.<kernel>``; None where none are marked, or where a
    marked instruction is not a local load or store (an encoding not known)."""
    info, text = by_name.get(".nv.info." + kernel), by_name.get(".text." + kernel)
    if info is None or text is None:
        return None
    stores = loads = 0
    marked = False
    at, end = info[4], info[4] + info[5]
    while at + 4 <= end:
        form, attribute, size = struct.unpack_from("<BBH", cubin, at)
        at += 4
        if form != 4:
            continue
        if attribute == _ANNOTATIONS:
            for i in range(0, size - size % 8, 8):
                kind, offset = struct.unpack_from("<II", cubin, at + i)
                if kind != _SPILL:
                    continue
                low, high = struct.unpack_from("<QQ", cubin, text[4] + offset)
                width = _WIDTH_BYTES[(high >> 9) & 7]
                if low & 0xFFF == _STL:
                    stores += width
                elif low & 0xFFF == _LDL:
                    loads += width
                else:
                    return None
                marked = True
        at += size
    return (stores, loads) if marked else None


def constant_bank_bytes(cubin: bytes) -> int:
    """Bytes of user ``__constant__`` memory (the ``.nv.constant3`` bank)."""
    try:
        return cubin_sections(cubin).get(".nv.constant3", 0)
    except (struct.error, ValueError, IndexError):
        return 0
