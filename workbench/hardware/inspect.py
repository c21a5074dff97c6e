"""What a compiled kernel uses: registers, shared, local and constant memory,
its largest block, its PTX and, where the CUDA binary tools are installed,
its SASS.

    >>> from workbench.hardware.inspect import inspect_kernel
    >>> report = inspect_kernel(kernel)   # or kernel.inspect()
    >>> report.registers, report.spill_stores
    >>> print(report.kernel_ptx)

PTX and SASS come from NVIDIA's NVRTC for the kernel's architecture, on the
GPU and on the simulator alike: the result the backend kept when it compiled
the module (``CompiledModule.nvrtc``), else the module compiled again by
:func:`workbench.backends.nvrtc.check_with_nvrtc` on first access (CuPy
compiling for its own device keeps no PTX).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from ..errors import ArgumentTypeError
from .. import subprocesses
from ..backends.contract import CompileOptions, KernelResources
from ..backends.nvrtc import check_with_nvrtc
from ..present.na import NA, or_na
from ..present.tables import html_fields, pandas
from ..present.units import format_bytes
from ..runtime.session import backend


def _kept_nvrtc(kernel):
    """The ``NvrtcResult`` the backend kept when it compiled the kernel's module, or None."""
    compiled = getattr(getattr(kernel, "module", None), "compiled", None)
    return getattr(compiled, "nvrtc", None)


def _kernel_symbol(kernel, nvrtc_result) -> str:
    name = getattr(kernel, "name", "")
    return nvrtc_result.lowered_names.get(name, name) if nvrtc_result is not None else name


def extract_entry(ptx: str, symbol: str) -> str:
    """The PTX of one ``.entry`` (from its directive to its closing brace), or ''."""
    match = re.search(r"^[^\n]*\.entry\s+" + re.escape(symbol) + r"\s*\(", ptx, re.MULTILINE)
    if not match:
        return ""
    depth, i = 0, ptx.find("{", match.end())
    if i < 0:
        return ""
    for j in range(i, len(ptx)):
        if ptx[j] == "{":
            depth += 1
        elif ptx[j] == "}":
            depth -= 1
            if depth == 0:
                return ptx[match.start():j + 1]
    return ptx[match.start():]


def disassemble(cubin: bytes, symbol: str) -> tuple[str | None, str]:
    """SASS of ``symbol`` in ``cubin`` through ``cuobjdump`` or ``nvdisasm``:
    ``(text, "")``, or ``(None, why not)``."""
    tools = [t for t in ("cuobjdump", "nvdisasm") if shutil.which(t)]
    if not tools:
        return None, "cuobjdump and nvdisasm were not found on PATH (they come with the CUDA toolkit)"
    with tempfile.TemporaryDirectory(prefix="workbench-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        errors = []
        for tool in tools:
            # one function if the tool finds it by name, else the whole cubin
            for cmd in (([tool, "-sass", "-fun", symbol, path], [tool, "-sass", path])
                        if tool == "cuobjdump" else
                        ([tool, "-c", "-fun", symbol, path], [tool, "-c", path])):
                try:
                    out = subprocesses.run(cmd, text=True, timeout=60)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    errors.append(f"{tool}: {exc}")
                    continue
                if out.returncode == 0 and out.stdout.strip():
                    return out.stdout, ""
                errors.append(f"{' '.join(cmd[:-1])}: {(out.stderr or out.stdout).strip()[:300]}")
        return None, "disassembly failed: " + "; ".join(errors)


class KernelReport:
    """The resources of one compiled kernel (from the backend; on the
    simulator, the figures NVRTC reports for the target architecture).

    Sizes in bytes: ``static_shared`` per block, ``max_dynamic_shared`` the
    most dynamic shared memory a launch may ask for without opting in further,
    ``local_bytes`` per thread (stack and spills), ``const_bytes`` of user
    ``__constant__`` memory. ``ptx`` is the module's PTX, ``kernel_ptx`` this
    kernel's entry, ``sass`` its machine code (NA with ``sass_reason`` when no
    disassembler is installed).
    """

    def __init__(self, kernel, device=None):
        self._kernel = kernel
        self.name = getattr(kernel, "name", "kernel")
        r = getattr(kernel, "resources", None)
        if not isinstance(r, KernelResources):
            kept = _kept_nvrtc(kernel)
            r = kept.resources.get(self.name) if kept is not None else None
        self.resources = r if isinstance(r, KernelResources) else KernelResources()
        self._device = device

    # -- resources ---------------------------------------------------------
    registers = property(lambda self: or_na(self.resources.registers))
    static_shared = property(lambda self: or_na(self.resources.shared_bytes))
    local_bytes = property(lambda self: or_na(self.resources.local_bytes))
    const_bytes = property(lambda self: or_na(self.resources.const_bytes))
    spill_stores = property(lambda self: or_na(self.resources.spill_stores))
    spill_loads = property(lambda self: or_na(self.resources.spill_loads))
    max_threads_per_block = property(lambda self: or_na(self.resources.max_threads_per_block))

    @property
    def arch(self) -> str:
        if self.resources.arch:
            return self.resources.arch
        p = self._properties()
        return f"sm_{p.compute_capability[0]}{p.compute_capability[1]}" if p else "sm_90"

    def _properties(self):
        if self._device is not None:
            return self._device
        try:
            return backend().device_properties()
        except Exception:
            return None

    @property
    def max_dynamic_shared(self):
        """The kernel's ``max_dynamic_shared_size_bytes`` where the backend
        has it, else the device's default per-block limit less the static size."""
        value = getattr(getattr(self._kernel, "function", None), "max_dynamic_shared_size_bytes", None)
        if isinstance(value, int):
            return value
        p = self._properties()
        if p is None or self.static_shared is NA:
            return NA
        return max(p.shared_memory_per_block - self.static_shared, 0)

    # -- code -------------------------------------------------------------------
    @functools.cached_property
    def _nvrtc(self):
        """``(NvrtcResult or None, reason)``: what NVRTC made of the kernel's
        module when the backend compiled it, else the module compiled again.
        A kernel of another language (Numba, Triton: ``workbench.languages``)
        gives its own code through ``compiled_code()``, in the same shape."""
        own = getattr(self._kernel, "compiled_code", None)
        if callable(own):
            return own()
        kept = _kept_nvrtc(self._kernel)
        if kept is not None:
            return kept, ""
        module = getattr(self._kernel, "module", None)
        source = getattr(module, "source", None)
        if not source:
            return None, "the kernel's source is not known"
        options = getattr(module, "options", None)
        if not isinstance(options, CompileOptions):
            options = CompileOptions()
        names = [] if "<" in self.name else [self.name]
        try:
            return check_with_nvrtc(source, options, names, arch=self.arch), ""
        except Exception as exc:  # NVRTC missing or a different failure: PTX is N/A
            return None, f"NVRTC could not produce PTX: {exc}".splitlines()[0]

    @property
    def log(self):
        """NVRTC's log for the kernel's module (warnings; '' when clean), NA without NVRTC."""
        result, _ = self._nvrtc
        return result.log if result is not None else NA

    @property
    def ptx(self):
        result, _ = self._nvrtc
        return result.ptx if result is not None else NA

    @property
    def kernel_ptx(self):
        result, _ = self._nvrtc
        if result is None:
            return NA
        return extract_entry(result.ptx, _kernel_symbol(self._kernel, result)) or result.ptx

    @functools.cached_property
    def _sass(self):
        result, reason = self._nvrtc
        if result is None:
            return None, reason
        if not result.cubin:
            return None, "NVRTC produced no cubin"
        return disassemble(result.cubin, _kernel_symbol(self._kernel, result))

    @property
    def sass(self):
        text, _ = self._sass
        return NA if text is None else text

    @property
    def sass_reason(self) -> str:
        """Why :attr:`sass` is NA ('' when it is there)."""
        return self._sass[1]

    @property
    def ptx_reason(self) -> str:
        return self._nvrtc[1]

    # -- presentation -----------------------------------------------------------
    LABELS = {"registers": "Registers per thread", "static_shared": "Static shared memory",
              "max_dynamic_shared": "Max dynamic shared memory", "local_bytes": "Local memory per thread",
              "spill_stores": "Spill stores", "spill_loads": "Spill loads",
              "const_bytes": "Constant memory", "max_threads_per_block": "Max threads per block",
              "arch": "Architecture"}

    def to_dict(self) -> dict:
        """The figures (not the code), JSON-safe; NA stays "N/A"."""
        return {"kernel": self.name, **{k: getattr(self, k) for k in self.LABELS}}

    def formatted(self) -> dict:
        """The figures as text, by label: sizes in bytes with their unit."""
        out = {}
        for key, label in self.LABELS.items():
            value = getattr(self, key)
            sized = key in ("static_shared", "max_dynamic_shared", "local_bytes", "const_bytes",
                            "spill_stores", "spill_loads")
            out[label] = format_bytes(value) if sized and value is not NA else str(value)
        return out

    def __repr__(self) -> str:
        width = max(map(len, self.LABELS.values()))
        lines = [f"Kernel {self.name}:"]
        lines += [f"  {k:<{width}}  {v}" for k, v in self.formatted().items()]
        lines.append("  (.ptx, .kernel_ptx and .sass hold the code)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_fields(self.formatted().items(), title=f"Kernel {self.name}")

    def to_pandas(self):
        """The figures as a one-row DataFrame."""
        return pandas().DataFrame([self.to_dict()])


def inspect_kernel(kernel, device=None) -> KernelReport:
    """The :class:`KernelReport` of a compiled :class:`workbench.Kernel`.

    ``device``: :class:`~workbench.backends.contract.DeviceProperties` used for the
    default dynamic shared-memory limit (default: the active device).
    """
    if getattr(kernel, "resources", None) is None and not hasattr(kernel, "module"):
        raise ArgumentTypeError(
            f"inspect_kernel() needs a workbench Kernel, got {type(kernel).__name__}; "
            "compile one with %%cuda or wb.compile()")
    return KernelReport(kernel, device)
