"""One point of ``wb.sweep``: its inputs, its reference and its measurement.

The same functions serve a sweep run here (:mod:`.sweep`) and one spread over
a Dask cluster, where :func:`measure_point` runs on a worker
(:mod:`.distributed`).
"""
from __future__ import annotations

from ..errors import ArgumentValueError
from ..runtime.session import backend as active_backend
from .engine import measure


def inputs(setup, point: dict) -> tuple[tuple, dict]:
    """``(positional, keyword)`` arguments that ``setup(**point)`` made (none without setup)."""
    if setup is None:
        return (), {}
    made = setup(**point)
    if isinstance(made, tuple):
        return made, {}
    if isinstance(made, dict):
        return (), made
    return (made,), {}


def point_call(setup, check, point: dict):
    """``(positional inputs, keyword arguments, expected output or None)`` of
    one sweep point: its inputs from ``setup`` (or the point itself) and the
    reference from ``check``."""
    inputs_args, inputs_kwargs = inputs(setup, point)
    expected = None
    if check is not None:
        expected = check(*inputs_args, **inputs_kwargs) if setup is not None else check(**point)
        if expected is None:
            raise ArgumentValueError("check() returned None; it must return the expected "
                                     "output for the point's inputs")
    call_kwargs = dict(inputs_kwargs) if setup is not None else dict(point)
    return inputs_args, call_kwargs, expected


def per_point(value, point: dict, what: str):
    """``value(**point)`` where ``value`` (``bytes=`` or ``flops=``) is a function, else ``value``."""
    if value is None or not callable(value):
        return value
    out = value(**point)
    if out is None:
        raise ArgumentValueError(f"{what}(**point) returned None for {point}; return a number")
    return out


def measure_point(fn, setup, check, point: dict, label: str, plan, check_options: dict,
                  bytes, flops, sweep_id: str):
    """One sweep point on a worker: its inputs made there (``setup``), the
    reference computed there (``check``), then measured on the worker's
    backend. Returns the :class:`~workbench.benchmarking.result.BenchResult`."""
    inputs_args, call_kwargs, expected = point_call(setup, check, point)
    return measure(active_backend(), fn, [inputs_args], call_kwargs, name=label, plan=plan,
                   check=expected, bytes=per_point(bytes, point, "bytes"),
                   flops=per_point(flops, point, "flops"), params=point, sweep=sweep_id,
                   ceilings=None, record=False, **check_options)
