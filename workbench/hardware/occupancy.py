"""Occupancy of a kernel: how many of its blocks and warps fit on one SM, and
which limit stops more from fitting.

    >>> occ = wb.occupancy(kernel, block=256, shared_mem=4096)
    >>> occ.limit, occ.occupancy, occ.suggested_block
    >>> occ.plot()          # occupancy against block size

The rules are those of the CUDA driver (see
:mod:`workbench.hardware.occupancy_rules`); on a GPU the result equals
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (``benchmarks/occupancy_check.py``
checks it). On the simulator the virtual device's properties are used, with
the register counts NVRTC reports for the kernel where NVRTC is installed.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Union

from ..backends.contract import DeviceProperties, KernelResources
from ..errors import ArgumentTypeError, LaunchConfigError
from ..present.figures import figure_axes
from ..present.tables import html_table, pandas
from ..present.units import format_bytes as _bytes
from ..runtime.session import backend
from .occupancy_rules import (BLOCK_SIZE, BLOCKS, DYNAMIC_SHARED, REGISTERS, SHARED,
                              WARPS, BlockLimits, KernelUsage, SMModel, blocks_per_sm)

_UNLIMITED = 1 << 30
SharedMem = Union[int, Callable[[int], int]]


def _as_int(value):
    """``value`` as a Python int when it is an integer of any kind (``int``,
    ``np.int64``...; not ``bool``), else ``None``."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _blocks(n) -> str:
    if n is None:
        return "not applied"
    return "unlimited" if n >= _UNLIMITED else str(n)


@dataclass(frozen=True)
class _Context:
    """Everything an occupancy figure depends on besides the launch."""

    kernel_name: str
    device_name: str
    sm: SMModel
    usage: KernelUsage
    notes: tuple[str, ...] = ()

    def limits(self, block: int, shared_mem: SharedMem) -> BlockLimits:
        dynamic = shared_mem(block) if callable(shared_mem) else shared_mem
        return blocks_per_sm(self.sm, self.usage, block, int(dynamic))

    def block_sizes(self) -> range:
        step = self.sm.warp_size
        return range(step, self.sm.max_threads_per_block + 1, step)


class Occupancy:
    """The occupancy of one launch configuration on one device.

    ``active_blocks`` (per SM), ``active_warps``, ``max_warps`` and
    ``occupancy`` (``active_warps / max_warps``, 0..1); ``limits`` maps each
    limit ("warps", "registers", "shared memory", "blocks") to the blocks per
    SM it allows (``None`` where it could not be applied); ``binding`` names
    the limits equal to the result, ``limit`` the first of them. A launch that
    cannot run at all has ``active_blocks == 0`` and ``limit`` "block size"
    or "dynamic shared memory" when those are why.
    """

    def __init__(self, context: _Context, block: int, shared_mem: SharedMem):
        self._ctx = context
        self._shared_arg = shared_mem
        self.block = block
        self._limits = context.limits(block, shared_mem)
        self._sweep: OccupancySweep | None = None

    # -- figures -----------------------------------------------------------
    kernel_name = property(lambda self: self._ctx.kernel_name)
    device_name = property(lambda self: self._ctx.device_name)
    notes = property(lambda self: self._ctx.notes, doc="Caveats (unknown register count...).")
    shared_mem = property(lambda self: self._limits.dynamic_shared,
                          doc="Dynamic shared memory per block, bytes.")
    active_blocks = property(lambda self: self._limits.active_blocks, doc="Blocks per SM.")
    limits = property(lambda self: dict(self._limits.by_limit))
    binding = property(lambda self: self._limits.binding)
    registers = property(lambda self: self._ctx.usage.registers, doc="Registers per thread.")
    static_shared = property(lambda self: self._ctx.usage.static_shared)
    registers_per_block = property(lambda self: self._limits.registers_per_block,
                                   doc="Registers allocated per block (warp granularity).")
    shared_per_block = property(lambda self: self._limits.shared_per_block,
                                doc="Shared memory allocated per block: static + dynamic + "
                                    "the driver's reserve, rounded to the allocation unit.")
    shared_per_sm = property(lambda self: self._limits.shared_per_sm,
                             doc="Shared memory per SM the calculation used (the carve-out).")

    @property
    def limit(self) -> str:
        """The limit that binds (the first one when several tie)."""
        return self.binding[0]

    @property
    def warps_per_block(self) -> int:
        return self._limits.warps_per_block

    @property
    def active_warps(self) -> int:
        return self.active_blocks * self.warps_per_block

    @property
    def max_warps(self) -> int:
        return self._ctx.sm.max_warps_per_sm

    @property
    def occupancy(self) -> float:
        """Active warps per SM over the SM's maximum, 0..1."""
        return self.active_warps / self.max_warps

    @property
    def active_threads(self) -> int:
        return self.active_blocks * self.block

    @property
    def carveout_needed(self) -> int:
        """The smallest shared-memory carve-out per SM holding the active blocks."""
        return self._ctx.sm.align_carveout(self.active_blocks * self.shared_per_block)

    # -- block sizes ---------------------------------------------------------
    def sweep(self) -> "OccupancySweep":
        """This kernel's occupancy at every block size (multiples of the warp
        size up to the device's maximum), with the same shared memory."""
        if self._sweep is None:
            self._sweep = OccupancySweep(self._ctx, self._shared_arg, current=self.block)
        return self._sweep

    @property
    def suggested_block(self) -> int:
        """The largest block size reaching the best occupancy (CUDA's
        ``cudaOccupancyMaxPotentialBlockSize`` rule)."""
        return self.sweep().suggested_block

    def plot(self, ax=None):
        """Occupancy against block size, coloured by the binding limit; returns
        the Figure (see :meth:`OccupancySweep.plot`)."""
        return self.sweep().plot(ax=ax)

    # -- presentation ----------------------------------------------------------
    def explain(self) -> list[tuple[str, str, str]]:
        """``(limit, blocks per SM, why)`` for each limit."""
        sm, usage, lim = self._ctx.sm, self._ctx.usage, self._limits
        rows = [(WARPS, _blocks(lim.by_limit[WARPS]),
                 f"{lim.warps_per_block} warps per block, {sm.max_warps_per_sm} warps per SM")]
        if usage.registers is None:
            rows.append((REGISTERS, "not applied", "register count unknown"))
        else:
            rows.append((REGISTERS, _blocks(lim.by_limit[REGISTERS]),
                         f"{usage.registers} per thread, {lim.registers_per_block} allocated per "
                         f"block, {sm.registers_per_sm} per SM"))
        rows.append((SHARED, _blocks(lim.by_limit[SHARED]),
                     f"{_bytes(lim.shared_per_block)} per block (static {_bytes(usage.static_shared)}"
                     f" + dynamic {_bytes(lim.dynamic_shared)} + reserve "
                     f"{_bytes(sm.shared_reserved_per_block)}), {_bytes(lim.shared_per_sm)} per SM"))
        rows.append((BLOCKS, _blocks(lim.by_limit[BLOCKS]), "most resident blocks per SM"))
        return rows

    def summary(self) -> str:
        """One line: blocks, warps, occupancy and what binds."""
        if self.active_blocks == 0:
            why = {BLOCK_SIZE: f"block of {self.block} threads exceeds the kernel's maximum "
                               f"({self._ctx.usage.max_threads_per_block})",
                   DYNAMIC_SHARED: "dynamic shared memory exceeds the kernel's maximum "
                                   "(raise it with the max_dynamic_shared_size_bytes attribute)",
                   }.get(self.limit, f"{self.limit} do not fit one block")
            return f"cannot launch: {why}"
        return (f"{self.active_blocks} blocks/SM, {self.active_warps} of {self.max_warps} warps "
                f"({self.occupancy:.0%}), limited by {', '.join(self.binding)}")

    def _title(self) -> str:
        return (f"Occupancy of {self.kernel_name} on {self.device_name}, block {self.block}, "
                f"dynamic shared {_bytes(self.shared_mem)}")

    def __repr__(self) -> str:
        lines = [self._title() + ":", "  " + self.summary()]
        width = max(len(r[0]) for r in self.explain())
        for name, blocks, why in self.explain():
            mark = "*" if name in self.binding else " "
            lines.append(f" {mark}{name:<{width}}  {blocks:>11}  {why}")
        lines.append(f"  suggested block size: {self.suggested_block}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = self.explain()
        return html_table(rows, ("limit", "blocks/SM", "because"), title=self._title(),
                          caption=self.summary(),
                          bold_rows=[i for i, row in enumerate(rows) if row[0] in self.binding],
                          notes=[f"suggested block size: {self.suggested_block}",
                                 *(f"note: {n}" for n in self.notes)])

    def to_dict(self) -> dict:
        """The figures as plain JSON-safe values (widget state uses this)."""
        return {"kernel": self.kernel_name, "device": self.device_name, "block": self.block,
                "shared_mem": self.shared_mem, "active_blocks": self.active_blocks,
                "active_warps": self.active_warps, "max_warps": self.max_warps,
                "occupancy": self.occupancy, "limit": self.limit, "binding": list(self.binding),
                "limits": {k: (None if v is None else min(v, _UNLIMITED))
                           for k, v in self.limits.items()},
                "registers": self.registers, "registers_per_block": self.registers_per_block,
                "shared_per_block": self.shared_per_block, "shared_per_sm": self.shared_per_sm,
                "suggested_block": self.suggested_block, "notes": list(self.notes)}

    def to_pandas(self):
        """One row with the figures and the blocks each limit allows."""
        d = self.to_dict()
        limits = d.pop("limits")
        d.pop("notes")
        d["binding"] = ", ".join(d["binding"])
        d.update({f"limit_{k.replace(' ', '_')}": v for k, v in limits.items()})
        return pandas().DataFrame([d])


class OccupancySweep:
    """Occupancy of one kernel at every block size (``rows``, one
    :class:`BlockLimits` each). ``suggested_block`` is the largest block size
    with the most active threads per SM."""

    def __init__(self, context: _Context, shared_mem: SharedMem, current: int | None = None):
        self._ctx = context
        self.current = current
        self.rows = [context.limits(b, shared_mem) for b in context.block_sizes()]

    @property
    def suggested_block(self) -> int:
        best = max(r.active_blocks * r.block_size for r in self.rows)
        return max(r.block_size for r in self.rows if r.active_blocks * r.block_size == best)

    def records(self) -> list[dict]:
        """One dict per block size: block, shared_mem, active_blocks,
        active_warps, occupancy, limit, binding and ``limit_<name>`` (the
        blocks each limit allows)."""
        max_warps = self._ctx.sm.max_warps_per_sm
        return [{
            "block": r.block_size, "shared_mem": r.dynamic_shared,
            "active_blocks": r.active_blocks, "active_warps": r.active_blocks * r.warps_per_block,
            "occupancy": r.active_blocks * r.warps_per_block / max_warps,
            "limit": r.binding[0], "binding": ", ".join(r.binding),
            **{f"limit_{k.replace(' ', '_')}": v for k, v in r.by_limit.items()},
        } for r in self.rows]

    def to_pandas(self):
        """:meth:`records` as a DataFrame."""
        return pandas().DataFrame(self.records())

    def __repr__(self) -> str:
        df = self.to_pandas()[["block", "active_blocks", "occupancy", "binding"]]
        return (f"Occupancy of {self._ctx.kernel_name} on {self._ctx.device_name} by block size "
                f"(suggested {self.suggested_block}):\n{df.to_string(index=False)}")

    def _repr_html_(self) -> str:
        columns = ("block", "shared_mem", "active_blocks", "occupancy", "binding")
        return html_table([[r[c] for c in columns] for r in self.records()], columns,
                          title=f"{self._ctx.kernel_name} on {self._ctx.device_name}: "
                                f"suggested block size {self.suggested_block}")

    def plot(self, ax=None):
        """Occupancy (%) against block size, points coloured by the limit that
        binds, the current and suggested block sizes marked.

        Draws on ``ax`` when given, else on a new figure that is not left open
        in pyplot (it shows once, as a cell's value); returns the Figure."""
        fig, ax = figure_axes(ax, figsize=(7, 3.2))
        df = self.to_pandas()
        ax.plot(df["block"], 100 * df["occupancy"], color="0.6", lw=1, zorder=1)
        colours = {WARPS: "tab:blue", REGISTERS: "tab:red", SHARED: "tab:green",
                   BLOCKS: "tab:purple", BLOCK_SIZE: "black", DYNAMIC_SHARED: "black"}
        for name, group in df.groupby("limit", sort=False):
            ax.scatter(group["block"], 100 * group["occupancy"], s=18, zorder=2,
                       color=colours.get(name, "gray"), label=f"limited by {name}")
        if self.current is not None:
            ax.axvline(self.current, color="0.3", ls=":", lw=1, label=f"block {self.current}")
        best = df[df["block"] == self.suggested_block].iloc[0]
        ax.scatter([best["block"]], [100 * best["occupancy"]], marker="*", s=160, zorder=3,
                   color="gold", edgecolor="black", label=f"suggested {self.suggested_block}")
        ax.set_xlabel("threads per block")
        ax.set_ylabel("occupancy (%)")
        ax.set_ylim(0, 105)
        ax.set_xlim(0, self._ctx.sm.max_threads_per_block + 32)
        ax.set_title(f"{self._ctx.kernel_name} on {self._ctx.device_name}", fontsize=10)
        ax.legend(fontsize=8, loc="best")
        return fig


# -- building the inputs ---------------------------------------------------------

def _device_properties(device) -> DeviceProperties:
    if isinstance(device, DeviceProperties):
        return device
    b = backend()
    if device is None:
        return b.device_properties(b.current_device())
    count = b.device_count()
    index = _as_int(device)
    if index is None or not 0 <= index < count:
        raise LaunchConfigError(f"device must be an index 0..{count - 1} or DeviceProperties, "
                                f"got {device!r}")
    return b.device_properties(index)


def _int_attribute(obj, name):
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def kernel_usage(kernel) -> tuple[str, KernelUsage, tuple[str, ...]]:
    """Name, :class:`KernelUsage` and caveats of ``kernel``: a
    :class:`workbench.Kernel`, :class:`KernelResources` or :class:`KernelUsage`."""
    if isinstance(kernel, KernelUsage):
        return "kernel", kernel, ()
    resources = kernel if isinstance(kernel, KernelResources) else getattr(kernel, "resources", None)
    if not isinstance(resources, KernelResources):
        raise ArgumentTypeError(f"occupancy() needs a workbench Kernel (or KernelResources), got "
                                f"{type(kernel).__name__}; compile one with %%cuda or wb.compile()")
    name = getattr(kernel, "name", None) or "kernel"
    function = getattr(kernel, "function", None)
    carveout = _int_attribute(function, "preferred_shared_memory_carveout")
    usage = KernelUsage(
        registers=resources.registers,
        static_shared=resources.shared_bytes or 0,
        max_threads_per_block=resources.max_threads_per_block,
        max_dynamic_shared=_int_attribute(function, "max_dynamic_shared_size_bytes"),
        carveout=carveout if carveout is not None and carveout >= 0 else None)
    notes = []
    if resources.registers is None:
        why = getattr(kernel, "resources_unknown_reason", None) or "NVRTC not installed?"
        notes.append(f"register count unknown ({why}): the register limit is not applied")
    return name, usage, tuple(notes)


def occupancy(kernel, block=None, shared_mem: SharedMem = 0, *, device=None,
              carveout: int | None = None) -> Occupancy:
    """The occupancy of ``kernel`` launched with ``block`` threads per block.

    ``block``: an int or a ``(x, y, z)`` tuple; ``None`` picks the suggested
    block size. ``shared_mem``: dynamic shared memory per block in bytes, or a
    function of the block size returning it (for kernels whose shared memory
    grows with the block). ``device``: an index or :class:`DeviceProperties`
    (default: the active device). ``carveout``: a preferred shared-memory
    carve-out in percent (``cudaFuncAttributePreferredSharedMemoryCarveout``);
    by default the kernel's own setting, else the driver's default.
    """
    props = _device_properties(device)
    name, usage, notes = kernel_usage(kernel)
    if carveout is not None:
        percent = _as_int(carveout)
        if percent is None or not 0 <= percent <= 100:
            raise LaunchConfigError(f"carveout is a percentage 0..100, got {carveout!r}")
        usage = KernelUsage(**{**usage.__dict__, "carveout": percent})
    if not callable(shared_mem):
        nbytes = _as_int(shared_mem)
        if nbytes is None or nbytes < 0:
            raise LaunchConfigError(f"shared_mem is the dynamic shared memory per block in bytes "
                                    f"(an integer >= 0, or a function of the block size), "
                                    f"got {shared_mem!r}")
        shared_mem = nbytes
    sm = SMModel.from_properties(props)
    resources = kernel if isinstance(kernel, KernelResources) else getattr(kernel, "resources", None)
    arch = getattr(resources, "arch", None)
    cc = "".join(map(str, props.compute_capability))
    if arch and cc not in arch:
        notes += (f"the kernel's figures are for {arch}, the device is sm_{cc}",)
    ctx = _Context(name, props.name, sm, usage, notes)
    if block is None:
        block = OccupancySweep(ctx, shared_mem).suggested_block
    threads = _block_threads(block, props)
    return Occupancy(ctx, threads, shared_mem)


def _block_threads(block, props: DeviceProperties) -> int:
    if _as_int(block) is not None:
        dims = (block,)
    else:
        try:
            dims = tuple(block)
        except TypeError:
            dims = ()
    dims = tuple(_as_int(d) for d in dims)
    if not 1 <= len(dims) <= 3 or not all(d is not None and d > 0 for d in dims):
        raise LaunchConfigError(f"block must be a positive int or a tuple of 1-3 positive ints, "
                                f"got {block!r}")
    threads = 1
    for d, limit in zip(dims, props.max_block_dims):
        if d > limit:
            raise LaunchConfigError(f"block {block!r}: dimension {d} exceeds the device's "
                                    f"limit {limit}")
        threads *= d
    if threads > props.max_threads_per_block:
        raise LaunchConfigError(f"block {block!r} has {threads} threads; {props.name} allows at "
                                f"most {props.max_threads_per_block} per block")
    return threads
