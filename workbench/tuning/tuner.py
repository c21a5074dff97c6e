"""``wb.tune``: search a kernel's launch parameters, defines and template arguments."""
from __future__ import annotations

import datetime as _dt
import hashlib
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..benchmarking.checks import default_tolerance, to_numpy
from ..benchmarking.engine import Plan, device_name
from ..cxx import find_globals
from ..cxx.defines import normalise_defines
from ..errors import ArgumentTypeError, TuneError
from ..runtime.session import backend as active_backend
from . import cache as tuning_cache
from .arguments import (as_tuple, check_arguments, constant_values, fit_reference, host_copy,
                        kernel_source, kernel_tuner_grid, objectives_of, output_index,
                        parse_budget, problem_size_of, reference_from_list, signature_of)
from .limits import DeviceLimits
from .result import OBJECTIVES, TuneResult, config_text, objective_text
from .runner import Runner, compile_threads
from .space import Space
from .strategies import ASKED_AHEAD, check_strategy, make_search
from .task import Task, launch_options, strip_output

#: A tune's measuring plan unless told otherwise: short, because a tune
#: measures many configurations and needs their order, not four digits.
TUNE_PLAN = {"max_time": 0.03, "min_repeat": 3, "max_repeat": 200, "warmup": 1,
             "warmup_time": 0.002}
PLAN_OPTIONS = ("repeat", "max_time", "min_repeat", "max_repeat", "warmup", "warmup_time",
                "flush_l2")
#: The budget of an Optuna strategy when none is given.
DEFAULT_BUDGET = 50
#: Asks in a row that bring nothing new (duplicates, restricted) before the
#: search counts the space as exhausted.
_IDLE_ASKS = 200
_REPEATS_BEFORE_FILL = 3

_progress_factory: Callable | None = None
#: The clock of a time budget (a test puts one of its own here).
_clock = time.perf_counter


def set_progress_factory(factory: Callable | None) -> None:
    """Use ``factory(total, label)`` for tunes' progress (None: tqdm). The
    object has tqdm's ``update``, ``set_postfix_str`` and ``close``, and
    may have ``best(values)`` for a live best-so-far chart."""
    global _progress_factory
    _progress_factory = factory


def _progress_bar(total, label: str, enabled: bool):
    if not enabled:
        return None
    if _progress_factory is not None:
        return _progress_factory(total, label)
    from tqdm.auto import tqdm  # lazy: only a tune with a progress bar needs it
    return tqdm(total=total, desc=f"tune {label}", unit="config", leave=False)


def tune(kernel, args: Sequence = (), *, space: Mapping[str, Sequence], restrictions=(),
         kernel_name: str | None = None, grid=None, block=None, n=None, shared_mem=0,
         defines=(), constants: Mapping | None = None, objective="time", bytes=None,
         flops=None, strategy: str | None = None, budget=None, seed=None, reference=None,
         output: int | None = None, rtol: float | None = None, atol: float | None = None,
         client=None, cache=True, problem_size=None, grid_div_x=None, grid_div_y=None,
         grid_div_z=None, progress: bool = True, timeout: float | None = None,
         **bench_options) -> TuneResult:
    """Search ``space`` for the fastest configuration of ``kernel``.

    ``kernel``: a :class:`~workbench.Kernel` (its module's source and
    options are compiled again per configuration, and the module variables
    set with ``set_global`` are set in each), a template's kernels, or CUDA
    C++ source (with ``kernel_name=`` when it has several kernels).
    ``args``: the kernel's arguments (device or NumPy arrays, scalars), copied
    to the host once; each configuration runs on a fresh device copy of them.
    ``constants``: ``{name: value}`` of ``__constant__``/``__device__``
    variables, set in every configuration's module before it runs (Kernel
    Tuner's ``cmem_args``).

    ``space``: ``{name: [values]}``. ``block`` (or ``block_x``/``_y``/``_z``)
    is the launch's block size; Kernel Tuner's ``block_size_x``/``_y``/``_z``
    are the block size and defines at once; a template parameter's name sets
    the template argument; any other name is a ``-D NAME=value`` define.
    ``restrictions``: callables of the configuration or expressions
    (``"TILE * TILE <= block"``, Kernel Tuner's strings as they are).
    ``grid``/``n``/``shared_mem``: fixed, or functions of the configuration
    dict (``grid=lambda c: (N // c["TILE"], N // c["TILE"])``); so may
    ``block`` be, when the space does not tune it. Or, as in Kernel Tuner,
    ``problem_size=`` with ``grid_div_x``/``_y``/``_z`` (see
    :mod:`workbench.tuning.grids`). Configurations beyond the device's limits
    (threads or shared memory per block; registers once compiled) are rows
    with status "restricted", never compiled when it is known before. ``defines``: fixed
    defines besides the tuned ones, as :func:`workbench.compile` takes them
    (a dict ``{"N": 4096}`` or a list of ``"NAME=VALUE"``).

    ``objective``: "time" (the median, default), "gbps" (needs ``bytes=``),
    "gflops" (needs ``flops=``), "energy" (joules per launch from NVML's
    energy counter, where the device reports it), or a list of them: then
    the result's :meth:`~TuneResult.pareto` front. ``bytes``/``flops``:
    per launch, or functions of the configuration.

    ``strategy``: "grid" (exhaustive, in order; no Optuna needed), or an
    Optuna sampler: "tpe", "random", "cmaes", "qmc", "nsga2". Default: grid
    when the budget covers the space, else TPE (NSGA-II for several
    objectives). ``budget``: the number of configurations to run, or a time
    (``"30s"``, ``"2min"``, a ``timedelta``); ``seed`` makes a sampler
    repeatable.

    ``reference``: a function of the NumPy arguments returning the expected
    output (``reference=lambda a, b, c, n: a @ b``), a list with one entry per
    argument whose only non-None entry is the expected output (Kernel Tuner's
    ``answer``), None for the default configuration's output (the first
    values of the space; a tune stops with a TuneError when that output is the
    output argument's initial contents, which would check nothing), or False
    for no check. ``output``: the index of the argument holding the result
    (default: the kernel's only non-const pointer). A configuration is
    measured only after its output matches within ``rtol``/``atol``.

    ``client``: a ``dask.distributed.Client``: configurations are measured
    on workers that declare a ``GPU`` resource and compiled on the others;
    when no worker declares one (as in :func:`~workbench.tuning.local_cluster`
    and ``LocalCUDACluster``), every worker compiles and measures (see
    :mod:`workbench.benchmarking.distributed`). ``timeout`` (with a client):
    seconds one configuration may take from its submission, its compile
    included; one past it is cancelled and recorded with status "timeout".
    ``cache``: True reads and writes the tuning cache (a second identical
    tune returns the stored result), "refresh" measures again, False neither;
    ``problem_size`` keys it (default: the arguments' shapes and scalars).
    Other keywords (``repeat``, ``max_time``, ...) set the measurement as for
    ``wb.bench``.

    Configurations that fail to compile, launch or check are rows with their
    reason, never an exception; what no configuration could get past (the
    arguments, the reference's shape, an unknown constant) raises TuneError.
    Returns a :class:`TuneResult`.
    """
    started, wall_started = _clock(), time.perf_counter()
    unknown = set(bench_options) - set(PLAN_OPTIONS)
    if unknown:
        raise ArgumentTypeError(
            f"tune() got unexpected keyword(s) {sorted(unknown)}; it passes on only "
            f"{', '.join(PLAN_OPTIONS)} to the measurement")
    if timeout is not None and (client is None or not timeout > 0):
        raise TuneError(f"timeout={timeout!r}: give seconds > 0, with client= (a configuration "
                        "running in this process cannot be stopped; on a Dask worker it can)")
    source, name, template_params, compile_options = kernel_source(kernel, kernel_name)
    carried = compile_options.pop("constants", {})
    the_space = Space.make(space, restrictions, template_params)
    allowed = the_space.configurations()
    if not allowed:
        raise TuneError("the restrictions exclude every configuration of the space; loosen "
                        "them or add values")
    objectives = objectives_of(objective, bytes, flops, client)
    tuned = set(the_space.names)
    fixed_defines = tuple(d for d in (*compile_options.pop("defines", ()),
                                         *normalise_defines(defines, what="wb.tune(defines=...)"))
                          if d.split("=", 1)[0] not in tuned)
    b = active_backend()
    host_args = tuple(host_copy(a) for a in args)
    signature = signature_of(source, name, fixed_defines)
    check_arguments(signature, host_args)
    listed = None
    if isinstance(reference, (list, tuple)):
        listed, output = reference_from_list(reference, host_args, output)
    output = output_index(signature, host_args, output, reference)
    module_values = constant_values(source, fixed_defines, {**carried, **dict(constants or {})})
    grid = kernel_tuner_grid(grid, n, problem_size, (grid_div_x, grid_div_y, grid_div_z),
                             the_space.names)
    budget_count, budget_seconds, budget_text = parse_budget(budget)
    n_objectives = len(objectives)
    if strategy is None:
        covers = budget_seconds is None and (budget_count is None or budget_count >= len(allowed))
        strategy = "grid" if covers else ("nsga2" if n_objectives > 1 else "tpe")
    strategy = check_strategy(strategy, n_objectives)
    if budget_count is None and budget_seconds is None and strategy != "grid":
        budget_count = min(DEFAULT_BUDGET, len(allowed))
        budget_text = str(budget_count)
    plan = Plan(**{**TUNE_PLAN, **bench_options})

    size = problem_size if problem_size is not None else problem_size_of(host_args)
    key = tuning_cache.key(device=device_name(b), backend=b.name, source=source, kernel=name,
                           problem_size=size)
    variant = tuning_cache.variant(fixed_defines, compile_options)
    reference_kind = ("function" if callable(reference) else "list" if listed is not None else
                      "none" if reference is False else "default output")
    run_key, cache_note = tuning_cache.run_key(
        the_space, objectives, strategy, budget_text, seed, variant=variant,
        inputs={"reference_kind": reference_kind,
                "reference": reference if callable(reference) else _digest(listed),
                "bytes": bytes, "flops": flops, "rtol": rtol, "atol": atol, "output": output,
                "grid": grid, "block": block, "n": n, "shared_mem": shared_mem, "plan": plan,
                "timeout": timeout, "constants": _digest(module_values),
                "grid_div": [grid_div_x, grid_div_y, grid_div_z]})
    if cache is True and run_key is not None:
        stored = tuning_cache.load(key, run_key)
        if stored is not None:
            return TuneResult.from_dict(stored, from_cache=True)
    elif cache not in (True, False, "refresh"):
        raise TuneError(f"cache={cache!r}: give True, False or 'refresh'")

    tol_dtype = host_args[output].dtype if output is not None and isinstance(
        host_args[output], np.ndarray) else np.dtype(np.float32)
    r_default, a_default = default_tolerance(tol_dtype)
    rtol_used = r_default if rtol is None else rtol
    atol_used = a_default if atol is None else atol
    base = Task(source=source, kernel=name, template_params=template_params, config={},
                kinds={p: the_space.kind(p) for p in the_space.names}, defines=fixed_defines,
                constants=module_values, compile_options=compile_options, args=host_args,
                grid=grid, block=block, n=n, shared_mem=shared_mem, output=output,
                rtol=rtol_used, atol=atol_used, plan=plan, objectives=objectives, bytes=bytes,
                flops=flops)
    reference_text = _set_reference(base, reference, listed, host_args, output)
    limits = DeviceLimits.of(b.device_properties())
    search = make_search(the_space, strategy, [OBJECTIVES[o][1] for o in objectives], seed)
    ahead = compile_threads() if strategy in ASKED_AHEAD else 0
    runner = Runner(client, timeout, compile_ahead=ahead)
    result = TuneResult(kernel=name, params={p: the_space.kind(p) for p in the_space.names},
                        objectives=objectives, strategy=strategy, seed=seed, budget=budget_text,
                        space_size=len(allowed), restricted=the_space.size - len(allowed),
                        backend=b.name, device=device_name(b), simulated=bool(b.simulated),
                        reference=reference_text,
                        tolerance=f"rtol={rtol_used:g}, atol={atol_used:g}",
                        workers=runner.workers, problem_size=size, key=key,
                        note=(cache_note or "") if cache is True else "")
    total = budget_count if budget_count is not None else (
        len(allowed) if budget_seconds is None else None)
    bar = _progress_bar(min(total, len(allowed)) if total else None, name, progress)
    try:
        _search(search, the_space, base, runner, result, limits, budget_count,
                budget_seconds, started, bar)
    finally:
        runner.close()
        if bar is not None:
            bar.close()
    result.rows.sort(key=lambda r: r["index"])
    result.resubmitted = runner.resubmitted
    result.elapsed_s = time.perf_counter() - wall_started
    result.checked = base.output is not None and base.expected is not None
    if cache is not False and result.best is not None:
        tuning_cache.store(key, run_key, result,
                           when=_dt.datetime.now().isoformat(timespec="seconds"),
                           variant=variant,
                           tuned_defines=[p for p in the_space.names
                                          if the_space.kind(p) == "define"])
    return result


def _digest(value):
    """A short text that tells values apart (arrays by a hash of their bytes)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {k: _digest(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{value.shape}:{hashlib.sha256(value.tobytes()).hexdigest()[:16]}"
    return repr(value)


def _set_reference(base: Task, reference, listed, host_args, output) -> str:
    """Give ``base`` its expected output (a function's, a list's) or none;
    returns what the result says it was checked against."""
    if callable(reference) or listed is not None:
        if output is None:
            raise TuneError(f"{base.kernel} writes through no pointer the workbench can see, so "
                            "the reference has nothing to be compared with; say which argument "
                            "holds the result with output=<index>")
        if callable(reference):
            expected = reference(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                                   for a in host_args])
            if expected is None:
                raise TuneError("reference() returned None; return the expected output array")
        else:
            expected = listed
        base.expected = fit_reference(expected, host_args[output], output)
        return (f"reference {getattr(reference, '__name__', 'function')}()" if callable(reference)
                else f"the reference list's entry {output}")
    if reference is None or reference is True:
        if output is None:
            return ("nothing: the kernel writes through no pointer the workbench can see "
                    "(output=<index> names the argument holding the result)")
        return "the default configuration's output"
    if reference is False:
        base.output = None
        return "nothing (reference=False)"
    raise TuneError("reference= takes a function of the arguments returning the expected "
                    "output, a list with the expected output at the output's index (Kernel "
                    "Tuner's answer), None (the default configuration's output) or False "
                    "(no check)")


# -- the search loop --------------------------------------------------------------------------

def _search(search, space: Space, base: Task, runner: Runner, result: TuneResult,
            limits: DeviceLimits, budget_count, budget_seconds, started, bar) -> None:
    seen: dict[tuple, Any] = {}          # key -> objective values (None: failed), or "pending"
    restricted: set = set()
    asked = 0                            # configurations submitted (the budget counts these)
    order = iter(range(1 << 62))         # every row's index, in the order asked
    idle = 0

    def values_of(row):
        return result._values(row) if row["status"] == "ok" else None

    def record(config, row):
        result.rows.append(row)
        seen[space.key(config)] = values_of(row)
        if bar is not None:
            best = result.best_value
            text = (f"best {objective_text(result.objectives[0], best)}" if best is not None
                    else "no configuration ran yet")
            bar.set_postfix_str(text, refresh=False)
            bar.update(1)
            if hasattr(bar, "best"):
                bar.best(result.best_so_far())

    def finish(task, handle, row):
        record(task.config, strip_output(row))
        _tell(search, handle, seen[space.key(task.config)], result.objectives)

    def over_limits(config, handle) -> bool:
        """Record ``config`` as restricted when it breaks the device's limits."""
        why = _limit_of(limits, base.with_config(config, 0))
        if not why:
            return False
        record(config, restricted_row(next(order), config, why))
        search.fail(handle)
        return True

    # The first configuration runs alone: its output is the default reference,
    # and what fails in it for a reason every configuration shares stops the tune.
    default = _first_runnable(space, base, limits)
    search.enqueue(default)
    while True:
        proposal = search.ask()
        if proposal is None:
            return
        handle, config = proposal
        if not space.allowed(config)[0]:
            restricted.add(space.key(config))
            search.fail(handle)
        elif not over_limits(config, handle):
            break
    task = base.with_config(config, next(order))
    task.keep_output = base.output is not None and base.expected is None
    asked += 1
    runner.submit(task, handle)
    for task_done, handle_done, row in runner.finished():
        _stop_on_shared_failure(base, row, task.keep_output)
        if task.keep_output and row.get("output") is not None:
            base.expected = row["output"]
        finish(task_done, handle_done, row)
    if task.keep_output and base.expected is None:
        reason = result.rows[-1]["reason"] if result.rows else "it did not run"
        result.reference = (f"nothing: the default configuration ({config_text(config)}) "
                            f"failed ({reason}), so no configuration was checked")
        base.output = None

    def may_ask() -> bool:
        if budget_seconds is not None and _clock() - started >= budget_seconds:
            return False
        if budget_count is not None and asked >= budget_count:
            return False
        return len(seen) + len(restricted) < space.size and idle < _IDLE_ASKS

    # When a sampler keeps proposing what it has seen (it has converged, or the
    # restrictions reject its picks), an unseen configuration is put in front
    # of it every _REPEATS_BEFORE_FILL asks, in a seeded random order.
    shuffle = np.random.default_rng(result.seed if isinstance(result.seed, int) else None)
    unseen = [space.key(c) for c in shuffle.permutation(np.array(space.configurations(), object))]
    by_key = {space.key(c): c for c in space.configurations()}

    def fill() -> bool:
        while unseen:
            key = unseen.pop()
            if key not in seen:
                search.enqueue(by_key[key])
                return True
        return False

    while True:
        while runner.in_flight() < runner.capacity and may_ask():
            if idle and idle % _REPEATS_BEFORE_FILL == 0 and not fill():
                idle = _IDLE_ASKS
                break
            proposal = search.ask()
            if proposal is None:
                idle = _IDLE_ASKS
                break
            handle, config = proposal
            key = space.key(config)
            ok, why = space.allowed(config)
            if not ok:
                restricted.add(key)
                search.fail(handle)
                idle += 1
                continue
            if key in seen:
                if seen[key] == "pending" or seen[key] is None:
                    search.fail(handle)
                else:
                    _tell(search, handle, seen[key], result.objectives)
                idle += 1
                continue
            idle = 0
            if over_limits(config, handle):
                continue
            seen[key] = "pending"
            runner.submit(base.with_config(config, next(order)), handle)
            asked += 1
        if runner.in_flight() == 0:
            break
        for task, handle, row in runner.finished():
            finish(task, handle, row)


def _limit_of(limits: DeviceLimits, task: Task) -> str:
    """Why ``task``'s launch breaks the device's limits, or "" (also when its
    launch options cannot be computed: the evaluation will say why)."""
    try:
        options = launch_options(task)
    except Exception:  # noqa: BLE001
        return ""
    return limits.before_compile(options)


def _first_runnable(space: Space, base: Task, limits: DeviceLimits) -> dict:
    """The first allowed configuration in grid order within the device's limits."""
    first_reason = ""
    for config in space.configurations():
        why = _limit_of(limits, base.with_config(config, 0))
        if not why:
            return config
        first_reason = first_reason or why
    raise TuneError(f"every allowed configuration breaks the device's limits (the first: "
                    f"{first_reason.removeprefix('device limit: ')}); add smaller values")


def _stop_on_shared_failure(base: Task, row: dict, is_reference_run: bool) -> None:
    """A TuneError for what would fail every configuration alike: arguments the
    kernel refuses, or a default output that cannot serve as a reference."""
    if row["status"] == "launch" and row["reason"].startswith("KernelArgumentError"):
        raise TuneError(f"no configuration of {base.kernel} can run with these arguments: "
                        f"{row['reason'].split(': ', 1)[1]}")
    produced = row.get("output")
    if not is_reference_run or produced is None:
        return
    initial = base.args[base.output]
    if np.array_equal(np.asarray(produced), np.asarray(initial), equal_nan=True):
        what = "all zeros" if not np.any(initial) else "which the kernel left as they were"
        unset = sorted({v.name for v in find_globals(base.source, None)
                        if v.space == "constant"} - set(base.constants))
        hint = (f"If the kernel reads module variables ({', '.join(unset)}), give their values "
                "with constants={name: value} (Kernel Tuner's cmem_args); otherwise p"
                if unset else "P")
        raise TuneError(
            f"the default configuration ({config_text(row['config'])}) left argument "
            f"{base.output} with its initial contents ({what}), so its output cannot serve as the "
            f"reference: every configuration that writes nothing would pass. {hint}ass "
            "reference= a function of the arguments returning the expected output (or Kernel "
            "Tuner's answer list), start the output argument from values the kernel overwrites "
            "(for example np.full(shape, np.nan)), or pass reference=False to tune without a "
            "check")


def restricted_row(index: int, config: dict, reason: str) -> dict:
    """The row of a configuration left out for the device's limits."""
    return {"index": index, "config": dict(config), "status": "restricted", "reason": reason,
            "median_s": None, "min_s": None, "repeats": 0, "gbps": None, "gflops": None,
            "energy_j": None, "compile_s": 0.0, "measure_s": 0.0}


def _tell(search, handle, values, objectives) -> None:
    if values is None:
        search.fail(handle)
        return
    # back to each objective's own direction: Optuna's study knows them
    search.tell(handle, [v if OBJECTIVES[o][1] == "minimize" else -v
                         for v, o in zip(values, objectives)])
