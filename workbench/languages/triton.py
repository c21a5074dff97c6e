"""Triton kernels (``triton.jit``, with ``triton.autotune``) in the workbench:
``wb.python_kernel(triton_fn)``.

Triton takes as a pointer anything with ``data_ptr()`` and ``dtype``. On the
GPU a workbench array (CuPy) is handed over as a small view giving its device
address: no copy, no PyTorch tensor. Triton launches on PyTorch's current
stream; when that is not the stream the workbench records its events on,
the launch runs inside ``torch.cuda.stream(ExternalStream(ptr))`` so that the
events bracket the kernel.

Without a GPU, Triton's interpreter (``TRITON_INTERPRET=1``) runs kernels
with NumPy, loading and storing through host addresses. Workbench arrays on
the simulator are NumPy views of its device memory, a shared-memory arena
mapped into this process, so the interpreter is given their host addresses
directly. The interpreter expects PyTorch tensors, which it copies to the
CPU and back around each launch; :class:`_HostArray` answers that protocol
with the memory as it is (it is already on the host), so neither PyTorch
nor a copy is needed. Autotuning on the interpreter times each configuration
by the CPU's clock (Triton's own benchmarker needs a GPU).

``triton`` is never imported here at module level (the workbench stays light
and ``TRITON_INTERPRET`` must be set, by :mod:`.modes`, before kernels are
decorated); the kernel object carries everything needed.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ..backends.contract import KernelResources
from ..backends.nvrtc.check import NvrtcResult
from ..errors import LaunchConfigError
from ..present.tables import html_table, pandas
from .base import PyKernel, array_dtype, dim3
from .triton_direct import DirectLaunches


#: The legacy (0, 1) and per-thread (2) default streams: work on one of them is
#: ordered with work on the others, so events on one bracket a kernel on another.
_DEFAULT_STREAMS = (0, 1, 2)


def is_triton_kernel(obj) -> bool:
    """True for a ``triton.jit`` kernel (possibly autotuned or with
    heuristics), without importing Triton."""
    module = type(obj).__module__ or ""
    return module.startswith("triton.") and hasattr(obj, "arg_names") and hasattr(obj, "run")


def _chain(fn):
    """The wrappers from the outermost (Autotuner, Heuristics) to the JIT function."""
    out = [fn]
    while not hasattr(out[-1], "params") and hasattr(out[-1], "fn") and type(out[-1]).__name__ in (
            "Autotuner", "Heuristics"):
        out.append(out[-1].fn)
    return out


class _Storage:
    """The interpreter's view of a storage: already on the host."""

    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    def data_ptr(self) -> int:
        return self._array.data_ptr()

    def cpu(self):
        return self

    def copy_(self, other):  # the "device" and the "host" copy are one memory
        return self


class _HostArray:
    """A host array as Triton's interpreter takes a tensor (see the module docstring)."""

    __slots__ = ("array", "dtype", "_ptr")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.dtype = array.dtype
        self._ptr = array.__array_interface__["data"][0]

    def data_ptr(self) -> int:
        return self._ptr

    def untyped_storage(self):
        return _Storage(self)

    def storage_offset(self) -> int:
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self


def _checked_grid(grid, kernel: str):
    """``grid`` (a function of the meta-parameters) whose every answer is
    checked as ``grid=`` itself would be: 1 to 3 positive ints (a grid of 0
    or -1 programs would launch nothing and say nothing)."""
    def checked(meta):
        return dim3(grid(meta), "grid (from the grid function)", kernel)
    return checked


#: (address, dtype) -> its _DeviceArray, so that repeated launches on the same
#: arrays pass the same objects (triton_direct.py keys its launches by them).
_VIEWS: dict = {}
_MAX_VIEWS = 4096


class _DeviceArray:
    """A workbench GPU array as Triton takes a tensor: its address and dtype."""

    __slots__ = ("dtype", "_ptr")

    def __init__(self, ptr: int, dtype):
        self._ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._ptr


def _cpu_bench(kernel_call, quantiles=(0.5, 0.2, 0.8), **_):
    """Triton's benchmarker on the interpreter: milliseconds of a few runs by the CPU clock."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return [statistics.median(times), times[0], times[-1]][:len(quantiles)]


class AutotuneResult:
    """Triton's autotuning of one kernel: every configuration tried, its time
    (ms, median; CPU time on the interpreter) and the one it picked."""

    def __init__(self, name: str, rows: list[dict], picked: str | None, simulated: bool):
        self.name = name
        self.rows = rows
        self.picked = picked
        self.simulated = simulated

    def to_pandas(self):
        return pandas().DataFrame(self.rows, columns=["config", "ms", "picked"])

    def __repr__(self) -> str:
        lines = [f"Triton autotuning of {self.name}: picked {self.picked or 'none yet (launch it once)'}"
                 + (" (interpreter: CPU times)" if self.simulated else "")]
        for r in self.rows:
            ms = "not timed" if r["ms"] is None else f"{r['ms']:.4g} ms"
            lines.append(f"  {'*' if r['picked'] else ' '} {r['config']}: {ms}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [(("* " if r["picked"] else "") + r["config"],
                 "not timed" if r["ms"] is None else f"{r['ms']:.4g}") for r in self.rows]
        return html_table(rows, ["config", "ms"], title=f"Triton autotuning of {self.name}",
                          bold_rows=[i for i, r in enumerate(self.rows) if r["picked"]])


def _config_text(config) -> str:
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    parts += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    return ", ".join(parts)


class TritonKernel(PyKernel):
    """A ``triton.jit`` kernel in the workbench::

        k = wb.python_kernel(triton_fn)   # or give triton_fn to wb.bench / wb.compare
        k(x, y, n, grid=(programs,), BLOCK=1024)   # keywords: Triton's meta-parameters

    ``grid`` is the number of programs (a tuple, or a function of the
    meta-parameters as in Triton); the threads of a program are Triton's
    (``num_warps`` x 32). ``k.autotune`` shows the configurations an
    autotuned kernel tried and the one it picked.
    """

    language = "triton"

    def __init__(self, fn, name: str | None = None, dtypes: dict | None = None):
        chain = _chain(fn)
        self._jit = chain[-1]
        base = getattr(self._jit, "fn", None)
        super().__init__(fn, name or getattr(base, "__name__", None) or "triton_kernel", dtypes)
        self._names = list(self._jit.arg_names)
        self.simulated = type(self._jit).__name__ == "InterpretedFunction"
        self._autotuner = next((f for f in chain if type(f).__name__ == "Autotuner"), None)
        provided: set[str] = set()
        for f in chain:
            if type(f).__name__ == "Autotuner":
                for c in f.configs:
                    provided |= set(c.kwargs)
            elif type(f).__name__ == "Heuristics":
                provided |= set(f.values)
        self._provided = provided
        params = getattr(self._jit, "params", None)
        self._defaults = {p.name for p in params if p.has_default} if params else set()
        self._last = None  # the compiled kernel of the last launch (Triton returns it)
        self._warps = None  # its num_warps
        self._device = None
        self._torch_streams: dict = {}
        #: launches past Triton's dispatch (triton_direct.py), per device: none for
        #: an autotuned kernel (False) or where this Triton lacks what they use
        self._direct = {} if self._jit is fn else False
        if not self.simulated:
            from triton.runtime import driver  # lazy: see module docstring (the kernel imported it)
            self._driver = driver
        if self.simulated and self._autotuner is not None and "do_bench" not in vars(self._autotuner):
            self._autotuner.do_bench = _cpu_bench  # Triton's own needs a GPU driver

    def _params(self) -> list[str]:
        return self._names

    def _required(self, kwargs):
        missing = [p for p in self._names if p not in kwargs and p not in self._provided]
        lo = len([p for p in missing if p not in self._defaults])
        return lo, len(missing)

    def _convert_array(self, a):
        if self.simulated:
            return _HostArray(a.view(np.ndarray))
        key = (self.backend.device_pointer(a), a.dtype)
        view = _VIEWS.get(key)
        if view is None:  # one view per address and dtype: repeat calls are the same arguments
            if len(_VIEWS) >= _MAX_VIEWS:
                _VIEWS.clear()
            view = _VIEWS[key] = _DeviceArray(*key)
        return view

    def launch_config(self, grid, block, n, meta):
        if block is not None or n is not None:
            raise LaunchConfigError(
                f"{self.name}() is a Triton kernel: give grid= (the number of programs, or a "
                f"function of the meta-parameters); Triton sets the threads of a program "
                f"(num_warps=...).")
        if grid is None:
            raise LaunchConfigError(f"{self.name}() needs grid= (the number of programs, e.g. "
                                    f"grid=(triton.cdiv(n, BLOCK),)).")
        if callable(grid):
            grid = _checked_grid(grid, self.name)
        else:
            grid = dim3(grid, "grid", self.name)
        warps = meta.get("num_warps") or self._warps
        return grid, ((32 * warps,) if warps else None)

    def _foreign_array(self, a):
        if self.simulated:  # the interpreter reads host memory: only the simulator's arrays
            return None
        if hasattr(a, "data_ptr") and hasattr(a, "dtype"):  # a tensor: Triton's own kind
            return a
        desc = getattr(a, "__cuda_array_interface__", None)
        if desc:  # device memory of another library: its address and dtype
            return _DeviceArray(int(desc["data"][0]), array_dtype(a))
        return None

    def _log_grid(self, grid):
        return None if callable(grid) else grid

    def _launch(self, grid, block, args, shared_mem, stream, meta) -> None:
        if shared_mem:
            raise LaunchConfigError(f"{self.name}(): Triton sizes shared memory itself; "
                                    f"shared_mem= is not taken.")
        if self.simulated:
            self.fn[grid](*args, **meta)
            return
        want = self.backend.stream_pointer(stream)
        direct = None
        if self._direct:
            device = self.backend.current_device()
            direct = self._direct.get(device)
            if direct:
                ret = direct.launch(grid, args, meta, want)
                if ret is not None:
                    if ret is not self._last:
                        self._remember(ret)
                    return
        active = self._driver.active
        if self._device is None:  # Triton launches on PyTorch's current device: asked once
            self._device = active.get_current_device()
        have = active.get_current_stream(self._device)
        if have == want or (want in _DEFAULT_STREAMS and have in _DEFAULT_STREAMS):
            ret = self.fn[grid](*args, **meta)
        else:
            with self._torch_stream(want):
                ret = self.fn[grid](*args, **meta)
        if ret is not self._last and ret is not None and hasattr(ret, "metadata"):
            self._remember(ret)
        if self._direct is not False:
            # Triton compiled for its current device: remembered only where that is
            # the workbench's (the kernel's handle belongs to that device's context)
            device = self.backend.current_device()
            if active.get_current_device() == device:
                if direct is None:
                    direct = self._direct[device] = DirectLaunches.create(self._jit, device) or False
                if direct:
                    direct.remember(args, meta, ret)

    def _remember(self, kernel) -> None:
        """``kernel`` (Triton's compiled kernel) was the last launched: the resources show it."""
        self._last = kernel
        self._warps = getattr(kernel.metadata, "num_warps", None)

    def _torch_stream(self, ptr: int):
        import torch  # lazy: Triton's GPU driver itself needs PyTorch, only on this path
        s = self._torch_streams.get(ptr)
        if s is None:
            s = self._torch_streams[ptr] = torch.cuda.ExternalStream(ptr)
        return torch.cuda.stream(s)

    # -- autotuning, resources and code --------------------------------------------------
    @property
    def autotune(self) -> AutotuneResult | None:
        """The configurations tried and the one picked (None: not autotuned)."""
        t = self._autotuner
        if t is None:
            return None
        timings = getattr(t, "configs_timings", None) or {}
        best = getattr(t, "best_config", None)
        rows = []
        for c in t.configs:
            ms = timings.get(c)
            ms = ms[0] if isinstance(ms, (list, tuple)) else ms
            rows.append({"config": _config_text(c), "ms": None if ms is None else float(ms),
                         "picked": c is best})
        return AutotuneResult(self.name, rows, _config_text(best) if best is not None else None,
                              self.simulated)

    def _extra_fields(self) -> tuple:
        tuned = self.autotune
        return (("autotuned: picked", tuned.picked),) if tuned is not None else ()

    def _compiled_resources(self) -> KernelResources | None:
        k = self._last
        if k is None:
            return None
        k._init_handles()
        spills = getattr(k, "n_spills", None)
        arch = getattr(getattr(k.metadata, "target", None), "arch", None)
        return KernelResources(
            registers=getattr(k, "n_regs", None), shared_bytes=int(k.metadata.shared),
            # Triton's n_spills is the kernel's local memory in 4-byte words
            local_bytes=None if spills is None else int(spills) * 4,
            max_threads_per_block=getattr(k, "n_max_threads", None),
            arch=f"sm_{arch}" if arch else None)

    def compiled_code(self):
        if self.simulated:
            return None, ("Triton's interpreter runs the kernel with NumPy: no PTX or SASS "
                          "(run on a GPU to see them)")
        k = self._last
        if k is None:
            return None, f"{self.name} is compiled at its first launch: launch it once first"
        arch = self.resources.arch or "sm_90"
        return NvrtcResult(log="", ptx=k.asm.get("ptx", ""), cubin=k.asm.get("cubin"), arch=arch,
                           lowered_names={self.name: k.metadata.name}), ""
