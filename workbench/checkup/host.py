"""The doctor's rows for this computer: the C and C++ compilers, the C
modules the backends build, the simulator's worker, host memory, and the
optional Python packages (Numba, Triton, Optuna, Dask)."""
from __future__ import annotations

import importlib.metadata
import os
import sysconfig
import time
from pathlib import Path

import numpy as np

from ..backends import native_build, native_words
from ..backends.gpu import NATIVE_DIR as GPU_NATIVE_DIR
from ..backends.gpu import native_cupti as cupti_native, native_launch
from ..backends.simulator import build as simulator_build
from ..core.arrays import to_device, to_host
from ..present.units import format_bytes
from .gpu import Gpus
from .result import Check
from .tools import tiny_kernel

#: The backends' C modules: (row, source, module name, switch, used on a GPU only, what
#: does the work without it).
C_MODULES = (
    ("launcher", native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH", True,
     "kernels launch from Python, a little slower"),
    ("memory tracking", GPU_NATIVE_DIR / "allocations.c", "_wb_allocations",
     "WORKBENCH_NATIVE_ALLOCATIONS", True, "allocations are recorded from Python"),
    ("CUPTI records", cupti_native.SOURCE, "_wb_cupti", cupti_native.SWITCH, True,
     "cupti-python or CUDA events time the launches"),
    ("ring words", native_words.SOURCE, "_wb_words", native_words.SWITCH, False,
     "ring kernels copy and wait from Python, slower"),
)


def check_cxx() -> Check:
    missing = simulator_build.missing_compiler_message()
    if missing:
        return Check("C++ compiler (simulator)", "missing", missing.split(": install", 1)[0],
                     f"{simulator_build.install_command()} (or set WBSIM_CXX to a g++)")
    return Check("C++ compiler (simulator)", "ok",
                 f"{simulator_build.compiler()} {simulator_build.compiler_version() or '(version unknown)'}")


def check_cc() -> Check:
    cc = native_build.compiler()
    if cc is None:
        return Check("C compiler (C modules)", "missing", "no cc (nor $CC): the C modules run "
                     "in Python instead, slower", f"{simulator_build.install_command()} (or set CC)")
    include = sysconfig.get_paths().get("include") or ""
    if not Path(include, "Python.h").exists():
        return Check("C compiler (C modules)", "warning", f"{' '.join(cc)}, but Python's headers "
                     f"are missing (no Python.h in {include}): the C modules run in Python",
                     "install Python's headers (sudo apt install python3-dev; sudo dnf install "
                     "python3-devel)")
    return Check("C compiler (C modules)", "ok", f"{' '.join(cc)}, with Python's headers")


def _cupti_builds() -> list[tuple]:
    """``(flags, headers)`` of each CUPTI header set the collector is built
    against, in the order the backend tries them (the first that builds wins)."""
    sets, _, _ = cupti_native.locate()
    return [(tuple(f"-I{f}" for f in folders), cupti_native._headers(folders))
            for folders in sets or ()]


def check_c_module(row, g: Gpus, deep: bool) -> Check:
    label, source, module, switch, gpu_only, fallback = row
    name = f"C module: {label}"
    if gpu_only and not g.present:
        return Check(name, "ok", f"not needed here ({source.name}: used on a GPU)")
    builds = [((), ())]
    if module == "_wb_cupti":
        builds = _cupti_builds()
        if not builds:
            return Check(name, "ok" if gpu_only and not g.present else "missing",
                         "not built: no CUPTI headers", "see the CUPTI row")
    if deep and module != "_wb_allocations":  # (that one loads only beside CuPy's pool)
        {"_wb_launch": native_launch.module, "_wb_words": native_words.module,
         "_wb_cupti": cupti_native.module}[module]()
    # the first header set that built, else the first not yet tried, else the first refusal
    states = [native_build.state(source, module, switch, flags, depends) for flags, depends in builds]
    state, detail = next((sd for wanted in ("built", "not built") for sd in states if sd[0] == wanted),
                         states[0])
    if state == "built":
        return Check(name, "ok", f"built ({Path(detail).name})")
    if state == "not built":
        return Check(name, "ok", f"not built yet: built on first use ({source.name}, a second)")
    if state == "refused":
        return Check(name, "warning", f"the compiler refused {source.name}: {detail}; {fallback}",
                     "report it with the compiler's message; it is tried again in a day")
    if detail == f"{switch}=0":
        return Check(name, "warning", f"turned off ({detail}): {fallback}", f"unset {switch}")
    return Check(name, "missing", f"{detail}: {fallback}",
                 f"{simulator_build.install_command()}, then it builds on first use")


def check_worker(deep: bool) -> Check:
    name = "simulator worker"
    if deep and simulator_build.missing_compiler_message() is None:
        simulator_build.worker_executable()
    if simulator_build.worker_built():
        return Check(name, "ok", "built (in the cache)")
    if simulator_build.missing_compiler_message():
        return Check(name, "missing", "not built, and no C++ compiler to build it: the simulator "
                     "cannot run a kernel", simulator_build.install_command())
    return Check(name, "ok", "not built yet: built on the first launch (a few seconds, once)")


def _meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes (Linux), else what ``sysconf`` tells."""
    try:
        with open("/proc/meminfo") as f:
            return {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f)
                    if v.strip().endswith("kB")}
    except OSError:
        return {"MemTotal": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}


def check_memory(b) -> Check:
    info = _meminfo()
    total, available = info.get("MemTotal"), info.get("MemAvailable")
    host = f"{format_bytes(total)} RAM" + (f" ({format_bytes(available)} available)" if available else "")
    device = b.memory_info()[1]
    if not b.simulated:
        return Check("host memory", "ok", f"{host}; the GPU has {format_bytes(device)}")
    if total and device > total:
        return Check("host memory", "warning", f"{host}; the simulated device has "
                     f"{format_bytes(device)}: its pages are taken when touched, so arrays past the "
                     f"available memory fail or swap", f"wb.backend('simulator', memory_bytes="
                     f"{max(1, int((available or total) * 0.5) >> 30)} << 30) simulates a device "
                     f"that fits")
    return Check("host memory", "ok", f"{host}; the simulated device has {format_bytes(device)}")


def _versions(*names) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


#: Optional packages: (row, distributions, the extra, what they give).
PACKAGES = (
    ("Numba", ("numba", "numba-cuda"), "numba", "Numba kernels (numba.cuda.jit)"),
    ("Triton", ("triton",), "triton", "Triton kernels (about 1 GB; Linux)"),
    ("Optuna", ("optuna", "cmaes"), "tune", "wb.tune's TPE, CMA-ES, random and QMC searches "
     "(the exhaustive grid needs nothing)"),
    ("Dask", ("dask", "distributed"), "tune", "sweeps and tunes over a Dask cluster"),
)


def check_package(row) -> Check:
    label, names, extra, gives = row
    found = _versions(*names)
    if found.keys() >= {names[0]}:
        text = ", ".join(f"{n} {v}" for n, v in found.items())
        if len(found) < len(names):
            return Check(label, "warning", f"{text}; {', '.join(set(names) - set(found))} missing",
                         f"pip install 'cuda-workbench[{extra}]'")
        return Check(label, "ok", text)
    return Check(label, "missing", f"not installed (optional: {gives})",
                 f"pip install 'cuda-workbench[{extra}]'")


def check_compile_and_run(b) -> Check:
    """Compile a small kernel on the active backend, run it, compare with NumPy."""
    start = time.perf_counter()
    kernel = tiny_kernel()
    rng = np.random.default_rng()
    x_host, y_host = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    x, y = to_device(x_host), to_device(y_host)
    kernel(np.float32(2.0), x, y, np.int32(1000), n=1000)
    expected = 2.0 * x_host.astype(np.float64) + y_host
    if not np.allclose(to_host(y), expected, rtol=1e-6):
        return Check("compile and run", "error", f"a kernel ran on {b.name} but its result is wrong",
                     "report it: wb.backend() and this table")
    return Check("compile and run", "ok", f"a kernel compiled and ran on {b.name} in "
                 f"{time.perf_counter() - start:.2f} s; its result matches NumPy")
