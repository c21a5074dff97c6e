"""Checking a benchmarked call's output against a reference before timing it."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentValueError, WorkbenchError
from ..runtime.session import backend


class ResultMismatch(WorkbenchError, AssertionError):
    """A benchmarked function computed something other than the reference."""


#: Default (rtol, atol) by dtype kind/size when the caller gives none.
_DEFAULT_TOLERANCE = {2: (1e-2, 1e-2), 4: (1e-4, 1e-5), 8: (1e-7, 1e-9)}


def to_numpy(value) -> np.ndarray:
    """A NumPy version of a device array of the active backend (or of anything
    NumPy takes)."""
    if isinstance(value, np.ndarray):
        return value
    b = backend()
    if b.is_device_array(value):
        return np.asarray(b.to_host(value))
    if hasattr(value, "get") and not isinstance(value, dict):  # a CuPy array of another device
        value = value.get()
    return np.asarray(value)


def default_tolerance(dtype) -> tuple[float, float]:
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0, 0.0
    return _DEFAULT_TOLERANCE.get(dtype.itemsize if dtype.kind == "f" else dtype.itemsize // 2,
                                  (1e-4, 1e-5))


def select_output(returned, args: tuple, output) -> Any:
    """What the call produced: its return value, or ``args[output]`` when
    ``output`` is an int (kernels write into an argument and return None),
    or ``output`` itself when it is an array."""
    if output is None:
        return returned
    if isinstance(output, (int, np.integer)) and not isinstance(output, bool):
        try:
            return args[output]
        except IndexError:
            raise ArgumentValueError(
                f"output={output} but the call has only {len(args)} positional "
                "arguments; give the index of the argument that holds the result") from None
    return output


def compare_arrays(actual, expected, *, rtol: float | None, atol: float | None,
                   what: str) -> None:
    """Raise :class:`ResultMismatch` unless ``actual`` matches ``expected``
    within ``|a - e| <= atol + rtol * |e|`` (NaNs must match NaNs)."""
    if actual is None:
        raise ResultMismatch(
            f"{what} returned None, so there is nothing to check; pass output=<index of the "
            "argument the kernel writes> (or output=<the array>) to check an argument instead")
    a = to_numpy(actual)
    e = to_numpy(expected)
    if a.shape != e.shape and e.size != 1:
        raise ResultMismatch(f"{what}: result has shape {a.shape}, the reference {e.shape}")
    # the precision of what was computed sets the tolerance (a float32 kernel
    # checked against a float64 reference gets float32's)
    default_r, default_a = default_tolerance(a.dtype if a.dtype.kind in "fc" else e.dtype)
    rtol = default_r if rtol is None else rtol
    atol = default_a if atol is None else atol
    if _all_close_real(a, e, rtol, atol):
        return
    if a.dtype.kind in "fc" or e.dtype.kind in "fc":
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = a == e
    if np.all(close):
        return
    bad = np.flatnonzero(~np.broadcast_to(close, a.shape))
    first = np.unravel_index(bad[0], a.shape) if a.ndim else ()
    e_b = np.broadcast_to(e, a.shape)
    diff = np.abs(a.astype(np.float64) - e_b.astype(np.float64)) if a.dtype.kind != "c" else np.abs(a - e_b)
    largest = np.nanmax(diff) if not np.all(np.isnan(diff)) else np.nan  # NaN where nothing was written
    raise ResultMismatch(
        f"{what}: {bad.size} of {a.size} elements differ from the reference beyond "
        f"rtol={rtol:g}, atol={atol:g}; largest difference {largest:.6g}; first at "
        f"index {tuple(int(i) for i in first)}: got {_scalar(a[first])}, expected {_scalar(e_b[first])}. "
        "Fix the kernel, or pass rtol=/atol= if the difference is rounding.")


#: Elements compared at a time by the fast path (a few MB of float64: in cache).
_CHUNK = 1 << 18


def _all_close_real(a, e, rtol: float, atol: float) -> bool:
    """True when every element of real arrays ``a`` and ``e`` (same shape)
    is within ``atol + rtol * |e|`` or both are NaN, computed in float64 a
    chunk at a time (several times faster than ``np.isclose`` on large
    outputs, a tune checks one per configuration). False means: look closer."""
    kinds = a.dtype.kind + e.dtype.kind
    if a.shape != e.shape or "f" not in kinds or any(k not in "fiub" for k in kinds) \
            or a.size < _CHUNK:
        return False   # integers are compared exactly, complex numbers by np.isclose
    af, ef = a.reshape(-1), e.reshape(-1)
    for start in range(0, af.size, _CHUNK):
        x = af[start:start + _CHUNK].astype(np.float64)
        y = ef[start:start + _CHUNK].astype(np.float64, copy=False)
        with np.errstate(invalid="ignore"):
            ok = np.abs(x - y) <= atol + rtol * np.abs(y)
        if not ok.all() and not (ok | (np.isnan(x) & np.isnan(y))).all():
            return False
    return True


def _scalar(value) -> str:
    return repr(value.item()) if hasattr(value, "item") else repr(value)


def run_check(check, produced, *, rtol, atol, what: str) -> None:
    """Apply ``check`` to what a call produced.

    ``check`` is the expected array, or a callable taking the produced value
    and returning the expected array, or True/None (passed) or False (failed).
    """
    if check is None:
        return
    if callable(check):
        expected = check(to_numpy(produced) if produced is not None else None)
        if expected is None or expected is True:
            return
        if expected is False:
            raise ResultMismatch(f"{what}: the check function returned False for its result")
        compare_arrays(produced, expected, rtol=rtol, atol=atol, what=what)
    else:
        compare_arrays(produced, check, rtol=rtol, atol=atol, what=what)

