"""Module variables (``__constant__`` / ``__device__``) as NumPy values:
their dtype and shape from the declaration, and the bytes a value writes.

A scalar, vector (``float4``) or pointer variable gets its dtype from its
type's name. A struct variable (a struct, one nesting others, an array of
them) gets a structured dtype with the struct's field names, each field's
offset, the struct's size and alignment as the compiler lays them out: the
field names and types come from the source (:mod:`workbench.cxx.structs`),
the numbers from a probe kernel compiled with the module's own options
(:func:`workbench.core.layouts.measure`), once per module and variable.

A value is written whole: an array with as many elements as the variable
holds, a struct as a dict of every field (nested dicts for nested structs,
lists for arrays of them) or a NumPy structured value with the struct's
field names. Anything shorter or missing a field is refused, never written
in part.
"""
from __future__ import annotations

import ast
import re

import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError
from ..cxx.structs import find_types
from .layouts import CompileFailed, measure, offset_of
from .signature import parse_param

class _Leaf:
    """A member of a type NumPy names itself (a number, a vector, a pointer)."""

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)


class _Node:
    """A struct: its C name and ``(field, member node, shape)`` for each data member."""

    def __init__(self, name: str, fields: list):
        self.name = name
        self.fields = fields


def variable_dtype(module, v, macros) -> np.dtype:
    """The dtype of one element of module variable ``v`` (see the module docstring)."""
    defines = module.options.defines + module._predefined
    types = find_types(module.source, defines)
    node = _type_node(v.ctype, v.pointer_depth, v.scope, types, macros, v.qualified_name, set())
    if isinstance(node, _Leaf):
        return node.dtype
    element = v.qualified_name + "[0]" * len(v.dims)
    values: list[str] = []
    _plan(node, element, values)
    try:
        measured = measure(module.backend, module.source, module.options, values)
    except CompileFailed as exc:
        first = next((ln.strip() for ln in exc.log.splitlines() if "error" in ln), exc.log.strip())
        raise ArgumentTypeError(
            f"variable {v.qualified_name!r} has type {v.ctype!r}, whose layout the "
            f"compiler could not be asked for ({first[:200]}); pass dtype= (a "
            f"structured dtype with the struct's layout)") from None
    return _build(node, iter(measured), v.qualified_name)


def _type_node(ctype, depth, scope, types, macros, what, seen):
    """The node of a member or variable of type ``ctype`` (an error says which
    part the workbench cannot map)."""
    ctype, more = types.resolve(ctype, scope)
    if depth + more:
        return _Leaf(np.uint64)  # a pointer: its address
    p = parse_param(f"{ctype} wb_x", 0)
    if p.dtype is not None:
        return _Leaf(p.dtype)
    if p.vector is not None:
        component, count = p.vector
        return _Leaf(np.dtype([(f, component) for f in "xyzw"[:count]]))
    if types.is_enum(ctype, scope):
        return _Leaf(np.int32)  # (the probe checks its size)
    struct = types.struct(ctype, scope)
    if struct is None or struct.problem or not struct.members:
        why = (struct.problem if struct is not None and struct.problem else
               "a struct without data members" if struct is not None else
               "a type the workbench does not find in the source")
        raise ArgumentTypeError(
            f"variable {what!r} has type {ctype!r} ({why}), which the workbench "
            f"cannot map to a NumPy dtype; pass dtype= (e.g. a structured dtype "
            f"with the same layout)")
    if struct.qualified_name in seen:
        raise ArgumentTypeError(f"variable {what!r}: struct {struct.name!r} contains itself")
    fields = []
    for m in struct.members:
        shape = tuple(_dim(d, macros, what, m.name) for d in m.dims)
        child = _type_node(m.ctype, m.pointer_depth, struct.scope, types, macros, what,
                           seen | {struct.qualified_name})
        fields.append((m.name, child, shape))
    return _Node(struct.qualified_name, fields)


def _dim(text: str, macros, what: str, member: str) -> int:
    value = evaluate_dim(text, macros)
    if value is None:
        raise ArgumentTypeError(
            f"variable {what!r}: the size of member {member!r} ([{text}]) is not a "
            f"constant the workbench can evaluate; pass dtype=")
    return value


def _plan(node: _Node, path: str, values: list[str]) -> None:
    """The C expressions the probe reports for ``node`` laid out at ``path``:
    its size and alignment, then each field's offset and size (nested
    structs' own after their field's)."""
    values += [f"sizeof({path})", f"alignof(decltype({path}))"]
    for name, child, shape in node.fields:
        member = f"{path}.{name}"
        values += [offset_of(member, path), f"sizeof({path}.{name})"]
        if isinstance(child, _Node):
            _plan(child, member + "[0]" * len(shape), values)


def _build(node: _Node, measured, what: str) -> np.dtype:
    size, alignment = next(measured), next(measured)
    names, formats, offsets = [], [], []
    for name, child, shape in node.fields:
        offset, nbytes = next(measured), next(measured)
        element = _build(child, measured, what) if isinstance(child, _Node) else child.dtype
        form = np.dtype((element, shape)) if shape else element
        if form.itemsize != nbytes:
            raise ArgumentTypeError(
                f"variable {what!r}: member {node.name}::{name} has {nbytes} bytes as "
                f"compiled, but the workbench reads its type as {form} "
                f"({form.itemsize} bytes); pass dtype=")
        names.append(name)
        formats.append(form)
        offsets.append(offset)
    spec = {"names": names, "formats": formats, "offsets": offsets, "itemsize": size}
    try:
        dtype = np.dtype(spec, align=True)  # the struct's alignment, as far as its fields state it
    except ValueError:  # a packed struct: fields at offsets their types do not align
        dtype = np.dtype(spec)
    if alignment % max(dtype.alignment, 1):
        raise ArgumentTypeError(
            f"variable {what!r}: struct {node.name} is aligned to {alignment} bytes, "
            f"which its fields' dtypes cannot state; pass dtype=")
    return dtype


_DIM_WORD = re.compile(r"[A-Za-z_]\w*")
_INT_SUFFIX = re.compile(r"(?<=\d)[uUlL]+\b")


def evaluate_dim(text: str, macros) -> int | None:
    """An array dimension (``16``, ``N * 4`` with ``#define N 8``) as an int, or None."""
    for _ in range(16):  # expand object-like macros, nested ones too
        expanded = _DIM_WORD.sub(lambda m: f"({macros[m.group()]})" if m.group() in macros
                                 else m.group(), text)
        if expanded == text:
            break
        text = expanded
    text = _INT_SUFFIX.sub("", text).replace("/", "//")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)):
        return None
    try:
        value = eval(text, {"__builtins__": {}})  # noqa: S307 -- checked above: arithmetic only
    except Exception:
        return None
    return value if isinstance(value, int) and value >= 0 else None


# -- values -------------------------------------------------------------------------------------

def value_array(value, dtype: np.dtype, shape: tuple | None, what: str) -> np.ndarray:
    """``value`` as a C-contiguous array of ``dtype`` holding the whole
    variable (``shape``; None: as given), or an error that says what is short."""
    if dtype.names:
        data = _struct_value(value, dtype, shape if shape is not None else np.shape(value), what)
    else:
        data = np.ascontiguousarray(np.asarray(value, dtype=dtype))
    if shape is not None:
        size = int(np.prod(shape))
        if data.size != size:
            plural = "s" if size != 1 else ""
            hint = ("; give every element (read it with get_global, change what you want and set "
                    "it whole)" if data.size < size else "")
            raise ArgumentValueError(
                f"variable {what!r} holds {size} element{plural} of {_name(dtype)}; "
                f"the value has {data.size}{hint}")
    return data


def _name(dtype: np.dtype) -> str:
    return f"struct ({', '.join(dtype.names)})" if dtype.names else str(dtype)


def _struct_value(value, dtype: np.dtype, shape, what: str) -> np.ndarray:
    """A structured value from a dict, a NumPy structured value or a list of
    them (an array of structs), field by field and by name."""
    out = np.zeros(shape, dtype)
    _fill(out, value, dtype, what)
    return out


def _fill(out: np.ndarray, value, dtype: np.dtype, what: str) -> None:
    if isinstance(value, dict) or (isinstance(value, (np.void, np.ndarray))
                                   and value.dtype.names and out.ndim == np.ndim(value)):
        names = list(value.keys()) if isinstance(value, dict) else list(value.dtype.names)
        missing = [n for n in dtype.names if n not in names]
        extra = [n for n in names if n not in dtype.names]
        if extra:
            raise ArgumentValueError(f"{what}: the struct has no field {extra[0]!r} (its fields: "
                                     f"{', '.join(dtype.names)})")
        if missing:
            raise ArgumentValueError(
                f"{what}: the value lacks field{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}; a struct is written whole (read it with "
                f"get_global, change fields and set it back)")
        if isinstance(value, np.ndarray) and value.shape != out.shape:
            raise ArgumentValueError(
                f"{what} holds {out.size} struct{'s' if out.size != 1 else ''}; the "
                f"value has {value.size}")
        for name in dtype.names:
            sub = dtype.fields[name][0]
            target = out[name]
            base = sub.base if sub.shape else sub
            if base.names:
                _fill(target, value[name], base, f"{what}.{name}")
            else:
                given = np.asarray(value[name])
                if given.shape != target.shape:
                    raise ArgumentValueError(
                        f"{what}.{name} holds {target.size} element"
                        f"{'s' if target.size != 1 else ''}; the value has {given.size}")
                target[...] = given
        return
    if isinstance(value, (list, tuple)) and out.ndim:
        if len(value) != out.shape[0]:
            raise ArgumentValueError(
                f"{what} holds {out.shape[0]} struct{'s' if out.shape[0] != 1 else ''}"
                f" along its first dimension; the value has {len(value)}")
        for i, item in enumerate(value):
            _fill(out[i, ...], item, dtype, f"{what}[{i}]")  # (a view: out[i] would be a copy)
        return
    raise ArgumentTypeError(
        f"{what} is a struct: give a dict of its fields ({', '.join(dtype.names)}) "
        f"or a NumPy structured value with them, got {type(value).__name__}")


__all__ = ["evaluate_dim", "value_array", "variable_dtype"]
