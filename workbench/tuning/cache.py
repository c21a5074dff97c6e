"""The tuning cache, and ``wb.tuned``: a kernel run with its stored best configuration.

One JSON document per device, backend, kernel source (its hash), kernel
name and problem size, in the workbench's cache folder (``DiskCache
("tuning")``, :mod:`workbench.cache`): the latest best configuration, and
each tune's full result under a key of its space, objectives, strategy,
budget and seed (so the same tune asked again is answered from the cache).
"""
from __future__ import annotations

import hashlib
import json

from ..benchmarking.engine import device_name
from ..cache import DiskCache
from ..core.kernel import Kernel, KernelTemplate
from ..present.tables import plain_value
from ..runtime.session import backend as active_backend
from .arguments import host_copy, kernel_source, problem_size_of
from .task import Task, compile_config, launch_options

_cache = DiskCache("tuning")


def _hash(value) -> str:
    text = json.dumps(value, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def key(*, device: str, backend: str, source: str, kernel: str, problem_size) -> str:
    """The cache key of a kernel on a device at a problem size."""
    return _hash({"device": device, "backend": backend, "kernel": kernel,
                  "source": hashlib.sha256(source.encode("utf-8")).hexdigest(),
                  "problem_size": plain_value(problem_size)})


def run_key(space, objectives, strategy, budget, seed, reference) -> str:
    """What makes two tunes of the same kernel the same tune."""
    return _hash({"space": {k: [repr(v) for v in vs] for k, vs in space.params.items()},
                  "restrictions": [r.text for r in space.restrictions],
                  "objectives": list(objectives), "strategy": strategy, "budget": budget,
                  "seed": plain_value(seed), "reference": repr(reference)})


def load(cache_key: str, run: str) -> dict | None:
    """The stored result of tune ``run``, or None."""
    entry = _cache.get_json(cache_key) or {}
    return (entry.get("runs") or {}).get(run)


def best_entry(cache_key: str) -> dict | None:
    """The latest best configuration stored under ``cache_key``, or None."""
    entry = _cache.get_json(cache_key) or {}
    return entry.get("best")


def store(cache_key: str, run: str, result: dict, *, best: dict, when: str, value: str,
          kinds: dict, defines=(), compile_options=None) -> bool:
    entry = _cache.get_json(cache_key) or {}
    runs = entry.get("runs") or {}
    runs[run] = result
    entry.update(runs=runs, best={
        "config": {k: plain_value(v) for k, v in best.items()}, "kinds": dict(kinds),
        "defines": list(defines), "compile_options": dict(compile_options or {}),
        "when": when, "value": value, "strategy": result.get("strategy"),
        "device": result.get("device"), "kernel": result.get("kernel")})
    return _cache.put_json(cache_key, entry)


def clear() -> int:
    """Forget every stored tune; returns the number of files removed."""
    return _cache.clear()


class TunedKernel:
    """A kernel that runs with its best stored configuration (see :func:`tuned`).

    Call it like the kernel: ``tk(*args, grid=..., n=...)``, where ``grid``
    (and ``n``, ``shared_mem``) may be functions of the configuration, as in
    :func:`~workbench.tune`. The first call for a problem size prints one
    line saying whether the tuned configuration was used; :attr:`note` and
    :attr:`config` say the same afterwards.
    """

    def __init__(self, kernel, *, kernel_name: str | None = None, problem_size=None,
                 block=None, verbose: bool = True):
        self._source, self.name, self._template_params, self._options = \
            kernel_source(kernel, kernel_name)
        self._kernel = kernel if isinstance(kernel, (Kernel, KernelTemplate)) else None
        self.problem_size = problem_size
        self.block = block
        self.verbose = verbose
        self.config: dict | None = None
        self.note = "not called yet"
        self._said: set = set()

    def lookup(self, args=()) -> dict | None:
        """The stored best entry for ``args``' problem size (or the fixed one)."""
        size = self.problem_size if self.problem_size is not None else \
            problem_size_of(tuple(host_copy(a) for a in args))
        b = active_backend()
        return best_entry(key(device=device_name(b), backend=b.name, source=self._source,
                              kernel=self.name, problem_size=size))

    def __call__(self, *args, grid=None, n=None, shared_mem=0, stream=None):
        entry = self.lookup(args)
        options = dict(self._options)
        defines = tuple(options.pop("defines", ()))
        if entry is not None:
            config = entry["config"]
            task = Task(source=self._source, kernel=self.name,
                        template_params=self._template_params, config=config,
                        kinds=entry["kinds"], defines=tuple(entry.get("defines") or defines),
                        compile_options={**options, **(entry.get("compile_options") or {})},
                        grid=grid, block=self.block, n=n, shared_mem=shared_mem)
            kernel, reason, _ = compile_config(task)
            if kernel is None:
                raise RuntimeError(f"the tuned configuration of {self.name} no longer "
                                   f"compiles ({reason}); tune it again")
            self.config = dict(config)
            self.note = (f"tuned configuration used: "
                         f"{', '.join(f'{k}={v}' for k, v in config.items())} "
                         f"(tuned {entry.get('when', '?')}, {entry.get('strategy')}, "
                         f"{entry.get('value')})")
        else:
            if self._kernel is None or isinstance(self._kernel, KernelTemplate):
                raise LookupError(f"no tuned configuration of {self.name} for this device and "
                                  "problem size; run wb.tune(...) first")
            kernel, self.config = self._kernel, None
            task = Task(source=self._source, kernel=self.name, template_params=(), config={},
                        kinds={}, grid=grid, block=self.block, n=n, shared_mem=shared_mem)
            self.note = "no tuned configuration for this device and problem size: default used"
        launch = launch_options(task)
        if stream is not None:
            launch["stream"] = stream
        said = (self.config is None, repr(self.config))
        if self.verbose and said not in self._said:
            self._said.add(said)
            print(f"wb.tuned: {self.name}: " + (
                f"tuned configuration used ({', '.join(f'{k}={v}' for k, v in self.config.items())})"
                if self.config is not None else self.note))
        return kernel(*args, **launch)

    def __repr__(self) -> str:
        return f"<TunedKernel {self.name}: {self.note}>"


def tuned(kernel, *, kernel_name: str | None = None, problem_size=None, block=None,
          verbose: bool = True) -> TunedKernel:
    """``kernel`` run with the best configuration :func:`~workbench.tune`
    stored for this device and problem size (the arguments' shapes and
    scalars, or ``problem_size=`` as given to the tune): its defines and
    template arguments compiled in, its block size launched. Without a stored
    configuration a Kernel runs as it is. Each call says in one printed line
    (once per configuration) whether a tuned configuration was used."""
    return TunedKernel(kernel, kernel_name=kernel_name, problem_size=problem_size, block=block,
                       verbose=verbose)

