"""``wb.sanitize`` on the CPU simulator: the launch runs under the backend's
sanitizer (:meth:`~workbench.backends.contract.Instrumentation.sanitize_launches`)
on copies of the device arrays (the caller's arrays stay as they were, as on
a GPU, where compute-sanitizer's process gets copies), and the findings get
the cell's lines, their source and the arrays they touched.

Schedules (``schedules=N``): the launch runs again on fresh copies in the
default order and in ``N`` random orders of its blocks and threads
(:meth:`~workbench.backends.contract.Instrumentation.explore_schedules`); an
array whose elements differ between them is a finding that names them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...backends.counting import SHARED_DYNAMIC_BASE
from ...backends.sanitizing import RawFinding
from .report import Finding

#: Elements of an array that differ between schedules named in a finding at most.
SHOWN_ELEMENTS = 5


@dataclass(frozen=True)
class ArrayArgument:
    """A device array a launch received: its parameter's name, where it lies
    (``start``, ``nbytes``) and its dtype."""

    name: str
    start: int
    nbytes: int
    dtype: np.dtype


def device_arguments(kernel, args) -> list[ArrayArgument]:
    """The device arrays among ``args`` (converted arguments) of ``kernel``."""
    b = kernel.backend
    out = []
    for p, a in zip(kernel.signature.params, args):
        if a is not None and b.is_device_array(a):
            out.append(ArrayArgument(p.name, b.device_pointer(a), int(a.nbytes), a.dtype))
    return out


def copies(kernel, args) -> tuple[list, list[ArrayArgument]]:
    """``args`` with each device array replaced by a copy (the same array
    twice stays one copy), the written state of ``wb.allocate``'s bytes
    included; and the copies as :class:`ArrayArgument`."""
    b = kernel.backend
    out, seen = [], {}
    for a in args:
        if a is not None and b.is_device_array(a):
            c = seen.get(id(a))
            if c is None:
                c = seen[id(a)] = b.allocate(a.shape, a.dtype)
                b.copy(c, a)
                unwritten = b.uninitialised(a)
                if unwritten is not None:
                    b.initialisation().adopt(b.device_pointer(c), unwritten)
            out.append(c)
        else:
            out.append(a)
    return out, device_arguments(kernel, out)


def findings(launches, kernel, arrays) -> list[Finding]:
    """The backend's findings of ``launches`` with the cell's lines and arrays."""
    out = []
    for launch in launches:
        for raw in launch.findings:
            out.append(cell_finding(raw, kernel, launch.kernel, arrays, launch.shared_variables))
    out.sort(key=lambda f: (f.severity != "error", f.line is None, f.line or 0))
    return out


def cell_finding(raw: RawFinding, kernel, name: str, arrays, shared_variables) -> Finding:
    """One :class:`~workbench.backends.sanitizing.RawFinding` as a :class:`Finding`."""
    module = kernel.module if kernel is not None else None
    source = module.source.splitlines() if module is not None else []
    offset = module.line_offset if module is not None else 0

    def at(line):
        if line is None:
            return None, ""
        text = source[line - 1] if 0 < line <= len(source) else ""
        return line + offset, text

    line, text = at(raw.second.line)
    first = raw.first
    other_line, other_text = at(first.line) if first is not None else (None, "")
    size = raw.second.size or (first.size if first is not None else 0)
    return Finding(
        tool=raw.tool, kind=raw.kind, severity=raw.severity, count=raw.count, kernel=name,
        line=line, source=text, access=raw.second.kind, thread=raw.second.thread, block=raw.block,
        other_line=other_line, other_source=other_text,
        other_access=first.kind if first is not None else "",
        other_thread=first.thread if first is not None else None, space=raw.space,
        address=raw.address, where=describe_address(raw.address, raw.space, size, arrays,
                                                    shared_variables),
        size=size, detail=raw.detail)


def describe_address(address, space: str, size: int, arrays, shared_variables=()) -> str:
    """An address in words: the shared variable or array and its element
    (``s[128]``, ``out[7]``), or how far past an array it lies."""
    if address is None:
        return ""
    if space == "shared":
        if address >= SHARED_DYNAMIC_BASE:
            return _element("extern __shared__ memory", address - SHARED_DYNAMIC_BASE, size, None)
        for v in shared_variables:
            if v.address <= address < v.address + v.size:
                return _element(v.name, address - v.address, size, None)
        return ""
    best = None
    for a in arrays:
        if a.start <= address < a.start + a.nbytes:
            return _element(a.name, address - a.start, size, a.dtype)
        if address >= a.start + a.nbytes and (best is None or a.start > best.start):
            best = a
    if best is not None and address - (best.start + best.nbytes) < 1 << 20:
        offset, item = address - best.start, best.dtype.itemsize
        at = f"{best.name}[{offset // item}]" if offset % item == 0 else f"{best.name} + {offset} bytes"
        return f"{at}, past the end of {best.name} ({best.nbytes // item} elements)"
    return ""


def _element(name: str, offset: int, size: int, dtype) -> str:
    name = name.rsplit("::", 1)[-1]  # (a static variable of the kernel: "kernel::s")
    item = dtype.itemsize if dtype is not None else size
    if item and offset % item == 0:
        return f"{name}[{offset // item}]"
    return f"{name} + {offset} bytes"


# -- schedules ---------------------------------------------------------------------------------
def explore(kernel, args, launch: dict, schedules: int, seed: int) -> list[Finding]:
    """Run the launch in the default order and in ``schedules`` random ones
    (seeds ``seed + 1`` ...), each on fresh copies of the arguments; a
    finding for each array whose results differ."""
    b = kernel.backend
    results, names = [], []
    for i in range(schedules + 1):
        run, _ = copies(kernel, args)
        if i == 0:
            kernel(*run, **launch)
        else:
            with b.explore_schedules(seed + i):
                kernel(*run, **launch)
        names, outs, seen = [], [], set()
        for p, a in zip(kernel.signature.params, run):
            if a is not None and b.is_device_array(a) and id(a) not in seen:
                seen.add(id(a))
                names.append(p.name)
                outs.append(np.asarray(b.to_host(a)).reshape(-1))
        results.append(outs)
    found = []
    for j, name in enumerate(names):
        base = results[0][j]
        differ = np.zeros(base.shape, dtype=bool)
        first_other = None
        for i in range(1, len(results)):
            other = results[i][j]
            d = _differs(base, other)
            if d.any() and first_other is None:
                first_other = i
            differ |= d
        if differ.any():
            found.append(_difference(kernel, name, base, results[first_other][j], differ,
                                     first_other, seed + first_other, schedules))
    return found


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elements whose bytes differ (NaN equals NaN of the same bits)."""
    if a.dtype.kind in "fc":
        return ~((a == b) | (np.isnan(a) & np.isnan(b)))
    return a != b


def _difference(kernel, name, base, other, differ, index, seed, schedules) -> Finding:
    where = np.flatnonzero(differ)
    shown = ", ".join(f"{name}[{i}]" for i in where[:SHOWN_ELEMENTS])
    if len(where) > SHOWN_ELEMENTS:
        shown += ", ..."
    i = int(where[0])
    detail = (f"{name}[{i}] is {base[i].item()!r} in the default order and {other[i].item()!r} in schedule "
              f"{index} (seed {seed}) of {schedules}")
    if base.dtype.kind == "f" and np.allclose(base[where], other[where], rtol=1e-5, atol=0):
        detail += ("; the values differ only in their last bits: floating-point operations "
                   "(atomicAdd on floats, say) in another order")
    return Finding(tool="schedules", kind="results differ", severity="error",
                   count=int(len(where)), kernel=kernel.name, line=None, space="global",
                   where=shown, detail=detail)
