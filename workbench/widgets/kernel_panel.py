"""``wb.KernelPanel(kernel)``: a kernel's resources, its occupancy at a block
size and dynamic shared-memory size chosen with sliders, the occupancy
chart against block size, its source lines worst first where it was profiled
on the simulator, and its PTX and SASS."""
from __future__ import annotations

import html

import ipywidgets as widgets
from traitlets import Dict, Int, TraitError, Unicode, observe, validate

from ..hardware.inspect import inspect_kernel
from ..hardware.occupancy import occupancy
from ..profiling.simulated import latest_profile
from ..present.figures import figure_svg, new_figure
from ..runtime.session import backend
from .static import StaticFallback, html_part

CHART_SIZE = (7, 3.2)   # inches: the size of occ.plot() inline, so both read alike


def _chart_svg(occ) -> bytes:
    """The occupancy chart of ``occ`` against block size, as SVG."""
    fig = new_figure(CHART_SIZE)
    occ.sweep().plot(ax=fig.add_subplot())
    return figure_svg(fig)


#: Source lines the panel lists at most (worst first).
LINES_SHOWN = 8


def _lines_html(kernel) -> str:
    """The latest simulator profile's source lines, worst first, or a hint."""
    profile = latest_profile(kernel)
    if profile is None:
        if not backend().simulated:
            return ""
        return ("<p><i>wb.profile(kernel, ...) on the simulator counts its memory accesses: "
                "its source lines, worst first, then show here.</i></p>")
    head = (f"<p>Last profile: predicted {profile.predicted.seconds * 1e6:.4g} µs on "
            f"{html.escape(profile.predicted.device)} ({html.escape(profile.limiter or '')}; a "
            f"model, not a measurement)</p>")
    return head + profile.line_table(LINES_SHOWN)._repr_html_()


def _pre(text) -> str:
    return f"<pre style='max-height:400px;overflow:auto;font-size:11px'>{html.escape(str(text))}</pre>"


class KernelPanel(StaticFallback, widgets.VBox):
    """Resources and occupancy of one compiled kernel.

    Move the block-size slider or type a dynamic shared-memory size: the
    occupancy, the limit that binds and the chart follow. The PTX and SASS
    sections are produced when first opened.
    """

    kernel_name = Unicode(help="The kernel shown").tag(sync=True)
    resources = Dict(help="kernel.inspect() figures as plain values").tag(sync=True)
    block = Int(256, help="Threads per block for the occupancy figures").tag(sync=True)
    shared_mem = Int(0, help="Dynamic shared memory per block, bytes").tag(sync=True)
    occupancy = Dict(help="wb.occupancy(kernel, block, shared_mem) as plain values").tag(sync=True)

    def __init__(self, kernel, block: int | None = None, shared_mem: int = 0, **kwargs):
        super().__init__(**kwargs)
        self._kernel = kernel
        self._report = inspect_kernel(kernel)
        props = backend().device_properties()
        self._max_block = props.max_threads_per_block
        self._max_shared = props.shared_memory_per_block_optin
        if block is None:
            block = occupancy(kernel, shared_mem=shared_mem).block
        self._resources_html = html_part(self._report._repr_html_())
        self._summary = html_part()
        self._lines = html_part(_lines_html(kernel))
        self._chart = widgets.Image(format="svg+xml", layout=widgets.Layout(max_width="100%"))
        self._block_slider = widgets.IntSlider(value=block, min=32, max=self._max_block, step=32,
                                               description="block", continuous_update=False)
        self._shared_box = widgets.BoundedIntText(value=shared_mem, min=0, max=self._max_shared,
                                                  step=1024, description="dynamic shared (bytes)",
                                                  style={"description_width": "initial"})
        self._code = widgets.Accordion(children=[widgets.HTML(), widgets.HTML()],
                                       titles=("PTX", "SASS"), selected_index=None)
        self._code.observe(self._show_code, names="selected_index")
        self.children = [self._resources_html, widgets.HBox([self._block_slider, self._shared_box]),
                         self._summary, self._chart, self._lines, self._code]
        with self.hold_sync():
            self.shared_mem = shared_mem
            self.block = block
            self.resources = self._report.to_dict()
            self.kernel_name = self._report.name  # last: observers wait for it
        widgets.link((self._block_slider, "value"), (self, "block"))
        widgets.link((self._shared_box, "value"), (self, "shared_mem"))
        self._update()

    @validate("block")
    def _check_block(self, proposal):
        value = proposal["value"]
        limit = getattr(self, "_max_block", 1024)
        if not 1 <= value <= limit:
            raise TraitError(f"block must be 1..{limit} threads, got {value}")
        return value

    @validate("shared_mem")
    def _check_shared(self, proposal):
        value = proposal["value"]
        limit = getattr(self, "_max_shared", None)
        if value < 0 or (limit is not None and value > limit):
            raise TraitError(f"shared_mem must be 0..{limit} bytes, got {value}")
        return value

    @observe("block", "shared_mem")
    def _launch_changed(self, change):
        if getattr(self, "_summary", None) is not None and self.kernel_name:
            self._update()

    def refresh_lines(self) -> None:
        """Show the kernel's latest profile (after a new ``wb.profile``)."""
        self._lines.value = _lines_html(self._kernel)

    def _update(self) -> None:
        self._lines.value = _lines_html(self._kernel)
        occ = occupancy(self._kernel, block=self.block, shared_mem=self.shared_mem)
        self.occupancy = occ.to_dict()
        self._summary.value = occ._repr_html_()
        self._chart.value = _chart_svg(occ)

    def _snapshot_title(self) -> str:
        return (f"Kernel panel: {self.kernel_name}, block {self.block}, "
                f"dynamic shared {self.shared_mem} B")

    def _snapshot_html(self) -> str:
        return self._resources_html.value + self._summary.value + self._lines.value

    def _show_code(self, change) -> None:
        index = change["new"]
        if index is None:
            return
        target = self._code.children[index]
        if target.value:
            return
        r = self._report
        if index == 0:
            target.value = _pre(r.kernel_ptx) if r.ptx_reason == "" else html.escape(r.ptx_reason)
        else:
            target.value = _pre(r.sass) if not r.sass_reason else html.escape(r.sass_reason)
