"""What Numba and Triton kernels share in the workbench: the argument checks
that can be made before the language sees the call, the timed launch into
``wb.timings()``, the resources, occupancy and inspection the kernel panel
reads, and the presentation.

A language module (:mod:`.numba`, :mod:`.triton`) subclasses
:class:`PyKernel` with how to name the parameters, convert one device array,
launch, and read the compiled kernel's resources and code.
"""
from __future__ import annotations

import html

import numpy as np

from ..backends.contract import KernelResources
from ..errors import KernelArgumentError, LaunchConfigError
from ..hardware.inspect import inspect_kernel
from ..hardware.occupancy import occupancy as kernel_occupancy
from ..present.tables import html_fields
from ..core.streams import launch_stream
from ..runtime.session import backend, session

#: Python scalars pass to the language as they are (checked first, on the launch path).
_SCALARS = frozenset({int, float, bool, np.float32, np.float64, np.int32, np.int64})

#: Keyword arguments of a call that are the workbench's, not the language's.
LAUNCH_KEYWORDS = ("grid", "block", "shared_mem", "stream", "n")


def describe(value) -> str:
    """What a user passed, in words that do not depend on the backend."""
    if type(value) is np.ndarray:
        return f"a {value.dtype} host NumPy array of shape {value.shape}"
    if hasattr(value, "dtype") and hasattr(value, "shape") and np.ndim(value) > 0:
        return f"a {value.dtype} device array of shape {tuple(value.shape)}"
    return f"the {type(value).__name__} {value!r}"


def array_dtype(a) -> np.dtype | None:
    """``a``'s dtype as NumPy's (a structured one with its fields), also for
    an array of another library (its ``__cuda_array_interface__``)."""
    try:
        return np.dtype(a.dtype)
    except TypeError:  # (a PyTorch dtype, say)
        pass
    desc = getattr(a, "__cuda_array_interface__", None)
    if not desc:
        return None
    descr = desc.get("descr")
    if descr and any(name for name, *_ in descr):
        return np.dtype([tuple(d) for d in descr])
    return np.dtype(desc["typestr"])


#: Grids and blocks already checked (the same few recur on every launch of a loop).
_DIMS: dict = {}


def dim3(value, what: str, kernel: str) -> tuple[int, ...]:
    """``value`` (an int or 1-3 ints) as a tuple of positive ints."""
    try:
        if value.__class__ is not bool:
            return _DIMS[value]
    except (KeyError, TypeError):  # not seen yet, or a list (unhashable)
        pass
    dims = _check_dim3(value, what, kernel)
    if type(value) in (int, tuple) and len(_DIMS) < 4096:
        _DIMS[value] = dims
    return dims


def _check_dim3(value, what: str, kernel: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and all(
            isinstance(v, (int, np.integer)) for v in value):
        dims = tuple(int(v) for v in value)
    else:
        raise LaunchConfigError(f"{kernel}(): {what} must be an int or a tuple of 1 to 3 ints, "
                                f"got {value!r}.")
    if min(dims) < 1:
        raise LaunchConfigError(f"{kernel}(): {what} dimensions must be >= 1, got {value!r}.")
    return dims


class PyKernel:
    """A kernel written in Python (Numba or Triton), launched, timed and
    inspected like a ``%%cuda`` :class:`workbench.Kernel`.

    Subclasses set :attr:`language` and implement :meth:`_params`,
    :meth:`_launch` and :meth:`_compiled_resources`.
    """

    #: "numba" or "triton": the ``language`` column of ``wb.timings()``.
    language = "?"

    def __init__(self, fn, name: str, dtypes: dict | None = None):
        self.fn = fn
        self.name = name
        self._session = session()
        self.backend = self._session.backend
        if self.backend is None:  # none chosen yet: choose it now
            self.backend = backend()
        self._dtypes = {k: np.dtype(v) for k, v in (dtypes or {}).items()}
        self._ndims: dict = {}  # parameter -> the number of dimensions its declaration says
        self._resources: KernelResources | None = None
        self._counts: dict = {}  # keyword names of a call -> the positional counts it takes
        #: (positional count, *keyword names) of a call -> the parameters given by keyword
        #: that become positional (the count checked)
        self._shapes: dict = {}
        self._fits: set = set()  # (grid, block) pairs within the device's limits

    # -- what a subclass says -----------------------------------------------------
    def _params(self) -> list[str]:
        """Names of the parameters a call gives positionally."""
        raise NotImplementedError

    def _required(self, kwargs) -> tuple[int, int]:
        """The fewest and most positional arguments a call with keywords ``kwargs`` takes."""
        n = len(self._params())
        return n, n

    def _convert_array(self, a):
        """A device array as the language takes it, without a copy."""
        return a

    def _foreign_array(self, a):
        """An array the language (or a library beside it) made, as the launch
        passes it on (its device memory used as it is), or None where ``a`` is
        no such array of this backend's device."""
        return None

    def _launch(self, grid, block, args, shared_mem, stream, meta) -> None:
        raise NotImplementedError

    def _compiled_resources(self) -> KernelResources | None:
        """The figures of the last compiled specialisation, or None before one exists."""
        return None

    def compiled_code(self):
        """``(NvrtcResult-like or None, reason)``: the PTX and cubin the language
        compiled (read by :func:`workbench.hardware.inspect.inspect_kernel`)."""
        return None, f"{self.language} compiled no GPU code here"

    # -- checks ---------------------------------------------------------------------
    def check_args(self, args, kwargs=None) -> list:
        """Count, device memory and (where declared) dtype of ``args``; the
        converted arguments the language launches with."""
        self._check_count(len(args), tuple(kwargs) if kwargs else ())
        return self._convert_args(args)

    def _check_count(self, given: int, keywords: tuple) -> None:
        counts = self._counts.get(keywords)
        if counts is None:  # (not in an except clause: what _required raises chains to nothing)
            counts = self._counts[keywords] = self._required(dict.fromkeys(keywords))
        lo, hi = counts
        if not lo <= given <= hi:
            count = str(lo) if lo == hi else f"{lo} to {hi}"
            raise KernelArgumentError(
                f"{self.name}() ({self.language}) takes {count} positional argument"
                f"{'s' if hi != 1 else ''} ({', '.join(self._params()[:hi])}), got {given}.")

    def _convert_args(self, args) -> list:
        fast = self.backend.device_array_type
        convert = self._convert_array
        scalars = _SCALARS
        checked = not self._dtypes  # (declared dtypes: every array goes by the careful path)
        out = []
        for a in args:
            t = type(a)
            if t is fast and checked:
                out.append(convert(a))
            elif t in scalars:
                out.append(a)
            else:
                out.append(self._convert_other(len(out), a))
        return out

    def _convert_other(self, i: int, a):
        """Argument ``i`` that is neither a plain scalar nor (without declared
        dtypes) a device array of the backend's own type."""
        b = self.backend
        if type(a) is not b.device_array_type and not b.is_device_array(a):
            if isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__") \
                    or hasattr(a, "__dlpack__") or hasattr(a, "copy_to_host"):
                foreign = self._foreign_array(a)
                if foreign is None and hasattr(a, "__dlpack__") and not b.simulated \
                        and not isinstance(a, np.ndarray):
                    foreign = self._from_dlpack(a)
                if foreign is None:
                    raise KernelArgumentError(
                        f"{self.name}() ({self.language}): parameter '{self._param_name(i)}' "
                        f"needs device memory, got {describe(a)}. Copy it first: "
                        f"wb.to_device(array).")
                self._check_declared(i, a)
                return foreign
            return a  # anything else is the language's to take or refuse
        self._check_declared(i, a)
        return self._convert_array(a)

    def _from_dlpack(self, a):
        """A DLPack array as a device array of this backend (no copy), or None."""
        try:
            array = self.backend.xp.from_dlpack(a)
        except Exception:  # not a device this backend can address
            return None
        return self._convert_array(array) if self.backend.is_device_array(array) else None

    def _check_declared(self, i: int, a) -> None:
        """The dtype (and number of dimensions) the kernel declares for parameter ``i``."""
        pname = self._param_name(i)
        want = self._dtypes.get(pname)
        if want is not None and array_dtype(a) != want:
            raise KernelArgumentError(
                f"{self.name}() ({self.language}): parameter '{pname}' takes a device "
                f"array of {want}, got {describe(a)}. Convert it with "
                f".astype({want.name!r}).")
        ndim = self._ndims.get(pname)
        if ndim is not None and len(a.shape) != ndim:
            raise KernelArgumentError(
                f"{self.name}() ({self.language}): parameter '{pname}' takes a {ndim}-dimensional "
                f"device array, got {describe(a)}; reshape it.")

    def _param_name(self, i: int) -> str:
        params = self._params()
        return params[i] if i < len(params) else f"#{i}"

    # -- the launch -----------------------------------------------------------------------
    def __call__(self, *args, grid=None, block=None, shared_mem: int = 0, stream=None, n=None,
                 **meta):
        b = self.backend
        if self._session.backend is not b:
            raise LaunchConfigError(
                f"{self.name} was wrapped for the {b.name} backend but the active backend is "
                f"{self._session.backend.name if self._session.backend else 'none'}; wrap it "
                f"again with wb.python_kernel().")
        if n is not None and grid is not None and "n" in self._params()[len(args):]:
            meta["n"] = n  # the kernel's own parameter n, given by keyword (wb.sweep's setup dict)
            n = None
        shape = (len(args), *meta) if meta else len(args)
        moved = self._shapes.get(shape)
        if moved is None:
            moved = self._shape(shape, len(args), meta)
        if moved:
            meta = dict(meta)
            args = (*args, *[meta.pop(p) for p in moved])
        converted = self._convert_args(args)
        grid, block = self.launch_config(grid, block, n, meta)
        stream = b.current_stream() if stream is None else launch_stream(b, stream, f"{self.name}()")
        self._session.timing_log.timed_launch(
            b, self.name, self._log_grid(grid), block, shared_mem, stream, self._run,
            (converted, meta, grid), self.language)

    def _shape(self, shape, given: int, meta: dict) -> tuple:
        """For calls with ``given`` positional arguments and the keywords of
        ``meta``: the parameters given by keyword right after the positional
        ones, which become positional (checked: the count, which raises)."""
        params = self._params()
        moved = []
        for p in params[given:]:
            if p not in meta:
                break
            moved.append(p)
        self._check_count(given + len(moved), tuple(k for k in meta if k not in moved))
        if len(self._shapes) >= 256:
            self._shapes.clear()
        self._shapes[shape] = moved = tuple(moved)
        return moved

    def _run(self, _grid, block, packed, shared_mem, stream) -> None:
        converted, meta, grid = packed
        self._launch(grid, block, converted, shared_mem, stream, meta)

    def _log_grid(self, grid):
        """The grid as the timing log shows it."""
        return grid

    def launch_config(self, grid, block, n, meta):
        """``(grid, block)`` for the launch and for the timing log."""
        if n is not None:
            if grid is not None:
                raise LaunchConfigError(f"{self.name}(): pass either n= or grid=, not both.")
            block = 256 if block is None else block
            threads = int(np.prod(dim3(block, "block", self.name)))
            grid = (max(1, -(-int(n) // threads)),)
        if grid is None or block is None:
            raise LaunchConfigError(
                f"{self.name}() needs grid= and block= (e.g. grid=(n + 255) // 256, block=256), "
                f"or n= to let the workbench choose them.")
        grid, block = dim3(grid, "grid", self.name), dim3(block, "block", self.name)
        if (grid, block) not in self._fits:
            self._check_device_limits(grid, block)
        return grid, block

    def _check_device_limits(self, grid, block) -> None:
        """Refuse a grid or block the device would refuse (remembered when it fits)."""
        p = self.backend.device_properties()
        threads = int(np.prod(block))
        if threads > p.max_threads_per_block or any(b > m for b, m in zip(block, p.max_block_dims)):
            raise LaunchConfigError(
                f"{self.name}(): block {block} has {threads} threads; this device allows at most "
                f"{p.max_threads_per_block} per block and {p.max_block_dims} per dimension.")
        if any(g > m for g, m in zip(grid, p.max_grid_dims)):
            raise LaunchConfigError(f"{self.name}(): grid {grid} exceeds the device's limit "
                                    f"{p.max_grid_dims}.")
        if len(self._fits) > 256:
            self._fits.clear()
        self._fits.add((grid, block))

    # -- resources, occupancy, code ---------------------------------------------------------
    @property
    def resources(self) -> KernelResources:
        """Registers, shared and local (spill) memory of the last compiled
        specialisation (:class:`KernelResources`; fields are None before the
        first launch and where the language's CPU mode compiles nothing)."""
        r = self._compiled_resources()
        if r is not None:
            self._resources = r
        return self._resources or KernelResources()

    @property
    def resources_unknown_reason(self) -> str:
        """Why :attr:`resources` has no register count (read by the occupancy notes)."""
        if getattr(self, "simulated", False):
            return f"{self.language} runs on the CPU here and compiles no GPU code"
        return "compiled at the first launch: launch it once"

    def inspect(self):
        """A report of this kernel's resources, PTX and (where the tools exist) SASS."""
        return inspect_kernel(self)

    def occupancy(self, block: int | None = None, shared_mem=0, **options):
        """Theoretical occupancy on the active device (see :func:`workbench.occupancy`)."""
        return kernel_occupancy(self, block=block, shared_mem=shared_mem, **options)

    # -- presentation -----------------------------------------------------------------------
    def _extra_fields(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        summary = self.resources.summary()
        return (f"<wb.{type(self).__name__} {self.name} ({self.language})"
                f"{' | ' + summary if summary else ''} | {self.backend.name}>")

    def _repr_html_(self) -> str:
        return (f"<div><code>{html.escape(self.name)}</code> ({self.language})"
                + html_fields((*self.resources.fields(), *self._extra_fields(),
                               ("backend", self.backend.name))) + "</div>")
