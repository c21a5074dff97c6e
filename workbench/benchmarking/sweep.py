"""``wb.sweep``: time a function over sizes or any parameter grid."""
from __future__ import annotations

import inspect
import itertools
import uuid
from typing import Any, Callable, Mapping, Sequence

from ..core.adapters import as_launchable
from ..errors import ArgumentTypeError, ArgumentValueError
from ..present.frames import readable
from ..present.tables import pandas
from ..runtime.session import backend as active_backend
from . import ceilings as ceilings_module, history
from .distributed import Pool
from .engine import Plan, default_name, measure
from .points import measure_point, per_point, point_call
from .result import SUMMARY_COLUMNS

#: Options of :func:`workbench.bench` that a sweep passes on: those of the
#: :class:`~workbench.benchmarking.engine.Plan`, then those of the check.
PLAN_OPTIONS = ("repeat", "max_time", "min_repeat", "max_repeat", "warmup", "warmup_time",
                "flush_l2")
CHECK_OPTIONS = ("rtol", "atol", "output")
BENCH_OPTIONS = PLAN_OPTIONS + CHECK_OPTIONS


class SweepRun:
    """A sweep in progress or finished: its points so far (for the panel)."""

    def __init__(self, sweep_id: str, names: list[str], param_names: list[str],
                 total: int, ceilings):
        self.id = sweep_id
        self.names = names
        self.param_names = param_names
        self.total = total
        self.ceilings = ceilings
        self.results: list = []
        self.finished = False
        self.error = ""           # why it stopped early ("" when it ran every point)

    def table(self):
        """The points measured so far as a DataFrame, one row per point."""
        rows = [r.summary(self.ceilings) for r in self.results]
        df = pandas().DataFrame(rows)
        df.attrs.update(self.attrs())
        return df

    def attrs(self) -> dict[str, Any]:
        """What the table's ``attrs`` hold: sweep id, parameters, device, ceilings."""
        first = self.results[0] if self.results else None
        return {"sweep": self.id, "params": list(self.param_names),
                "simulated": bool(first.simulated) if first else None,
                "backend": first.backend if first else None,
                "device": first.device if first else None,
                "ceilings": self.ceilings.to_dict() if self.ceilings is not None else None}

    def __repr__(self):
        state = ("stopped" if self.error else "finished") if self.finished else "running"
        return f"<SweepRun {self.id} {state}: {len(self.results)}/{self.total} points>"


def sweep(fn: Callable | Mapping[str, Callable], sizes: Sequence | None = None, *,
          params: Mapping[str, Sequence] | None = None, setup: Callable | None = None,
          check: Callable | None = None, bytes=None, flops=None, name: str | None = None,
          ceilings=True, progress: bool = True, client=None, **bench_options):
    """Time ``fn`` at every point of a grid; one table row per point.

    The grid is ``sizes`` (a parameter named ``size``) crossed with every
    list in ``params`` (for example ``{"block": [64, 128, 256]}``). At each
    point (a dict such as ``{"size": 4096, "block": 128}``):

    - ``setup(**point)``, when given, prepares the inputs outside the timed
      region and returns the arguments of ``fn``: a tuple (positional), a
      dict (keywords) or a single value; then ``fn(*inputs)`` is timed.
    - without ``setup``, ``fn(**point)`` itself is timed.

    ``fn`` may be a dict ``{label: callable}`` to sweep several variants over
    the same points and inputs (the ``name`` column tells them apart).

    ``check(*inputs)`` (optional; ``check(**point)`` without ``setup``)
    returns the expected output for a point's inputs; each variant's first call at each point is compared with it
    (``output=`` says which argument holds the result when ``fn`` returns
    nothing). ``bytes`` and ``flops`` are numbers per call or functions of the
    point (``bytes=lambda size: 8 * size``); they add GB/s and GFLOP/s
    columns and, with ``ceilings`` (True: this device's measured ceilings,
    measured now once if needed and cached; False: none; or a
    :class:`~workbench.benchmarking.ceilings.Ceilings`), the percentages of them.

    Other keywords (``repeat``, ``max_time``, ``flush_l2``, ...) go to
    :func:`workbench.bench`. A ``tqdm`` progress bar shows unless
    ``progress=False``.

    ``client``: a ``dask.distributed.Client`` to spread the points over its
    workers (each point's ``setup``, check and measurement run on one worker,
    on that worker's backend; see :mod:`~workbench.benchmarking.distributed`).
    ``fn``, ``setup`` and ``check`` travel by pickle: kernels are compiled
    again on the workers. The rows come back as the points finish and the
    table lists them in the grid's order, as without a client.

    Returns a pandas DataFrame with a ``name`` column, one column per
    parameter, the statistics in seconds (``median_s``, ``q1_s``, ...),
    ``gbps``/``gflops`` and ``simulated``; ``df.attrs`` holds the sweep id,
    device and ceilings. A notebook shows it for reading (each time column in
    µs or ms, columns with no value left out: :mod:`workbench.present.frames`);
    ``df.to_pandas()`` is the plain DataFrame.
    """
    variants = _variants(fn, name)
    points = _points(sizes, params)
    unknown = set(bench_options) - set(BENCH_OPTIONS)
    if unknown:
        raise ArgumentTypeError(
            f"sweep() got unexpected keyword(s) {sorted(unknown)}; it passes on "
            f"only {', '.join(BENCH_OPTIONS)} to wb.bench")
    for value, what in ((setup, "setup"), (bytes, "bytes"), (flops, "flops")):
        _check_takes_point(value, points[0], what)  # before any measuring, ceilings included
    plan = Plan(**{k: v for k, v in bench_options.items() if k in PLAN_OPTIONS})
    check_options = {k: bench_options.get(k) for k in CHECK_OPTIONS}
    roof = _resolve_ceilings(ceilings, bytes, flops)
    b = active_backend()
    # what each point's result shows as "% of ceiling": the device's ceilings
    # if known by now (measured above when ceilings=True), looked up once
    result_ceilings = (ceilings_module.for_results(b)
                       if bytes is not None or flops is not None else None)

    param_names = list(points[0])
    run = SweepRun(uuid.uuid4().hex[:8], [v for v, _ in variants], param_names,
                   len(points) * len(variants), roof)
    history.start_sweep(run)
    bar = _progress_bar(run.total, enabled=progress)
    try:
        if client is not None:
            _sweep_on_cluster(client, run, variants, points, setup, check, plan, check_options,
                              bytes, flops, result_ceilings, bar)
            return readable(run.table(), hide_empty=True)
        for point in points:
            inputs_args, call_kwargs, expected = point_call(setup, check, point)
            for label, variant in variants:
                result = measure(
                    b, variant, [inputs_args], call_kwargs, name=label, plan=plan,
                    check=expected, bytes=per_point(bytes, point, "bytes"),
                    flops=per_point(flops, point, "flops"), params=point, sweep=run.id,
                    ceilings=result_ceilings, **check_options)
                run.results.append(result)
                history.sweep_updated(run)
                if bar is not None:
                    bar.set_postfix_str(f"{label} {_point_text(point)}", refresh=False)
                    bar.update(1)
    except BaseException as exc:
        text = str(exc).strip()
        run.error = (f"{type(exc).__name__}: {text}" if text else type(exc).__name__).splitlines()[0]
        raise
    finally:
        run.finished = True
        if bar is not None:
            bar.close()
        history.sweep_finished(run)
    return readable(run.table(), hide_empty=True)


def _sweep_on_cluster(client, run, variants, points, setup, check, plan, check_options,
                      bytes, flops, result_ceilings, bar) -> None:
    """The sweep's points measured on a Dask cluster's workers, appended to
    ``run`` as they finish, then put in the grid's order."""
    pool = Pool(client)
    tags = iter(range(len(points) * len(variants)))
    for point in points:
        for label, variant in variants:
            pool.submit(measure_point, variant, setup, check, point, label, plan, check_options,
                        bytes, flops, run.id, tag=next(tags))
    done: dict[int, Any] = {}
    try:
        for index, result, error in pool.as_completed():
            if error is not None:
                raise error
            result.ceilings = result_ceilings
            history.record_result(result)
            done[index] = result
            run.results.append(result)
            history.sweep_updated(run)
            if bar is not None:
                bar.set_postfix_str(f"{result.name} {_point_text(result.params)}", refresh=False)
                bar.update(1)
    except BaseException:
        pool.cancel()
        raise
    run.results[:] = [done[i] for i in sorted(done)]


def _variants(fn, name) -> list[tuple[str, Callable]]:
    if isinstance(fn, Mapping):
        if not fn:
            raise ArgumentValueError(
                "sweep() got an empty dict of variants; give {label: callable, ...}")
        if name is not None:
            raise ArgumentValueError("name= labels a single function; with a dict of variants the "
                                     "dict's keys are the labels")
        out = [(str(k), as_launchable(v)) for k, v in fn.items()]
    else:
        fn = as_launchable(fn)  # a Numba or Triton kernel: the workbench's wrapper
        out = [(name or default_name(fn), fn)]
    for label, f in out:
        if not callable(f):
            raise ArgumentTypeError(
                f"sweep() variant {label!r} is {type(f).__name__}, not a callable")
    return out


def _points(sizes, params) -> list[dict[str, Any]]:
    axes: list[tuple[str, list]] = []
    if sizes is not None:
        axes.append(("size", _as_list(sizes, "sizes")))
    for key, values in (params or {}).items():
        if key == "size" and sizes is not None:
            raise ArgumentValueError("'size' is given both as sizes= and in params=; use one")
        if str(key) in SUMMARY_COLUMNS:
            raise ArgumentValueError(
                f"params={{{str(key)!r}: ...}}: {str(key)!r} is a column of the sweep's "
                "table already (the table also has "
                f"{', '.join(c for c in SUMMARY_COLUMNS if c != str(key))}); "
                f"rename the parameter, e.g. to 'param_{key}'")
        axes.append((str(key), _as_list(values, f"params[{key!r}]")))
    if not axes:
        raise ArgumentValueError(
            "sweep() needs sizes=[...] or params={'name': [values...]} to know "
            "which points to time")
    names = [a for a, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]


def _as_list(values, what: str) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentValueError(f"{what} must be a list of values, got {values!r}")
    out = list(values)
    if not out:
        raise ArgumentValueError(f"{what} is empty; give at least one value")
    return out


def _check_takes_point(value, point, what: str) -> None:
    """Raise a TypeError that says how ``what=`` is called when ``value``
    cannot take the point's parameters as keywords."""
    if value is None or not callable(value):
        return
    try:
        inspect.signature(value).bind(**point)
    except TypeError:
        call = ", ".join(f"{k}=..." for k in point)
        raise ArgumentTypeError(f"{what}= is called with the point's parameters as keywords, "
                                f"{what}({call}); write it as lambda {', '.join(point)}: ... "
                                "(or lambda **point: ...)") from None
    except ValueError:   # no signature to read (some builtins): the call itself will tell
        pass


def _resolve_ceilings(ceilings, bytes, flops):
    if ceilings is False or ceilings is None or (bytes is None and flops is None):
        return None
    if ceilings is True:
        return ceilings_module.ceilings()
    if not hasattr(ceilings, "copy_gbps"):
        raise ArgumentTypeError(
            "ceilings= takes True (this device's measured ceilings), False, "
            f"or a Ceilings object from wb.ceilings(); got {type(ceilings).__name__}")
    return ceilings


#: Makes a sweep's progress bar: ``factory(total)`` returns an object with
#: tqdm's ``update``, ``set_postfix_str`` and ``close``. The notebook layer sets
#: one whose saved output reads as text (see :func:`set_progress_factory`).
_progress_factory: Callable | None = None


def set_progress_factory(factory: Callable | None) -> None:
    """Use ``factory(total)`` for sweeps' progress bars (None: tqdm)."""
    global _progress_factory
    _progress_factory = factory


def _progress_bar(total: int, *, enabled: bool):
    if not enabled:
        return None
    if _progress_factory is not None:
        return _progress_factory(total)
    from tqdm.auto import tqdm  # lazy: only a sweep with a progress bar needs it
    return tqdm(total=total, desc="sweep", unit="point", leave=False)


def _point_text(point: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())
