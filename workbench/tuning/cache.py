"""The tuning cache, and ``wb.tuned``: a kernel run with its stored best configuration.

One JSON document per device, backend, kernel source (its hash), kernel
name and problem size, in the workbench's cache folder (``DiskCache
("tuning")``, :mod:`workbench.cache`): the latest best configuration, and
each tune's full result under a key of its space, objectives, strategy,
budget and seed (so the same tune asked again is answered from the cache).
"""
from __future__ import annotations

import hashlib
import inspect
import json

from ..benchmarking.engine import device_name
from ..cache import DiskCache
from ..core.kernel import Kernel, KernelTemplate
from ..present.tables import plain_value
from ..runtime.session import backend as active_backend
from ..errors import TuneError
from .arguments import kernel_source, problem_size_of
from .result import OBJECTIVES, objective_text
from .task import Task, compile_config, launch_options

_cache = DiskCache("tuning")
_LAYOUT = 2


def _hash(value) -> str:
    text = json.dumps(value, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def key(*, device: str, backend: str, source: str, kernel: str, problem_size) -> str:
    """The cache document of a kernel on a device at a problem size (inside
    it, tunes and best configurations are told apart by :func:`variant`)."""
    return _hash({"device": device, "backend": backend, "kernel": kernel,
                  "source": hashlib.sha256(source.encode("utf-8")).hexdigest(),
                  "problem_size": plain_value(problem_size)})


def compile_variant(options: dict | None) -> dict:
    """The compile options that change the kernel, with the compiler's
    defaults filled in (a source tuned as text and a Kernel compiled with
    default options are the same kernel)."""
    options = dict(options or {})
    return {"std": options.get("std"), "fast_math": bool(options.get("fast_math", False)),
            "arch": options.get("arch"), "options": [str(o) for o in options.get("options") or ()]}


def variant(defines, compile_options) -> str:
    """The fixed defines (in any order) and compile options of a tune: a best
    configuration found with ``-D SHIFT=0`` says nothing about ``SHIFT=5``."""
    return _hash({"defines": sorted(str(d) for d in defines),
                  "options": compile_variant(compile_options)})


def describe(value):
    """``(text, ok)``: what a tune's input contributes to the run key. A
    function is its qualified name, source and captured values; ``ok`` is
    False when its source cannot be read (then no stored tune can be said to
    be the same)."""
    if not callable(value):
        return repr(value), True
    try:
        source = inspect.getsource(value)
    except (OSError, TypeError):
        return f"function {getattr(value, '__qualname__', type(value).__name__)}", False
    cells = [repr(getattr(c, "cell_contents", None))[:200]
             for c in (getattr(value, "__closure__", None) or ())]
    return {"function": getattr(value, "__qualname__", type(value).__name__),
            "source": hashlib.sha256(source.encode("utf-8")).hexdigest(),
            "defaults": repr(getattr(value, "__defaults__", None))[:200], "cells": cells}, True


def run_key(space, objectives, strategy, budget, seed, *, variant: str, inputs: dict):
    """What makes two tunes of the same kernel the same tune: ``(key, None)``,
    or ``(None, why)`` when an input (a function) cannot be compared."""
    described, unreadable = {}, []
    for name, value in inputs.items():
        described[name], ok = describe(value)
        if not ok:
            unreadable.append(f"{name}= ({described[name]})")
    if unreadable:
        return None, (f"not read from the tuning cache: the source of {', '.join(unreadable)} "
                      "cannot be read, so a stored tune cannot be known to be the same")
    return _hash({"space": {k: [repr(v) for v in vs] for k, vs in space.params.items()},
                  "restrictions": [r.text for r in space.restrictions],
                  "objectives": list(objectives), "strategy": strategy, "budget": budget,
                  "seed": plain_value(seed), "variant": variant, "inputs": described}), None


def _entry(cache_key: str) -> dict:
    entry = _cache.get_json(cache_key) or {}
    if entry.get("layout") != _LAYOUT:  # written before bests were kept per variant: start over
        entry = {"layout": _LAYOUT, "runs": {}, "variants": {}}
    return entry


def load(cache_key: str, run: str) -> dict | None:
    """The stored result of tune ``run``, or None."""
    return _entry(cache_key)["runs"].get(run)


def best_entries(cache_key: str) -> dict:
    """``{variant: {objective: entry}}``: the best configurations stored under
    ``cache_key``, each found by a tune that checked every configuration."""
    return _entry(cache_key)["variants"]


def _better(objective: str, new: float, old: float) -> bool:
    return new > old if OBJECTIVES[objective][1] == "maximize" else new < old


def store(cache_key: str, run: str | None, result, *, when: str, variant: str,
          tuned_defines=()) -> bool:
    """Keep ``result`` (a TuneResult) as tune ``run``; its best configuration of
    each objective replaces the stored one only when it was checked against
    a reference and is better, or comes from the same tune measured again."""
    entry = _entry(cache_key)
    if run is not None:
        entry["runs"][run] = result.to_dict()
    bests = entry["variants"].setdefault(variant, {})
    if result.checked:
        for objective in result.objectives:
            column, direction, _ = OBJECTIVES[objective]
            ok = [r for r in result.ok_rows() if r.get(column) is not None]
            if not ok:
                continue
            row = (max if direction == "maximize" else min)(ok, key=lambda r: r[column])
            value = float(row[column])
            old = bests.get(objective)
            if old is not None and not (run is not None and old.get("run") == run) \
                    and not _better(objective, value, old["value"]):
                continue
            bests[objective] = {
                "config": {k: plain_value(v) for k, v in row["config"].items()},
                "kinds": dict(result.params), "tuned_defines": sorted(tuned_defines),
                "objective": objective, "value": value,
                "value_text": objective_text(objective, value), "when": when, "run": run,
                "strategy": result.strategy, "budget": result.budget}
    return _cache.put_json(cache_key, entry)


def clear() -> int:
    """Forget every stored tune; returns the number of files removed."""
    return _cache.clear()


class TunedKernel:
    """A kernel that runs with its best stored configuration (see :func:`tuned`).

    Call it like the kernel: ``tk(*args, grid=..., n=...)``, where ``grid``
    (and ``n``, ``shared_mem``) may be functions of the configuration, as in
    :func:`~workbench.tune`. The first call for a problem size prints one
    line saying whether the tuned configuration was used, and for which
    objective; :attr:`note` and :attr:`config` say the same afterwards.
    """

    def __init__(self, kernel, *, kernel_name: str | None = None, problem_size=None,
                 block=None, objective: str | None = None, verbose: bool = True):
        if objective is not None and objective not in OBJECTIVES:
            raise TuneError(f"objective={objective!r}: choose from {', '.join(OBJECTIVES)}")
        self._source, self.name, self._template_params, options = \
            kernel_source(kernel, kernel_name)
        self._kernel = kernel if isinstance(kernel, (Kernel, KernelTemplate)) else None
        self._defines = tuple(options.pop("defines", ()))
        options.pop("constants", None)   # read from the kernel's module at each call
        self._options = options
        self.problem_size = problem_size
        self.block = block
        self.objective = objective
        self.verbose = verbose
        self.config: dict | None = None
        self.note = "not called yet"
        self._said: set = set()
        self._found: dict = {}   # (device, backend, problem size) -> (entry, kernel) or None

    def _size(self, args):
        return self.problem_size if self.problem_size is not None else problem_size_of(args)

    def lookup(self, args=()) -> dict | None:
        """The stored best entry for ``args``' problem size (or the fixed one)
        whose fixed defines and compile options are this kernel's own."""
        b = active_backend()
        found = self._found_for(b, self._size(args))
        return found[0] if found else None

    def _found_for(self, b, size):
        memo = (device_name(b), b.name, repr(plain_value(size)))
        if memo in self._found:
            return self._found[memo]
        variants = best_entries(key(device=memo[0], backend=memo[1], source=self._source,
                                    kernel=self.name, problem_size=size))
        entry = None
        for stored_variant, bests in variants.items():
            for candidate in _by_preference(bests, self.objective):
                tuned_names = set(candidate.get("tuned_defines") or ()) | set(candidate["config"])
                own = [d for d in self._defines if d.split("=", 1)[0] not in tuned_names]
                if variant(own, self._options) == stored_variant:
                    entry = candidate
            if entry is not None:
                break
        found = None
        if entry is not None:
            config = entry["config"]
            own = tuple(d for d in self._defines
                        if d.split("=", 1)[0] not in set(config))
            task = Task(source=self._source, kernel=self.name,
                        template_params=self._template_params, config=config,
                        kinds=entry["kinds"], defines=own, compile_options=dict(self._options))
            kernel, reason, _ = compile_config(task)
            if kernel is None:
                raise TuneError(f"the tuned configuration of {self.name} "
                                f"({', '.join(f'{k}={v}' for k, v in config.items())}) no longer "
                                f"compiles ({reason}); tune it again with wb.tune(..., "
                                "cache='refresh'), or clear the tuning cache "
                                "(workbench.tuning.cache.clear())")
            found = (entry, kernel)
        self._found[memo] = found
        return found

    def __call__(self, *args, grid=None, n=None, shared_mem=0, stream=None):
        b = active_backend()
        size = self._size(args)
        found = self._found_for(b, size)
        if found is not None:
            entry, kernel = found
            config = entry["config"]
            self.config = dict(config)
            self.note = (f"tuned configuration used: "
                         f"{', '.join(f'{k}={v}' for k, v in config.items())} "
                         f"(best {entry['objective']}: {entry.get('value_text')}; tuned "
                         f"{entry.get('when', '?')}, {entry.get('strategy')})")
            task = Task(source=self._source, kernel=self.name, template_params=(),
                        config=config, kinds=entry["kinds"], grid=grid, block=self.block, n=n,
                        shared_mem=shared_mem)
        else:
            if self._kernel is None or isinstance(self._kernel, KernelTemplate):
                raise TuneError(f"no tuned configuration of {self.name} for this device, "
                                f"problem size {size} and its defines/compile options; run "
                                "wb.tune(...) first with the same arguments (or give "
                                "problem_size= as the tune did)")
            kernel, self.config = self._kernel, None
            task = Task(source=self._source, kernel=self.name, template_params=(), config={},
                        kinds={}, grid=grid, block=self.block, n=n, shared_mem=shared_mem)
            self.note = ("no tuned configuration for this device, problem size, defines and "
                         "compile options: default used")
        launch = launch_options(task)
        if found is not None and self._kernel is not None:
            # the values the kernel's module was given (set_global) reach the tuned compile
            own = getattr(getattr(self._kernel, "module", None), "assigned", None) or {}
            for variable, value in own.items():
                kernel.module.set_global(variable, value, dtype=value.dtype)
        if stream is not None:
            launch["stream"] = stream
        said = (self.config is None, repr(self.config))
        if self.verbose and said not in self._said:
            self._said.add(said)
            print(f"wb.tuned: {self.name}: " + (
                f"tuned configuration used ({', '.join(f'{k}={v}' for k, v in self.config.items())}"
                f"), the best {found[0]['objective']}" if self.config is not None else self.note))
        return kernel(*args, **launch)

    def __repr__(self) -> str:
        return f"<TunedKernel {self.name}: {self.note}>"


def _by_preference(bests: dict, objective: str | None) -> list:
    """The stored bests to use: the one of ``objective``, else time's, else any."""
    if objective is not None:
        return [bests[objective]] if objective in bests else []
    order = ["time"] + [o for o in OBJECTIVES if o != "time"]
    return [bests[o] for o in order if o in bests][:1]


def tuned(kernel, *, kernel_name: str | None = None, problem_size=None, block=None,
          objective: str | None = None, verbose: bool = True) -> TunedKernel:
    """``kernel`` run with the best configuration :func:`~workbench.tune`
    stored for this device and problem size (the arguments' shapes and
    scalars, or ``problem_size=`` as given to the tune): its defines and
    template arguments compiled in, its block size launched. Without a stored
    configuration a Kernel runs as it is. Each call says in one printed line
    (once per configuration) whether a tuned configuration was used.

    Only a configuration tuned with this kernel's own fixed defines and
    compile options is used, and only one that every configuration of its
    tune was checked against a reference; ``objective`` picks whose best
    (default: time's, else the one stored)."""
    return TunedKernel(kernel, kernel_name=kernel_name, problem_size=problem_size, block=block,
                       objective=objective, verbose=verbose)

