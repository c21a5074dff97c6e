"""Search strategies: the exhaustive grid (no dependency) and Optuna's samplers.

Optuna is an optional extra (``pip install 'cuda-workbench[tune]'``),
imported only when a strategy other than ``grid`` is asked for. Each
parameter is offered to Optuna as an index into its values, sorted when they
are all numbers (so TPE, CMA-ES and QMC see an ordered axis: block 64 lies
between 32 and 128), else as a categorical choice.

A strategy is asked for configurations one at a time (:meth:`ask`) and told
each one's objective values (:meth:`tell`) or that it failed (:meth:`fail`);
several may be in flight at once (a Dask cluster measures several).
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..errors import MissingExtra, TuneError
from .space import Space

#: name -> Optuna sampler class (and what else it needs)
OPTUNA_STRATEGIES = {
    "random": ("RandomSampler", None),
    "tpe": ("TPESampler", None),
    "cmaes": ("CmaEsSampler", "cmaes"),
    "qmc": ("QMCSampler", "scipy"),
    "nsga2": ("NSGAIISampler", None),
}
STRATEGIES = ("grid", *OPTUNA_STRATEGIES)
#: The strategies whose next configuration does not depend on results so far: a
#: local tune asks them ahead and compiles while it measures.
ASKED_AHEAD = ("grid", "random", "qmc")

_MISSING = ("Optuna is not installed: pip install 'cuda-workbench[tune]' for strategy={!r}; "
            "strategy='grid' (exhaustive) works without it")


def optuna_module():
    """``optuna``, or :class:`~workbench.MissingExtra` with one line."""
    try:
        import optuna  # lazy: an optional extra, only the Optuna strategies need it
    except ImportError:
        raise MissingExtra(_MISSING.format("tpe")) from None
    return optuna


def check_strategy(strategy: str, n_objectives: int) -> str:
    strategy = str(strategy).lower().replace("-", "").replace("_", "")
    strategy = {"nsgaii": "nsga2", "cmaes": "cmaes", "bruteforce": "grid",
                "exhaustive": "grid"}.get(strategy, strategy)
    if strategy not in STRATEGIES:
        raise TuneError(f"strategy={strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if n_objectives > 1 and strategy in ("cmaes",):
        raise TuneError("CMA-ES optimises one objective; for several use strategy='nsga2' "
                        "(or 'tpe', 'random', 'qmc', 'grid')")
    return strategy


class GridSearch:
    """Every allowed configuration in grid order (the first values first)."""

    exhaustive = True

    def __init__(self, space: Space):
        self._configs = space.configurations()
        self._next = 0

    def __len__(self):
        return len(self._configs)

    def ask(self):
        if self._next >= len(self._configs):
            return None
        config = self._configs[self._next]
        self._next += 1
        return None, config

    def tell(self, handle, values: Sequence[float]) -> None:
        pass

    def fail(self, handle) -> None:
        pass

    def enqueue(self, config) -> None:
        pass


class OptunaSearch:
    """An Optuna study driven by ask and tell."""

    exhaustive = False

    def __init__(self, space: Space, strategy: str, directions: Sequence[str], seed):
        try:
            optuna = optuna_module()
        except MissingExtra:
            raise MissingExtra(_MISSING.format(strategy)) from None
        class_name, needs = OPTUNA_STRATEGIES[strategy]
        if needs is not None:
            try:
                __import__(needs)
            except ImportError:
                raise MissingExtra(f"Optuna's {strategy} sampler needs {needs}: pip install "
                                   f"{needs} (or 'cuda-workbench[tune]')") from None
        self.optuna = optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial otherwise
        self.space = space
        self._axes: dict[str, list] = {}
        for name, values in space.params.items():
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            self._axes[name] = sorted(values) if numeric else list(values)
        self._distributions = {
            name: optuna.distributions.IntDistribution(0, len(values) - 1)
            for name, values in self._axes.items()}
        sampler_class = getattr(optuna.samplers, class_name)
        kwargs: dict[str, Any] = {"seed": seed}
        if strategy == "tpe":
            kwargs["multivariate"] = True  # the parameters of a kernel interact
        if strategy == "qmc":
            kwargs["scramble"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ExperimentalWarning of some samplers' options
            sampler = sampler_class(**kwargs)
            self.study = optuna.create_study(directions=list(directions), sampler=sampler)

    def _config(self, params: dict) -> dict:
        return {name: self._axes[name][int(params[name])] for name in self.space.names}

    def enqueue(self, config: dict) -> None:
        """Ask for ``config`` first (the default configuration)."""
        self.study.enqueue_trial({n: self._axes[n].index(config[n]) for n in self.space.names})

    def ask(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trial = self.study.ask(self._distributions)
        return trial, self._config(trial.params)

    def tell(self, trial, values: Sequence[float]) -> None:
        values = list(values)
        self.study.tell(trial, values if len(values) > 1 else values[0])

    def fail(self, trial) -> None:
        self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)


def make_search(space: Space, strategy: str, directions: Sequence[str], seed):
    if strategy == "grid":
        return GridSearch(space)
    return OptunaSearch(space, strategy, directions, seed)
