"""``wb.Kernel``: a compiled ``__global__`` function that checks its arguments,
launches on the active backend and logs a timed record of every launch."""
from __future__ import annotations

import functools
import html
import math
import re

import numpy as np

from ..errors import KernelArgumentError, KernelFault, LaunchConfigError
from ..hardware.inspect import inspect_kernel
from ..hardware.occupancy import occupancy as kernel_occupancy
from ..present.tables import html_fields
from ..memory.oom import is_out_of_memory, out_of_memory as _out_of_memory
from ..runtime.session import session
from .signature import KernelSignature, Param
from .graphs import register_check
from .streams import launch_stream as _launch_stream

_PY_NUMBERS = (bool, int, float)


def _describe(value) -> str:
    """What a user passed, in words that do not depend on the backend:
    "a float64 device array of shape (4,)", "the int 3"."""
    if isinstance(value, np.ndarray) and type(value) is np.ndarray:
        return f"a {value.dtype} host NumPy array of shape {value.shape}"
    if hasattr(value, "dtype") and hasattr(value, "shape") and np.ndim(value) > 0:
        return f"a {value.dtype} device array of shape {tuple(value.shape)}"
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar ({value!r})"
    return f"the {type(value).__name__} {value!r}"


def _pointer_converter(kernel: str, p: Param, backend):
    """A function that accepts a device array for pointer parameter ``p``."""
    expected = p.dtype
    vector = p.vector
    is_device = backend.is_device_array
    where = f"{kernel}(): parameter '{p.name}' ({p.ctype})"

    def accepts(dtype) -> bool:
        if p.pointer_depth > 1:  # T**: an array of device pointers
            return dtype in (np.dtype(np.uint64), np.dtype(np.int64))
        if expected is not None:
            return dtype == expected
        if vector is not None:
            comp, count = vector
            return dtype == comp or dtype.itemsize == comp.itemsize * count and (
                dtype.kind == "V" or (dtype.kind == "c" and comp.kind == "f" and count == 2))
        return True  # a struct or template type we cannot check

    def slow(a):
        if a is None:  # a null pointer, as NULL / nullptr in C++
            return None
        if is_device(a):
            if accepts(a.dtype):
                if a.size > 1 and not a.flags.c_contiguous:
                    raise KernelArgumentError(
                        f"{where} gets the address of the first element only, but this array "
                        f"is a strided view (shape {tuple(a.shape)}, strides {tuple(a.strides)}): "
                        f"the kernel would read the wrong elements. Pass "
                        f"wb.xp.ascontiguousarray(...) of it.")
                return a
            want = (expected if expected is not None else
                    f"{vector[0]} (x{vector[1]}) or a structured dtype" if vector else "uint64 (pointers)")
            raise KernelArgumentError(
                f"{where} takes a device array of {want}, got {_describe(a)}. "
                f"Convert it with .astype({getattr(want, 'name', want)!r}) or declare the parameter "
                f"with the matching C type.")
        foreign = backend.foreign_array(a)
        if foreign:
            raise KernelArgumentError(f"{where} got {foreign}.")
        if isinstance(a, np.ndarray):
            raise KernelArgumentError(
                f"{where} needs device memory, got a host NumPy array of shape {a.shape}. "
                f"Copy it first: wb.to_device(array).")
        raise KernelArgumentError(f"{where} is a pointer: pass a device array "
                                  f"(wb.to_device / wb.allocate) or None (a null pointer), "
                                  f"not {_describe(a)}.")

    fast_type = backend.device_array_type
    if expected is None or p.pointer_depth > 1 or fast_type is None:
        return slow

    contiguous = _contiguous_test(fast_type)

    def convert(a):
        if type(a) is fast_type and a.dtype == expected and contiguous(a):
            return a
        return slow(a)

    return convert


def _contiguous_test(array_type):
    """``a -> bool`` for C-contiguity, by the cheapest attribute the type has
    (CuPy's ndarray keeps it as ``_c_contiguous``)."""
    if array_type is not None and hasattr(array_type, "_c_contiguous"):
        return lambda a: a._c_contiguous
    return lambda a: a.flags.c_contiguous


def _scalar_converter(kernel: str, p: Param, backend):
    """A function that turns a Python or NumPy scalar into the exact C type."""
    where = f"{kernel}(): parameter '{p.name}' ({p.ctype})"
    dt = p.dtype
    is_device = backend.is_device_array
    if dt is None and p.vector is not None:
        comp, count = p.vector
        vdt = np.dtype([(f, comp) for f in "xyzw"[:count]])

        def convert_vector(a):
            if isinstance(a, np.void) and a.dtype.itemsize == vdt.itemsize:
                return a
            if isinstance(a, (tuple, list)) and len(a) == count:
                return np.array(tuple(a), dtype=vdt)[()]
            raise KernelArgumentError(f"{where} takes a tuple of {count} numbers "
                                      f"(or a NumPy structured scalar), got {_describe(a)}.")
        return convert_vector
    if dt is None:  # a struct by value or an unresolved template type
        def convert_opaque(a):
            if isinstance(a, np.generic):
                return a
            raise KernelArgumentError(f"{where}: the workbench does not know C type '{p.base}'; "
                                      f"pass a NumPy scalar (e.g. a structured np.void) with its exact bytes.")
        return convert_opaque

    scalar_type = dt.type
    integer = dt.kind in "iub"
    info = np.iinfo(dt) if dt.kind in "iu" else None

    def _to_float(a):
        """A finite number that the C type cannot hold is an error, not inf."""
        try:
            with np.errstate(over="ignore"):
                value = scalar_type(a)
        except OverflowError:
            value = None
        if value is None or (np.isinf(value) and math.isfinite(a)):
            raise KernelArgumentError(f"{where}: {a!r} does not fit in {p.base} "
                                      f"(largest {np.finfo(dt).max}).")
        return value

    def convert(a):
        t = type(a)
        if t is scalar_type:
            return a
        if t is float:
            if not integer:
                return _to_float(a)
        elif t is int or t is bool or isinstance(a, np.integer):
            if dt.kind == "b":
                if a in (0, 1):
                    return scalar_type(a)
            elif info is None:
                return _to_float(a)
            elif info.min <= a <= info.max:
                return scalar_type(a)
            else:
                raise KernelArgumentError(
                    f"{where}: {a} does not fit in {p.base} (range {info.min}..{info.max}).")
        elif isinstance(a, np.floating):
            if not integer:
                return _to_float(a)
        if t is float or isinstance(a, np.floating):
            raise KernelArgumentError(f"{where} is an integer, got {_describe(a)}. "
                                      f"Pass int(value) if truncation is what you want.")
        if is_device(a) or isinstance(a, np.ndarray):
            raise KernelArgumentError(f"{where} is a scalar, got {_describe(a)}. "
                                      f"Declare the parameter as {p.base}* to pass an array.")
        raise KernelArgumentError(f"{where} takes a {p.base} number, got {_describe(a)}.")

    return convert


def _inline_test(p):
    """What a call tests inline for parameter ``p`` before trusting it:
    ``("pointer", dtype)`` (a device array of that dtype), ``("float", low,
    high)`` or ``("int", low, high)`` (a Python number in range); None where
    only its converter decides. The generated checker and the C call
    (``_fast_call``) both make these tests."""
    dt = p.dtype
    if dt is None:
        return None
    if p.is_pointer:
        return ("pointer", dt) if p.pointer_depth == 1 else None
    if dt.kind == "f":
        top = float(np.finfo(dt).max)
        return ("float", -top, top)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return ("int", int(info.min), int(info.max))
    return None


def _argument_checker(params, converters, backend, exact_numbers: bool = True):
    """One function that checks and converts a whole argument tuple.

    It is generated (as ``collections.namedtuple`` and ``dataclasses`` do)
    so that the common cases -- a Python float for a float parameter, an int
    in range for an integer one, a device array of the right dtype for a
    pointer -- are inline tests with no call; anything else falls back to the
    parameter's full converter, which raises the helpful error. With
    ``exact_numbers=False`` a Python number that passed its range test stays
    as it is (for a launcher that packs numbers into their C types itself)
    instead of becoming a NumPy scalar of the exact type.
    """
    ns: dict = {"array_type": backend.device_array_type}
    fast_contiguous = ns["array_type"] is not None and hasattr(ns["array_type"], "_c_contiguous")
    items = []
    for i, (p, conv) in enumerate(zip(params, converters)):
        a = f"a{i}"
        ns[f"c{i}"] = conv
        test = _inline_test(p)
        kind = test[0] if test is not None else None
        if kind == "pointer" and ns["array_type"] is not None:
            ns[f"d{i}"] = test[1]
            contiguous = f" and {a}._c_contiguous" if fast_contiguous else ""
            items.append(f"{a} if type({a}) is array_type and ({a}.dtype is d{i} or {a}.dtype == d{i})"
                         f"{contiguous} else c{i}({a})")
        elif kind in ("float", "int"):
            ns[f"t{i}"] = p.dtype.type
            value = f"t{i}({a})" if exact_numbers else a
            items.append(f"{value} if type({a}) is {kind} and {test[1]!r} <= {a} <= {test[2]!r} "
                         f"else c{i}({a})")
        else:
            items.append(f"c{i}({a})")
    names = ", ".join(f"a{i}" for i in range(len(params)))
    unpack = f"    {names}{',' if len(params) == 1 else ''} = args\n" if params else ""
    src = f"def check(args):\n{unpack}    return [{', '.join(items)}]\n"
    exec(_compiled(src), ns)  # noqa: S102 -- generated from parsed parameter types only
    return ns["check"]


@functools.lru_cache(maxsize=512)
def _compiled(src: str):
    return compile(src, "<workbench argument checker>", "exec")


def _fast_call(launcher, params, backend, configs: dict, sess, name: str, symbol):
    """The launcher's whole-call object for this kernel (see
    ``backends/native/launch.c``), or None where it has none or a parameter
    takes something it does not test. It takes the calls the generated
    checker passes on its inline tests -- a device array of the pointee's
    dtype, a Python float or int in range -- with a configuration already in
    ``configs`` on the current stream, while the log times by CUPTI or is
    paused; it answers NotImplemented for every other call, which then takes
    the Python path (and its errors)."""
    make = getattr(launcher, "fast_call", None)
    array_type = backend.device_array_type
    if make is None or array_type is None:
        return None
    if not hasattr(array_type, "_c_contiguous"):  # (the test a strided view must fail)
        return None
    checks = []
    for p in params:
        test = _inline_test(p)
        if test is None or (test[0] == "float" and p.dtype.itemsize < 4):  # (no C half)
            return None
        checks.append((array_type, test[1]) if test[0] == "pointer" else test[1:])
    log = sess.timing_log
    template, slots = log.cupti_record_template(backend, name, "cuda", symbol)
    return make(tuple(checks), configs, sess, log, template, slots)


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
            (_pointer_converter if p.is_pointer else _scalar_converter)(self.name, p, self.backend)
            for p in signature.params)
        self._nparams = len(self._converters)
        self._defaults = _trailing_defaults(signature.params)
        self._check = _argument_checker(signature.params, self._converters, self.backend)
        self._block_for_shared: dict[int, int] = {}
        self._configs: dict = {}  # (grid, block, shared_mem, n) -> checked (grid3, block3)
        self._launcher = self.backend.make_launcher(function, signature.params)
        register_check(self._launcher, self._check)  # set_args of graph nodes checks with it
        #: the check of a call: Python numbers as they are where the launcher packs them
        self._check_call = (_argument_checker(signature.params, self._converters, self.backend,
                                              exact_numbers=False)
                            if getattr(self._launcher, "packs_python_numbers", False) else self._check)
        self._symbol = self.backend.kernel_symbol(function)  # as CUPTI's records name it
        self._coop_launcher = None
        self._session = session()
        self._fast = _fast_call(self._launcher, signature.params, self.backend, self._configs,
                                self._session, self.name, self._symbol)
        self._resources = None
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
                status = fast(args, grid, block, shared_mem, n)  # None: done (see _fast_call)
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

    def _call(self, args, grid, block, shared_mem, stream, n, cooperative) -> None:
        """A call in Python: checked, configured and launched through the timing log."""
        b = self.backend
        if self._session.backend is not b:
            raise LaunchConfigError(self._other_backend_message())
        if len(args) != self._nparams:
            args = self._complete(args)  # defaults, or raises with the signature
        converted = self._check_call(args)
        try:
            key = (grid, block, shared_mem, n)
            grid3, block3 = self._configs[key]
        except (KeyError, TypeError):  # new, or unhashable (lists)
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
        raise KeyError(f"{key} was not instantiated; compile with --instantiate '{key}' "
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
