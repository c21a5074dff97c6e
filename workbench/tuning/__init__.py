"""Autotuning: ``wb.tune`` searches a kernel's block size, ``-D`` defines and
template arguments; ``wb.tuned`` runs a kernel with the best stored one.

Modules: :mod:`.space` (parameters, kinds, restrictions), :mod:`.strategies`
(the exhaustive grid; Optuna's samplers, an optional extra imported when
asked for), :mod:`.task` (one configuration compiled, checked and measured,
here or on a Dask worker), :mod:`.tuner` (the search loop), :mod:`.result`
(``TuneResult``), :mod:`.cache` (the tuning cache, ``wb.tuned``),
:mod:`.limits` (the device's limits), :mod:`.grids` (Kernel Tuner's problem
size and grid divisors), :mod:`.t4` and :mod:`.kernel_tuner_files` (Kernel
Tuner's T4 and cache files).
The spreading over a Dask cluster is :mod:`workbench.benchmarking.distributed`,
shared with ``wb.sweep``.
"""
from ..benchmarking.distributed import local_cluster
from .cache import TunedKernel, tuned
from .kernel_tuner_files import from_kernel_tuner
from .result import TuneResult
from .space import Space
from .strategies import STRATEGIES
from .tuner import set_progress_factory, tune

__all__ = ["tune", "tuned", "TuneResult", "TunedKernel", "Space", "STRATEGIES",
           "set_progress_factory", "local_cluster", "from_kernel_tuner"]
