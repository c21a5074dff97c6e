"""Profiles on the CPU simulator: the counts of an instrumented launch
(:meth:`~workbench.backends.contract.Instrumentation.count_launches`) as the same
:class:`~workbench.profiling.report.NcuReport` a GPU gives, its metrics under
Nsight Compute's names (:mod:`.counters`), a predicted time on a chosen GPU
(:mod:`.predict`), the source lines worst first (with advice) and access maps.

``wb.profile`` runs the launch here, on copies of the device arrays (the
launch changes the copies, never the caller's arrays, as on a GPU); ``%%ncu``
runs the cell in a child process, as on a GPU, whose launches are counted.
"""
from __future__ import annotations

import weakref

from ..backends.counting import LaunchCounts
from ..core.kernel import Kernel, KernelTemplate
from ..errors import KernelArgumentError, ProfilerUnavailable
from ..runtime.session import backend as active_backend
from ..runtime.session import session
from . import counters
from .gpus import gpu_figures
from .predict import predict
from .report import KernelProfile, NcuReport


#: The latest profile counted on the simulator of each kernel (the kernel panel shows its lines).
_LATEST: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def latest_profile(kernel) -> KernelProfile | None:
    """The latest :class:`KernelProfile` counted on the simulator of
    ``kernel`` (by ``wb.profile`` or ``%%ncu`` in this session), or None."""
    try:
        return _LATEST.get(kernel)
    except TypeError:
        return None


def remember(report: NcuReport, modules) -> None:
    """Keep each counted launch of ``report`` as its kernel's latest profile."""
    for k in report:
        if not k.simulated:
            continue
        for m in modules:
            found = [kern for kern in m.kernels.values() if kern.name == k.name]
            for kern in found:
                _LATEST[kern] = k


def default_device(b) -> str:
    """The GPU a simulator's predictions are for: its virtual device's model."""
    props = b.device_properties()
    return (props.extra or {}).get("model") or props.name


def require_counting(b, what: str) -> None:
    """:class:`~workbench.ProfilerUnavailable` unless ``b`` can count launches."""
    if not b.simulated:
        raise ProfilerUnavailable(f"{what}: counting on the simulator needs the simulator backend")
    if getattr(b, "checked", False):
        raise ProfilerUnavailable(f"{what} counts accesses with the plain simulator, not the checked "
                                  "one: wb.backend('simulator', checked=False), then run the "
                                  "cell again")


def profile_launch(kernel, args, *, grid=None, block=None, shared_mem: int = 0, n=None,
                   device=None, max_blocks: int | None = None) -> NcuReport:
    """One launch of ``kernel(*args)`` counted on the simulator (see the module docstring)."""
    if isinstance(kernel, KernelTemplate):
        raise KernelArgumentError(
            f"wb.profile: {kernel.name} is a template; pick an instance, e.g. "
            f"{kernel.name}['float'] (instances: {', '.join(kernel.instances) or 'none'}).")
    if not isinstance(kernel, Kernel):
        raise KernelArgumentError(
            f"wb.profile takes a CUDA C++ kernel (from %%cuda or wb.compile), got "
            f"{type(kernel).__name__}; Numba and Triton kernels have no counts on the simulator.")
    b = kernel.backend
    require_counting(b, "wb.profile")
    gpu = gpu_figures(device or default_device(b))
    args = kernel.convert_args(args)  # the caller's mistakes surface here
    copies, arrays = [], []
    for p, a in zip(kernel.signature.params, args):
        if a is not None and b.is_device_array(a):
            c = b.allocate(a.shape, a.dtype)
            b.copy(c, a)
            copies.append(c)
            arrays.append((p.name, b.device_pointer(c), c.nbytes))
        else:
            copies.append(a)
    with b.count_launches(max_blocks=max_blocks) as launches:
        kernel(*copies, grid=grid, block=block, shared_mem=shared_mem, n=n)
    profiles = [kernel_profile(c, kernel, i, gpu, tuple(arrays)) for i, c in enumerate(launches)]
    if profiles:
        _LATEST[kernel] = profiles[-1]
    return NcuReport(profiles, target=f"{kernel.name} (one launch, counted on the simulator)")


def find_kernel(counts: LaunchCounts, modules) -> Kernel | None:
    """The kernel of ``modules`` (compiled modules) whose launch ``counts`` are:
    of the kernels of that name (two cells may define one each), the one whose
    module ran it."""
    named = []
    for m in modules:
        candidates = list(m.kernels.values())
        for template in m.templates.values():
            candidates += list(template.instances.values())
        named += [k for k in candidates if getattr(k.function, "name", None) == counts.kernel]
    ran = counts.module_path
    return next((k for k in named
                 if ran and str(getattr(getattr(k.function, "module", None), "path", "")) == ran),
                named[0] if named else None)


def kernel_profile(counts: LaunchCounts, kernel: Kernel | None, index: int, gpu,
                   arrays=()) -> KernelProfile:
    """A :class:`KernelProfile` of one counted launch of ``kernel`` with a
    prediction on ``gpu`` (:class:`.gpus.GpuFigures`)."""
    source = kernel.module.source if kernel is not None else ""
    offset = kernel.module.line_offset if kernel is not None else 0
    metrics = counters.metrics(counts, source)
    blocks_per_sm, max_warps, registers, theoretical = None, 64, None, None
    if kernel is not None:
        from ..hardware.occupancy import occupancy  # (the core's occupancy rules)
        props = _device_properties(gpu.key)
        threads = counts.block[0] * counts.block[1] * counts.block[2]
        try:
            occ = occupancy(kernel, block=threads, shared_mem=counts.shared_mem, device=props)
            blocks_per_sm = occ.active_blocks
            theoretical = occ.occupancy * 100
        except Exception:  # noqa: BLE001 -- no occupancy: the model assumes the threads' limit
            blocks_per_sm = None
        max_warps = props.max_threads_per_multiprocessor // 32
        registers = kernel.resources.registers
    prediction = predict(counts, metrics, gpu, blocks_per_sm, max_warps)
    name = kernel.name if kernel is not None else counts.kernel
    return KernelProfile(
        id=index, name=name, block=counts.block, grid=counts.grid, registers=registers,
        theoretical_occupancy_pct=theoretical, flops=prediction.flops or None, metrics=metrics,
        predicted=prediction, lines=counters.line_rows(counts, source, offset), counts=counts,
        arrays=tuple(arrays), estimated=counters.ESTIMATED)


def _device_properties(key: str):
    """The device properties of GPU ``key`` (the simulator's virtual devices
    are those of the real GPUs)."""
    from ..backends.simulator.devices import virtual_device  # lazy: the simulator's table
    return virtual_device(key)


def report(launches, modules, target: str, device) -> NcuReport:
    """An :class:`NcuReport` of counted ``launches`` of kernels of ``modules``."""
    gpu = gpu_figures(device)
    return NcuReport([kernel_profile(c, find_kernel(c, modules), i, gpu)
                      for i, c in enumerate(launches)], target=target)


def count_code(run, *, kernel=None, launch_skip: int = 0, launch_count=None, device=None):
    """Run ``run()`` (a cell's code, in the profiling child) with its launches
    counted; the report of the counted ones."""
    b = active_backend()
    require_counting(b, "%%ncu")
    with b.count_launches(kernel=kernel, skip=launch_skip, count=launch_count) as launches:
        run()
    modules = [m for m in session().modules.values() if m.backend is b]
    return report(launches, modules, "the cell (counted on the simulator)",
                  device or default_device(b))
