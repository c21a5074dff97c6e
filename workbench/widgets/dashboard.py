"""``wb.dashboard()``: the device, memory, kernel and benchmark panels in tabs."""
from __future__ import annotations

import html

import ipywidgets as widgets

from ..errors import ArgumentTypeError
from ..runtime.records import KERNEL, KIND
from ..runtime.session import session
from .bench_panel import BenchmarkPanel
from .device_panel import DevicePanel
from .kernel_panel import KernelPanel
from .memory_panel import MemoryPanel
from .static import StaticFallback


def _placeholder(text: str) -> widgets.HTML:
    return widgets.HTML(f"<i>{html.escape(text)}</i>")


def _panel_or_placeholder(title: str, cls) -> widgets.Widget:
    """``cls()``, or a line saying why it could not start: a panel that cannot
    start must not take the others down."""
    try:
        return cls()
    except Exception as exc:
        return _placeholder(f"The {title.lower()} panel could not start: {exc}")


def _label(module_name: str, kernel_name: str) -> str:
    """A kernel's name in the drop-down: the module's name only where it adds
    something (a %%cuda cell's module is named after its first kernel)."""
    return kernel_name if module_name == kernel_name else f"{kernel_name} ({module_name})"


def _most_recent(kernels: dict) -> str | None:
    """The label of the kernel of ``kernels`` launched last, else of the last
    one compiled (None: no kernels)."""
    labels: dict = {}
    for label, kernel in kernels.items():
        labels.setdefault(kernel.name, label)
    for record in reversed(session().timing_log.records):
        if record[KIND] == "kernel" and record[KERNEL] in labels:
            return labels[record[KERNEL]]
    return next(reversed(kernels), None)


def _all_kernels() -> dict:
    """``{label: Kernel}`` for every compiled kernel of the session."""
    out = {}
    for module_name, module in session().modules.items():
        for kernel_name in module.kernel_names():
            out[_label(module_name, kernel_name)] = module[kernel_name]
    return out


class KernelChooser(StaticFallback, widgets.VBox):
    """A drop-down of the session's compiled kernels above the chosen one's
    :class:`KernelPanel`; without a kernel given, the one launched last is
    chosen (else the one compiled last)."""

    def __init__(self, kernel=None, **kwargs):
        if kernel is not None and not hasattr(kernel, "resources"):
            raise ArgumentTypeError(
                f"the dashboard shows a kernel of the workbench (from %%cuda or "
                f"wb.compile), got {type(kernel).__name__}")
        super().__init__(**kwargs)
        self._kernels = _all_kernels()
        self._panel = None
        if kernel is not None:
            label = next((k for k, v in self._kernels.items() if v is kernel), kernel.name)
            self._kernels.setdefault(label, kernel)
        else:
            label = _most_recent(self._kernels)
            kernel = self._kernels.get(label)
        options = list(self._kernels)
        self._choice = widgets.Dropdown(options=options, description="kernel", value=label)
        self._choice.observe(self._chosen, names="value")
        self._body = widgets.VBox()
        if not options:
            self._body.children = [_placeholder("No kernels yet: compile one in a %%cuda cell, "
                                                "then open the dashboard again.")]
        self.children = [self._choice, self._body]
        if kernel is not None:
            self._show(kernel)

    @property
    def panel(self) -> KernelPanel | None:
        return self._panel

    def _chosen(self, change) -> None:
        if change["new"] is not None:
            self._show(self._kernels[change["new"]])

    def _show(self, kernel) -> None:
        if self._panel is not None:
            self._panel.close()
        self._panel = KernelPanel(kernel)
        self._body.children = [self._panel]

    def close(self) -> None:
        panel = getattr(self, "_panel", None)  # (None too when __init__ refused its kernel)
        if panel is not None:
            panel.close()
        super().close()

    def _snapshot_title(self) -> str:
        return self._panel._snapshot_title() if self._panel is not None else "Kernel panel: no kernel"

    def _snapshot_html(self) -> str:
        return self._panel._snapshot_html() if self._panel is not None else ""


class Dashboard(StaticFallback, widgets.Tab):
    """The panels of :func:`dashboard`; ``close()`` stops their refreshes."""

    def __init__(self, kernel=None, interval: float = 1.0, **kwargs):
        built = []   # closed again if a later step raises: no sampler thread left behind

        def keep(panel):
            built.append(panel)
            return panel
        try:
            self.device_panel = keep(DevicePanel(interval=interval))
            self.memory_panel = keep(_panel_or_placeholder("Memory", MemoryPanel))
            self.kernel_chooser = keep(KernelChooser(kernel))
            self.benchmark_panel = keep(_panel_or_placeholder("Benchmarks", BenchmarkPanel))
            super().__init__(children=list(built),
                             titles=("Device", "Memory", "Kernel", "Benchmarks"), **kwargs)
        except BaseException:
            for panel in reversed(built):
                try:
                    panel.close()
                except Exception:  # the first error is the one to report
                    pass
            raise

    def close(self) -> None:
        for child in self.children:
            child.close()
        super().close()

    def stop(self) -> None:
        """Stop the device panel's background refresh; every tab stays as it is."""
        self.device_panel.stop()

    def _snapshot_title(self) -> str:
        return "Dashboard: device, memory, kernel and benchmark panels"

    def _snapshot_html(self) -> str:
        parts = []
        for title, child in zip(self.titles, self.children):
            body = (f"<div><b>{html.escape(child._snapshot_title())}</b></div>{child._snapshot_html()}"
                    if isinstance(child, StaticFallback) else
                    getattr(child, "value", ""))   # a placeholder saying why a panel is missing
            parts.append(f"<details><summary>{html.escape(title)}</summary>{body}</details>")
        return "".join(parts)


def dashboard(kernel=None, interval: float = 1.0) -> Dashboard:
    """Device, memory, kernel and benchmark panels in tabs, for the active
    device. ``kernel`` is shown in the Kernel tab (else pick one of the
    session's kernels there); ``interval`` is the device panel's refresh
    period in seconds."""
    return Dashboard(kernel=kernel, interval=interval)
