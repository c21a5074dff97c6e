"""A kernel's arguments checked and converted before each launch.

Each parameter gets a converter (:func:`pointer_converter`,
:func:`scalar_converter`) that accepts what the C type takes or raises a
:class:`~workbench.KernelArgumentError` saying what was passed and what to
do; :func:`argument_checker` generates one function that tests the common
cases inline and calls the converters for the rest, and :func:`fast_call`
hands the same tests to the launcher's C call where it has one.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import KernelArgumentError
from .signature import Param


def describe(value) -> str:
    """What a user passed, in words that do not depend on the backend:
    "a float64 device array of shape (4,)", "the int 3"."""
    if isinstance(value, np.ndarray) and type(value) is np.ndarray:
        return f"a {value.dtype} host NumPy array of shape {value.shape}"
    if hasattr(value, "dtype") and hasattr(value, "shape") and np.ndim(value) > 0:
        return f"a {value.dtype} device array of shape {tuple(value.shape)}"
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar ({value!r})"
    return f"the {type(value).__name__} {value!r}"


def pointer_converter(kernel: str, p: Param, backend):
    """A function that accepts a device array for pointer parameter ``p``."""
    expected = p.dtype
    vector = p.vector
    is_device = backend.is_device_array
    where = f"{kernel}(): parameter '{p.name}' ({p.ctype})"

    def accepts(dtype) -> bool:
        if p.pointer_depth > 1:  # T**: an array of device pointers
            return dtype in (np.dtype(np.uint64), np.dtype(np.int64))
        if expected is not None:
            return dtype == expected
        if vector is not None:
            comp, count = vector
            return dtype == comp or dtype.itemsize == comp.itemsize * count and (
                dtype.kind == "V" or (dtype.kind == "c" and comp.kind == "f" and count == 2))
        return True  # a struct or template type we cannot check

    def slow(a):
        if a is None:  # a null pointer, as NULL / nullptr in C++
            return None
        if is_device(a):
            if accepts(a.dtype):
                if a.size > 1 and not a.flags.c_contiguous:
                    raise KernelArgumentError(
                        f"{where} gets the address of the first element only, but this array "
                        f"is a strided view (shape {tuple(a.shape)}, strides {tuple(a.strides)}): "
                        f"the kernel would read the wrong elements. Pass "
                        f"wb.xp.ascontiguousarray(...) of it.")
                return a
            want = (expected if expected is not None else
                    f"{vector[0]} (x{vector[1]}) or a structured dtype" if vector else "uint64 (pointers)")
            raise KernelArgumentError(
                f"{where} takes a device array of {want}, got {describe(a)}. "
                f"Convert it with .astype({getattr(want, 'name', want)!r}) or declare the parameter "
                f"with the matching C type.")
        foreign = backend.foreign_array(a)
        if foreign:
            raise KernelArgumentError(f"{where} got {foreign}.")
        if isinstance(a, np.ndarray):
            raise KernelArgumentError(
                f"{where} needs device memory, got a host NumPy array of shape {a.shape}. "
                f"Copy it first: wb.to_device(array).")
        raise KernelArgumentError(f"{where} is a pointer: pass a device array "
                                  f"(wb.to_device / wb.allocate) or None (a null pointer), "
                                  f"not {describe(a)}.")

    fast_type = backend.device_array_type
    if expected is None or p.pointer_depth > 1 or fast_type is None:
        return slow

    contiguous = contiguous_test(fast_type)

    def convert(a):
        if type(a) is fast_type and a.dtype == expected and contiguous(a):
            return a
        return slow(a)

    return convert


def contiguous_test(array_type):
    """``a -> bool`` for C-contiguity, by the cheapest attribute the type has
    (CuPy's ndarray keeps it as ``_c_contiguous``)."""
    if array_type is not None and hasattr(array_type, "_c_contiguous"):
        return lambda a: a._c_contiguous
    return lambda a: a.flags.c_contiguous


def scalar_converter(kernel: str, p: Param, backend):
    """A function that turns a Python or NumPy scalar into the exact C type."""
    where = f"{kernel}(): parameter '{p.name}' ({p.ctype})"
    dt = p.dtype
    is_device = backend.is_device_array
    if dt is None and p.vector is not None:
        comp, count = p.vector
        vdt = np.dtype([(f, comp) for f in "xyzw"[:count]])

        def convert_vector(a):
            if isinstance(a, np.void) and a.dtype.itemsize == vdt.itemsize:
                return a
            if isinstance(a, (tuple, list)) and len(a) == count:
                return np.array(tuple(a), dtype=vdt)[()]
            raise KernelArgumentError(f"{where} takes a tuple of {count} numbers "
                                      f"(or a NumPy structured scalar), got {describe(a)}.")
        return convert_vector
    if dt is None:  # a struct by value or an unresolved template type
        def convert_opaque(a):
            if isinstance(a, np.generic):
                return a
            raise KernelArgumentError(f"{where}: the workbench does not know C type '{p.base}'; "
                                      f"pass a NumPy scalar (e.g. a structured np.void) with its exact bytes.")
        return convert_opaque

    scalar_type = dt.type
    integer = dt.kind in "iub"
    info = np.iinfo(dt) if dt.kind in "iu" else None

    def _to_float(a):
        """A finite number that the C type cannot hold is an error, not inf."""
        try:
            with np.errstate(over="ignore"):
                value = scalar_type(a)
        except OverflowError:
            value = None
        if value is None or (np.isinf(value) and math.isfinite(a)):
            raise KernelArgumentError(f"{where}: {a!r} does not fit in {p.base} "
                                      f"(largest {np.finfo(dt).max}).")
        return value

    def convert(a):
        t = type(a)
        if t is scalar_type:
            return a
        if t is float:
            if not integer:
                return _to_float(a)
        elif t is int or t is bool or isinstance(a, np.integer):
            if dt.kind == "b":
                if a in (0, 1):
                    return scalar_type(a)
            elif info is None:
                return _to_float(a)
            elif info.min <= a <= info.max:
                return scalar_type(a)
            else:
                raise KernelArgumentError(
                    f"{where}: {a} does not fit in {p.base} (range {info.min}..{info.max}).")
        elif isinstance(a, np.floating):
            if not integer:
                return _to_float(a)
        if t is float or isinstance(a, np.floating):
            raise KernelArgumentError(f"{where} is an integer, got {describe(a)}. "
                                      f"Pass int(value) if truncation is what you want.")
        if is_device(a) or isinstance(a, np.ndarray):
            raise KernelArgumentError(f"{where} is a scalar, got {describe(a)}. "
                                      f"Declare the parameter as {p.base}* to pass an array.")
        raise KernelArgumentError(f"{where} takes a {p.base} number, got {describe(a)}.")

    return convert


def inline_test(p):
    """What a call tests inline for parameter ``p`` before trusting it:
    ``("pointer", dtype)`` (a device array of that dtype), ``("float", low,
    high)`` or ``("int", low, high)`` (a Python number in range); None where
    only its converter decides. The generated checker and the C call
    (``fast_call``) both make these tests."""
    dt = p.dtype
    if dt is None:
        return None
    if p.is_pointer:
        return ("pointer", dt) if p.pointer_depth == 1 else None
    if dt.kind == "f":
        top = float(np.finfo(dt).max)
        return ("float", -top, top)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return ("int", int(info.min), int(info.max))
    return None


def argument_checker(params, converters, backend, exact_numbers: bool = True):
    """One function that checks and converts a whole argument tuple.

    It is generated (as ``collections.namedtuple`` and ``dataclasses`` do)
    so that the common cases -- a Python float for a float parameter, an int
    in range for an integer one, a device array of the right dtype for a
    pointer -- are inline tests with no call; anything else falls back to the
    parameter's full converter, which raises the helpful error. With
    ``exact_numbers=False`` a Python number that passed its range test stays
    as it is (for a launcher that packs numbers into their C types itself)
    instead of becoming a NumPy scalar of the exact type.
    """
    ns: dict = {"array_type": backend.device_array_type}
    fast_contiguous = ns["array_type"] is not None and hasattr(ns["array_type"], "_c_contiguous")
    items = []
    for i, (p, conv) in enumerate(zip(params, converters)):
        a = f"a{i}"
        ns[f"c{i}"] = conv
        test = inline_test(p)
        kind = test[0] if test is not None else None
        if kind == "pointer" and ns["array_type"] is not None:
            ns[f"d{i}"] = test[1]
            contiguous = f" and {a}._c_contiguous" if fast_contiguous else ""
            items.append(f"{a} if type({a}) is array_type and ({a}.dtype is d{i} or {a}.dtype == d{i})"
                         f"{contiguous} else c{i}({a})")
        elif kind in ("float", "int"):
            ns[f"t{i}"] = p.dtype.type
            value = f"t{i}({a})" if exact_numbers else a
            items.append(f"{value} if type({a}) is {kind} and {test[1]!r} <= {a} <= {test[2]!r} "
                         f"else c{i}({a})")
        else:
            items.append(f"c{i}({a})")
    names = ", ".join(f"a{i}" for i in range(len(params)))
    unpack = f"    {names}{',' if len(params) == 1 else ''} = args\n" if params else ""
    src = f"def check(args):\n{unpack}    return [{', '.join(items)}]\n"
    exec(_compiled(src), ns)  # noqa: S102 -- generated from parsed parameter types only
    return ns["check"]


@functools.lru_cache(maxsize=512)
def _compiled(src: str):
    return compile(src, "<workbench argument checker>", "exec")


def fast_call(launcher, params, backend, configs: dict, sess, name: str, symbol):
    """The launcher's whole-call object for this kernel (see
    ``backends/gpu/native/launch.c``), or None where it has none or a parameter
    takes something it does not test. It takes the calls the generated
    checker passes on its inline tests -- a device array of the pointee's
    dtype, a Python float or int in range -- with a configuration already in
    ``configs`` on the current stream, while the log times by CUPTI or is
    paused; it answers NotImplemented for every other call, which then takes
    the Python path (and its errors)."""
    make = getattr(launcher, "fast_call", None)
    array_type = backend.device_array_type
    if make is None or array_type is None:
        return None
    if not hasattr(array_type, "_c_contiguous"):  # (the test a strided view must fail)
        return None
    checks = []
    for p in params:
        test = inline_test(p)
        if test is None or (test[0] == "float" and p.dtype.itemsize < 4):  # (no C half)
            return None
        checks.append((array_type, test[1]) if test[0] == "pointer" else test[1:])
    log = sess.timing_log
    template, slots = log.cupti_record_template(backend, name, "cuda", symbol)
    return make(tuple(checks), configs, sess, log, template, slots)
