"""How a ring's messages and queues are laid out: the message dtypes checked
against the C structs (the compiler measures the structs), ``struct`` packers
for tuples of field values, and the byte layout of the shared buffer."""
from __future__ import annotations

import struct

import numpy as np

from ..core.compiler import compile as compile_source
from ..diagnostics import Diagnostic
from ..errors import CompileError
from . import codegen
from .callbox import call_box
from .errors import RingLayoutError

_CONTROL_BYTES = 128
_ALIGN = 128


def structured(dtype, what: str) -> np.dtype:
    """``dtype`` as a NumPy dtype, refused unless it is structured."""
    dtype = np.dtype(dtype)
    if not dtype.names:
        raise RingLayoutError(f"{what} must be a structured NumPy dtype whose fields are the C "
                              f"struct's members, got {dtype}; e.g. np.dtype([('a', 'f4'), "
                              "('b', 'f4')]) for struct { float a, b; }")
    return dtype


_STRUCT_CODES = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i",
                 "u4": "I", "i8": "q", "u8": "Q", "b1": "?"}


def tuple_fields(dtype: np.dtype) -> list[tuple[int, str]] | None:
    """(byte offset, ``struct`` code) of each field, in the tuple's order, or
    None where a tuple cannot be packed field by field (arrays, big-endian
    fields, offsets that do not increase along the fields)."""
    fields, at = [], 0
    for name in dtype.names:
        t, offset = dtype.fields[name][:2]
        code = _STRUCT_CODES.get(f"{t.kind}{t.itemsize}")
        if code is None or t.shape or t.byteorder == ">" or offset < at:
            return None
        fields.append((offset, code))
        at = offset + t.itemsize
    return fields


def packer(dtype: np.dtype):
    """``pack_into(buffer, offset, *values)`` writing one message of ``dtype``
    (little-endian scalar fields only), or None where NumPy must convert."""
    fields = tuple_fields(dtype)
    if fields is None:
        return None
    fmt, at = "<", 0
    for offset, code in fields:
        fmt += "x" * (offset - at) + code
        at = offset + struct.calcsize(code)
    return struct.Struct(fmt).pack_into


def offsets(capacity: int, request: np.dtype, response: np.dtype,
            box: bool = True) -> dict[str, tuple[int, int]]:
    """Byte (offset, size) of each part of the shared buffer (each aligned to
    128 bytes: the call boxes' lanes read and write aligned 16-byte pieces);
    ``box``: with call()'s boxes where the messages fit them."""
    box = call_box(request, response) if box else None
    parts = {"control": _CONTROL_BYTES,
             "response_seq": 8 * capacity, "stamps": 16 * capacity,
             "requests": request.itemsize * capacity, "responses": response.itemsize * capacity,
             "call_box": box.request_bytes if box else 0,
             "answer_box": box.answer_bytes if box else 0}
    layout, at = {}, 0
    for name, size in parts.items():
        layout[name] = (at, size)
        at += -(-size // _ALIGN) * _ALIGN
    layout["total"] = (0, at)
    return layout


def _on_users_lines(error: CompileError, text: str, handler: str | None) -> CompileError:
    """``error`` with the messages about the code the ring adds after the
    user's (its kernels, which call the handler) said once each, at no line:
    its line numbers would count lines the user never wrote."""
    last = text.count("\n") + 1
    where = (f"in the ring's own kernels, which call handler={handler!r}: define that "
             f"__device__ function as docs/rings.md shows, or name yours with handler="
             if handler else "in the ring's own kernels, which call the handler")
    diagnostics, seen = [], set()
    for d in error.diagnostics:
        if d.line is not None and d.line > last:
            if d.message in seen:
                continue
            seen.add(d.message)
            d = Diagnostic(d.severity, f"{d.message} ({where})")
        diagnostics.append(d)
    return CompileError(diagnostics, text, error.log, error.line_offset, error.compiler)


def compile_checked(text, serve, request_type, request, response_type, response, name,
                    handler: str | None = None):
    """The user's source with the ring's kernels (``serve``, generated, calling
    ``handler``), its structs checked against the dtypes."""
    structs = [(request_type, request), (response_type, response)]
    probe, labels = codegen.probe_source(structs)
    try:
        module = compile_source(text + serve + probe, name=name)
    except CompileError as probe_error:
        try:
            compile_source(text + serve, name=name)
        except CompileError as error:  # the user's code or the handler's signature
            raise _on_users_lines(error, text, handler) from None
        fields = "; ".join(f"{s}: {', '.join(d.names)}" for s, d in structs)
        errors = [d.message for d in getattr(probe_error, "diagnostics", ())
                  if d.severity == "error"] or [str(probe_error)]
        raise RingLayoutError(f"the message dtypes' fields are not all members of their C "
                              f"structs ({fields}): name each field as its struct member "
                              f"(the compiler: {errors[0]})") from None
    out = module.backend.xp.zeros(len(labels), dtype=np.int64)
    module["wb_ring_layout"](out, grid=1, block=1)
    got = module.backend.to_host(out).tolist()
    want = codegen.expected_layout(structs)
    wrong = [f"{label}: C says {g}, the dtype {w}" for label, g, w in zip(labels, got, want)
             if g != w]
    if wrong:
        raise RingLayoutError("the message dtypes do not match the C structs (" + "; ".join(wrong)
                              + "). Give the dtype the struct's padding (np.dtype(..., align=True) "
                              "lays fields out as C does) or reorder its fields.")
    return module
