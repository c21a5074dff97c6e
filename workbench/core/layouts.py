"""Layouts as the compiler lays them out: a probe kernel that writes the
values of C expressions (``sizeof``, ``alignof``, a member's offset measured
on an object) into a ``long long`` array, run once.

The rings check their message dtypes against their C structs this way
(:func:`probe_source`, :func:`expected_layout`, compiled into the ring's own
module); module variables of struct type get their NumPy dtype from it
(:func:`measure`, in a module of its own). Offsets are measured on an object
(``&v.f - &v``), standard C++ where ``offsetof`` on a type that is not
standard-layout is not.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backends.contract import CompileFailed, CompileOptions

PROBE = r"""
extern "C" __global__ void {kernel}(long long* out)
{{
    if (blockIdx.x == 0 && threadIdx.x == 0) {{
{lines}
    }}
}}
"""


def probe_kernel(kernel: str, values: list[str], declarations: list[str] = ()) -> str:
    """The probe kernel ``kernel``: the ``declarations`` (local objects), then
    ``out[i] = (long long)(values[i])`` for each value."""
    lines = [f"        {d}" for d in declarations]
    lines += [f"        out[{i}] = (long long)({v});" for i, v in enumerate(values)]
    return PROBE.format(kernel=kernel, lines="\n".join(lines))


def offset_of(member: str, whole: str) -> str:
    """The C expression of the byte offset of ``member`` within ``whole``
    (two expressions naming objects: ``v.f`` and ``v``)."""
    return f"(const char*)&({member}) - (const char*)&({whole})"


def probe_fields(struct_name: str, dtype: np.dtype, var: str) -> list[tuple[str, str]]:
    """(what, C expression) pairs the probe reports for ``dtype``'s struct,
    measured on a local object ``var`` of it."""
    items = [(f"sizeof({struct_name})", f"sizeof({struct_name})")]
    for field in dtype.names or ():
        items.append((f"offset of {struct_name}::{field}", offset_of(f"{var}.{field}", var)))
    return items


def probe_source(structs: list[tuple[str, np.dtype]],
                 kernel: str = "wb_ring_layout") -> tuple[str, list[str]]:
    """The layout probe for ``(struct name, dtype)`` pairs, and what each of
    its output values is."""
    labels, values, declarations = [], [], []
    for i, (name, dtype) in enumerate(structs):
        declarations.append(f"{name} wb_probe_{i};")
        for label, expr in probe_fields(name, dtype, f"wb_probe_{i}"):
            values.append(expr)
            labels.append(label)
    return probe_kernel(kernel, values, declarations), labels


def expected_layout(structs: list[tuple[str, np.dtype]]) -> list[int]:
    """What the probe must report when the dtypes match the structs."""
    values = []
    for _, dtype in structs:
        values.append(dtype.itemsize)
        values.extend(dtype.fields[f][1] for f in dtype.names or ())
    return values


MEASURE_KERNEL = "wb_layout_probe"


def measure(b, source: str, options: CompileOptions, values: list[str]) -> list[int]:
    """Each C expression of ``values`` as the compiler evaluates it in
    ``source`` (compiled with ``options`` on backend ``b``, with the probe
    kernel added; kept out of ``wb.modules`` and the timing log). Raises
    :class:`~workbench.backends.contract.CompileFailed` when the probe does
    not compile."""
    options = dataclasses.replace(options, name_expressions=())
    compiled = b.compile(source + probe_kernel(MEASURE_KERNEL, values), options, [MEASURE_KERNEL])
    out = b.allocate((max(1, len(values)),), np.int64)
    b.launch(compiled.get_function(MEASURE_KERNEL), (1, 1, 1), (1, 1, 1), (out,))
    return [int(v) for v in b.to_host(out)[:len(values)]]


__all__ = ["CompileFailed", "PROBE", "expected_layout", "measure", "offset_of", "probe_fields",
           "probe_kernel", "probe_source"]
