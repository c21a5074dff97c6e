"""``wb.Kernel``: a compiled ``__global__`` function that checks its arguments,
launches on the active backend and logs a timed record of every launch."""
from __future__ import annotations

import html
import math
import re

import numpy as np

from ..errors import KernelArgumentError, KernelFault, LaunchConfigError, NotInstantiated
from ..hardware.inspect import inspect_kernel
from ..hardware.occupancy import occupancy as kernel_occupancy
from ..present.tables import html_fields
from ..memory.oom import is_out_of_memory, out_of_memory as _out_of_memory
from ..runtime.session import session
from .arguments import argument_checker, fast_call, pointer_converter, scalar_converter
from .signature import KernelSignature
from .graphs import register_check
from .streams import launch_stream as _launch_stream


def _on_cell_lines(fault: KernelFault, offset: int) -> KernelFault:
    """The fault with its source lines counted as the cell counts them (the
    ``%%cuda`` line is line 1), as compile errors are."""
    message = str(fault)
    line = None
    if fault.line is not None:
        line = fault.line + offset
        message = re.sub(rf"\bline {fault.line}\b", f"line {line}", message, count=1)
        # an assert message names "file:line:" as CUDA's does
        message = re.sub(rf"(\.cu):{fault.line}:", rf"\g<1>:{line}:", message, count=1)
    # where threads wait, in a hang or deadlock report
    message = re.sub(r"(__syncthreads \(line )(\d+)\)",
                     lambda m: f"{m.group(1)}{int(m.group(2)) + offset})", message)
    return KernelFault(message, kernel=fault.kernel, signal=fault.signal, block=fault.block,
                       thread=fault.thread, line=line, details=fault.details)


def _trailing_defaults(params) -> tuple:
    """``(param, value)`` for the trailing parameters that have a default in
    the source; ``value`` is a ValueError where it is not a literal."""
    out = []
    for p in reversed(params):
        if not p.has_default:
            break
        try:
            value = p.default_value()
        except ValueError as exc:
            value = exc
        out.append((p, value))
    return tuple(reversed(out))


def _dim3(value, what: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        dims = (int(value), 1, 1)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and all(
            isinstance(v, (int, np.integer)) for v in value):
        dims = tuple(int(v) for v in value) + (1,) * (3 - len(value))
    else:
        raise LaunchConfigError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}.")
    if min(dims) < 1:
        raise LaunchConfigError(f"{what} dimensions must be >= 1, got {value!r}.")
    return dims


class Kernel:
    """A compiled kernel. Call it like the CUDA function, plus launch options::

        saxpy(2.0, x, y, n, grid=(n + 255) // 256, block=256)
        saxpy(2.0, x, y, n, n=n)   # block from the occupancy API, grid to cover n

    Arguments are checked against the signature before launch (count, device
    arrays of the pointee's dtype for pointers, exact C types for scalars);
    a mismatch raises :class:`~workbench.KernelArgumentError`. ``None``
    passes a null pointer; trailing parameters with a default value in the
    source may be left out. ``cooperative=True`` runs every block at once
    (``cudaLaunchCooperativeKernel``), so that ``this_grid().sync()`` works.
    """

    def __init__(self, signature: KernelSignature, module, function):
        self.signature = signature
        self.name = signature.name
        self.module = module
        self.function = function
        self.backend = module.backend
        self._converters = tuple(
            (pointer_converter if p.is_pointer else scalar_converter)(self.name, p, self.backend)
            for p in signature.params)
        self._nparams = len(self._converters)
        self._defaults = _trailing_defaults(signature.params)
        self._check = argument_checker(signature.params, self._converters, self.backend)
        self._block_for_shared: dict[int, int] = {}
        self._configs: dict = {}  # (grid, block, shared_mem, n) -> checked (grid3, block3)
        self._launcher = self.backend.make_launcher(function, signature.params)
        register_check(self._launcher, self._check)  # set_args of graph nodes checks with it
        #: the check of a call: Python numbers as they are where the launcher packs them
        self._check_call = (argument_checker(signature.params, self._converters, self.backend,
                                              exact_numbers=False)
                            if getattr(self._launcher, "packs_python_numbers", False) else self._check)
        self._symbol = self.backend.kernel_symbol(function)  # as CUPTI's records name it
        self._coop_launcher = None
        self._session = session()
        self._fast = fast_call(self._launcher, signature.params, self.backend, self._configs,
                                self._session, self.name, self._symbol)
        self._resources = None
        self._hook = None  # see set_launch_hook
        props = self.backend.device_properties()
        self._max_threads = props.max_threads_per_block
        self._max_block = props.max_block_dims
        self._max_grid = props.max_grid_dims
        self._max_shared = props.shared_memory_per_block_optin

    @property
    def resources(self):
        """Registers, shared, local (spill) and constant memory (KernelResources)."""
        if self._resources is None:
            self._resources = self.module.compiled.resources(self.signature.qualified_name)
        return self._resources

    @property
    def params(self):
        return self.signature.params

    def inspect(self):
        """A report of this kernel's resources, PTX and (where the tools
        exist) SASS."""
        return inspect_kernel(self)

    def occupancy(self, block: int | None = None, shared_mem=0, **options):
        """Theoretical occupancy of this kernel on the active device
        (``block=None``: at the suggested block size); see :func:`workbench.occupancy`."""
        return kernel_occupancy(self, block=block, shared_mem=shared_mem, **options)

    def convert_args(self, args) -> tuple:
        """Check ``args`` against the signature and convert scalars
        (trailing parameters with a default value in the source may be left out)."""
        return tuple(self._check(self._complete(args)))

    def _complete(self, args) -> tuple:
        """``args`` with the default values of the parameters left out, or
        KernelArgumentError saying what the kernel takes."""
        given, want = len(args), self._nparams
        if given == want:
            return args
        missing = want - given
        if 0 < missing <= len(self._defaults):
            values = []
            for p, value in self._defaults[len(self._defaults) - missing:]:
                if isinstance(value, ValueError):
                    raise KernelArgumentError(
                        f"{self.name}(): parameter '{p.name}' defaults to '{p.default}', which "
                        f"the workbench cannot evaluate; pass it explicitly.")
                values.append(value)
            return tuple(args) + tuple(values)
        least = want - len(self._defaults)
        takes = f"{least} to {want}" if least != want else f"{want}"
        raise KernelArgumentError(
            f"{self.name}() takes {takes} argument{'s' if want != 1 else ''} "
            f"({', '.join(map(str, self.params))}), got {given}.")

    def launch_config(self, grid, block, shared_mem: int, n) -> tuple[tuple, tuple]:
        """Checked ``(grid, block)`` as 3-tuples for these launch options."""
        if not isinstance(shared_mem, (int, np.integer)) or isinstance(shared_mem, bool):
            raise LaunchConfigError(f"{self.name}(): shared_mem must be a number of bytes (an int), "
                                    f"got {shared_mem!r}.")
        if n is not None:
            if grid is not None:
                raise LaunchConfigError(f"{self.name}(): pass either n= or grid=, not both.")
            if block is None:
                block = self._block_for_shared.get(shared_mem)
                if block is None:
                    block = self._block_for_shared[shared_mem] = self.backend.suggest_block_size(
                        self.function, shared_mem)
            block3 = _dim3(block, "block")
            grid3 = (max(1, math.ceil(int(n) / (block3[0] * block3[1] * block3[2]))), 1, 1)
        else:
            if grid is None or block is None:
                raise LaunchConfigError(
                    f"{self.name}() needs grid= and block= (e.g. grid=(n + 255) // 256, block=256), "
                    f"or n= to let the workbench choose them.")
            grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        threads = block3[0] * block3[1] * block3[2]
        if threads > self._max_threads or any(b > m for b, m in zip(block3, self._max_block)):
            raise LaunchConfigError(
                f"{self.name}(): block {block3} has {threads} threads; this device allows at most "
                f"{self._max_threads} per block and {self._max_block} per dimension.")
        if any(g > m for g, m in zip(grid3, self._max_grid)):
            raise LaunchConfigError(f"{self.name}(): grid {grid3} exceeds the device's limit {self._max_grid}.")
        r = self.resources
        if r.max_threads_per_block is not None and threads > r.max_threads_per_block:
            raise LaunchConfigError(
                f"{self.name}(): block {block3} has {threads} threads, but this kernel can be "
                f"launched with at most {r.max_threads_per_block} (its __launch_bounds__ or its "
                f"{r.registers} registers per thread); use a smaller block.")
        static = r.shared_bytes or 0
        if not 0 <= shared_mem <= self._max_shared - static:
            raise LaunchConfigError(
                f"{self.name}(): shared_mem={shared_mem} bytes; with the kernel's {static} bytes of "
                f"static shared memory this device allows 0 to {self._max_shared - static} bytes of "
                f"dynamic shared memory per block.")
        return grid3, block3

    def __call__(self, *args, grid=None, block=None, shared_mem: int = 0, stream=None, n=None,
                 cooperative: bool = False):
        fast = self._fast
        try:
            if fast is not None and stream is None and not cooperative:
                status = fast(args, grid, block, shared_mem, n)  # None: done (see fast_call)
                if status is None:
                    return
                if status is not NotImplemented:
                    self._launcher.failed(status)  # (raises: the launch must not be made again below)
                    raise KernelFault(f"{self.name}(): the launch failed (CUresult {status}).")
            self._call(args, grid, block, shared_mem, stream, n, cooperative)
        except KernelFault as exc:
            if not self.module.line_offset:
                raise
            raise _on_cell_lines(exc, self.module.line_offset) from None
        except Exception as exc:
            if is_out_of_memory(exc, self.backend):
                raise _out_of_memory(None, exc) from None
            raise

    def set_launch_hook(self, hook) -> None:
        """Let ``hook`` make every launch of this kernel (None: launch as
        usual). ``hook(kernel, args, options, launch)`` gets the call's
        arguments, its launch options (grid, block, shared_mem, stream, n,
        cooperative) and ``launch()``, which makes the launch; a capability
        (``%%cuda --sanitize``) wraps launches so. Calls then take the slow
        path, which checks for the hook."""
        self._hook = hook
        self._fast = None if hook is not None else fast_call(
            self._launcher, self.signature.params, self.backend, self._configs, self._session,
            self.name, self._symbol)

    def _call(self, args, grid, block, shared_mem, stream, n, cooperative) -> None:
        """A call in Python: checked, configured and launched through the timing log."""
        hook = self._hook
        if hook is not None:
            options = {"grid": grid, "block": block, "shared_mem": shared_mem, "stream": stream,
                       "n": n, "cooperative": cooperative}
            return hook(self, args, options, lambda: self._launch(args, grid, block, shared_mem,
                                                                  stream, n, cooperative))
        return self._launch(args, grid, block, shared_mem, stream, n, cooperative)

    def _launch(self, args, grid, block, shared_mem, stream, n, cooperative) -> None:
        b = self.backend
        if self._session.backend is not b:
            raise LaunchConfigError(self._other_backend_message())
        if len(args) != self._nparams:
            args = self._complete(args)  # defaults, or raises with the signature
        converted = self._check_call(args)
        key = (grid, block, shared_mem, n)
        try:
            grid3, block3 = self._configs[key]
        except (KeyError, TypeError):  # new, or unhashable (lists)
            grid3 = None
        if grid3 is None:  # (checked outside the except: a bad one's error chains to nothing)
            grid3, block3 = self.launch_config(grid, block, shared_mem, n)
            if len(self._configs) > 256:
                self._configs.clear()
            try:
                self._configs[key] = (grid3, block3)
            except TypeError:
                pass
        launcher = self._launcher
        if cooperative:
            launcher = self._cooperative_launcher(grid3, block3, shared_mem)
        self._session.timing_log.timed_launch(
            b, self.name, grid3, block3, shared_mem,
            _launch_stream(b, stream, f"{self.name}()") if stream is not None else b.current_stream(),
            launcher, converted, "cuda", self._symbol)

    def _cooperative_launcher(self, grid3, block3, shared_mem: int):
        """The launcher of a cooperative launch (every block at once, so that
        ``this_grid().sync()`` works), after checking that the grid fits on
        the device at once, as ``cudaLaunchCooperativeKernel`` requires."""
        threads = block3[0] * block3[1] * block3[2]
        blocks = grid3[0] * grid3[1] * grid3[2]
        per_sm = self.occupancy(block=threads, shared_mem=shared_mem).active_blocks
        most = per_sm * self.backend.device_properties().multiprocessors
        if blocks > most:
            raise LaunchConfigError(
                f"{self.name}(): a cooperative launch runs every block at once, and this device "
                f"holds at most {most} blocks of {threads} threads of this kernel "
                f"({per_sm} per SM); the grid has {blocks}. Use a smaller grid (loop over the "
                f"data inside the kernel), e.g. grid={most}.")
        if self._coop_launcher is None:
            self._coop_launcher = self.backend.make_launcher(self.function, self.signature.params,
                                                             cooperative=True)
            register_check(self._coop_launcher, self._check)
        return self._coop_launcher

    def _other_backend_message(self) -> str:
        b, active = self.backend, self._session.backend
        if active is not None and active.name == b.name:
            return (f"{self.name} was compiled on another {b.name} backend (one made before "
                    f"wb.backend(...) changed the device or its memory size, say); the active "
                    f"one is {active.describe()}. Run its %%cuda cell (or wb.compile) again, and "
                    f"copy arrays made before with wb.to_device(np.array(x)).")
        return (f"{self.name} was compiled for the {b.name} backend but the active backend is "
                f"{active.name if active else 'none'}; run its %%cuda cell (or wb.compile) "
                f"again, or switch back with wb.backend({b.name!r}).")

    def __reduce__(self):
        # pickled (for a Dask worker) as its source and options: compiled again there
        return self.module.reduce_kernel(self)

    def __repr__(self) -> str:
        summary = self.resources.summary()
        return (f"<wb.Kernel {self.signature}{' | ' + summary if summary else ''}"
                f" | {self.backend.name}>")

    def _repr_html_(self) -> str:
        return (f"<div><code>{html.escape(str(self.signature))}</code>"
                + html_fields((*self.resources.fields(), ("backend", self.backend.name)))
                + "</div>")


class KernelTemplate:
    """The instantiations of a templated kernel: ``scale["float"]`` or
    ``scale[np.float32]`` is the :class:`Kernel` for ``scale<float>``."""

    _C_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
                np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
                np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long",
                np.dtype(np.float16): "__half", np.dtype(np.int8): "signed char",
                np.dtype(np.uint8): "unsigned char", np.dtype(np.int16): "short"}

    def __init__(self, name: str, instances: dict[str, Kernel]):
        self.name = name
        self.instances = instances

    def _key(self, args) -> str:
        args = args if isinstance(args, tuple) else (args,)
        parts = []
        for a in args:
            try:
                parts.append(self._C_NAMES.get(np.dtype(a), str(a)) if not isinstance(a, (str, int)) else str(a))
            except TypeError:
                parts.append(str(a))
        return f"{self.name}<{', '.join(parts)}>"

    def __getitem__(self, args) -> Kernel:
        if isinstance(args, str) and args.replace(" ", "") in {
                e.replace(" ", "") for e in self.instances}:  # the full name expression
            return next(k for e, k in self.instances.items()
                        if e.replace(" ", "") == args.replace(" ", ""))
        key = self._key(args)
        norm = key.replace(" ", "")
        for expr, k in self.instances.items():
            if expr.replace(" ", "") == norm:
                return k
        raise NotInstantiated(f"{key} was not instantiated; compile with --instantiate '{key}' "
                              f"(instantiated: {', '.join(self.instances) or 'none'}).")

    def __call__(self, *args, **kwargs):
        if not self.instances:
            raise KernelArgumentError(
                f"{self.name} is a template with no instantiation; compile it with "
                f"--instantiate '{self.name}<float>' (or the types you need), then call "
                f"{self.name}['float'](...).")
        if len(self.instances) != 1:
            first = next(iter(self.instances))
            inner = first[first.index("<") + 1:first.rindex(">")]
            raise KernelArgumentError(
                f"{self.name} is a template with {len(self.instances)} instantiations "
                f"({', '.join(self.instances)}); pick one, e.g. {self.name}[{inner!r}](...).")
        return next(iter(self.instances.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<wb.KernelTemplate {self.name}: {', '.join(self.instances) or 'no instantiations'}>"
