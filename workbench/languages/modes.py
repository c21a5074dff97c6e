"""Where Numba and Triton kernels run: on the GPU, or (with the simulator
backend) in Numba's CUDA simulator and Triton's interpreter.

Both CPU modes are chosen by environment variables that must be set before
the language commits: ``NUMBA_ENABLE_CUDASIM=1`` before ``numba.cuda`` is
first imported (it picks the simulator or the GPU driver at import), and
``TRITON_INTERPRET=1`` before a kernel is decorated with ``triton.jit``.
:func:`setup` sets them from the active backend, so a notebook calls
``wb.languages.setup()`` before it imports ``numba.cuda`` or defines Triton
kernels; where a language is already committed to the other mode, or cannot
be installed or run, its status says why in one line and the rest of the
workbench works on.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass

from ..present.tables import html_table, pandas
from ..runtime.session import backend as active_backend


@dataclass(frozen=True)
class LanguageStatus:
    """One language: whether its kernels can run here, in which mode, and why not."""

    language: str
    available: bool
    mode: str          # "GPU", "CUDA simulator", "interpreter", or "" when unavailable
    reason: str = ""   # one line: why it cannot run ("" when it can)

    def line(self) -> str:
        return (f"{self.language}: {self.mode}" if self.available
                else f"{self.language}: unavailable: {self.reason}")


class LanguageSupport:
    """The status of every kernel language (``wb.languages.setup()``)."""

    def __init__(self, statuses: list[LanguageStatus], backend_name: str):
        self.statuses = {s.language: s for s in statuses}
        self.backend = backend_name

    def __getitem__(self, language: str) -> LanguageStatus:
        return self.statuses[language]

    def available(self, language: str) -> bool:
        return self.statuses[language].available

    def __repr__(self) -> str:
        return "\n".join([f"Kernel languages on the {self.backend} backend:", "  cuda: %%cuda / wb.compile"]
                         + [f"  {s.line()}" for s in self.statuses.values()])

    def _repr_html_(self) -> str:
        rows = [("cuda", "yes", "%%cuda / wb.compile", "")]
        rows += [(s.language, "yes" if s.available else "no", s.mode, s.reason)
                 for s in self.statuses.values()]
        return html_table(rows, ["language", "runs", "mode", "why not"],
                          title=f"Kernel languages on the {self.backend} backend")

    def to_pandas(self):
        return pandas().DataFrame([s.__dict__ for s in self.statuses.values()])


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _numba_status(on_cpu: bool) -> LanguageStatus:
    if not _installed("numba"):
        return LanguageStatus("numba", False, "", "numba is not installed (pip install "
                              "'cuda-workbench[numba]')")
    if "numba.cuda" in sys.modules:  # already committed to one mode
        from numba.core import config  # lazy: numba is optional and heavy
        simulated = bool(config.ENABLE_CUDASIM)
        if simulated != on_cpu:
            want = "NUMBA_ENABLE_CUDASIM=1" if on_cpu else "no NUMBA_ENABLE_CUDASIM"
            return LanguageStatus("numba", False, "",
                                  f"numba.cuda was imported in {'simulator' if simulated else 'GPU'} "
                                  f"mode before the workbench chose the {'simulator' if on_cpu else 'GPU'}; "
                                  f"restart and call wb.languages.setup() first ({want})")
    elif on_cpu:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        if "numba.core.config" in sys.modules:  # numba read its environment already
            sys.modules["numba.core.config"].ENABLE_CUDASIM = 1
    if not on_cpu:
        broken = _numba_gpu_probe()
        if broken:
            return LanguageStatus("numba", False, "", broken)
    return LanguageStatus("numba", True, "CUDA simulator" if on_cpu else "GPU")


_PROBED: dict = {}


def _numba_gpu_probe() -> str:
    """'' when Numba compiles a trivial kernel for the GPU, else why not in one
    line (a numba-cuda built for another NumPy fails only at its first compile)."""
    if "numba" not in _PROBED:
        try:
            from numba import cuda  # lazy: numba is optional and heavy

            @cuda.jit("void(int32[:])")
            def _probe(x):  # pragma: no cover - compiled, never run
                x[0] = 1
            _PROBED["numba"] = ""
        except Exception as exc:  # any failure: the language cannot run here
            text = f"{type(exc).__name__}: {exc}".strip().splitlines()
            _PROBED["numba"] = (f"numba-cuda cannot compile here ({text[-1] if text else exc!r}); "
                                f"install a numba-cuda that matches NumPy {_numpy_version()}")
    return _PROBED["numba"]


def _numpy_version() -> str:
    import numpy
    return numpy.__version__


#: True while TRITON_INTERPRET is set because setup() set it (so it may unset it)
_interpret_set_here = False


def _triton_status(on_cpu: bool) -> LanguageStatus:
    if not _installed("triton"):
        return LanguageStatus("triton", False, "", "triton is not installed (pip install "
                              "'cuda-workbench[triton]'; Linux x86-64 and aarch64 wheels only)")
    global _interpret_set_here
    if on_cpu:
        if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated
            _interpret_set_here = True
        return LanguageStatus("triton", True, "interpreter")
    if _interpret_set_here:  # back on the GPU: kernels decorated from now on are compiled
        os.environ.pop("TRITON_INTERPRET", None)
        _interpret_set_here = False
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return LanguageStatus("triton", False, "", "TRITON_INTERPRET is set but the workbench "
                              "runs on the GPU; unset it and restart")
    if not _installed("torch"):
        return LanguageStatus("triton", False, "", "Triton on the GPU needs PyTorch (its driver "
                              "reads the device and stream through torch): pip install torch")
    return LanguageStatus("triton", True, "GPU")


def setup() -> LanguageSupport:
    """Prepare Numba and Triton for the active backend and say where each runs.

    With the simulator backend this sets ``NUMBA_ENABLE_CUDASIM=1`` and
    ``TRITON_INTERPRET=1``; call it before ``from numba import cuda`` and
    before defining Triton kernels. On the CPU it imports neither language; on
    the GPU it compiles one tiny Numba kernel, once, so that a Numba that cannot
    compile here (a numba-cuda built for another NumPy) is reported now, in one
    line, rather than at the first launch.
    """
    b = active_backend()
    on_cpu = bool(b.simulated)
    return LanguageSupport([_numba_status(on_cpu), _triton_status(on_cpu)], b.name)
