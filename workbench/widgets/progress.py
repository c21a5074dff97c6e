"""A sweep's progress bar in a notebook, whose saved output reads as text.

tqdm's notebook bar is stored as a frozen ``0%| | 0/4`` line beside its
widget view. This bar carries a one-line text and HTML fallback, and when
the sweep ends it replaces its own output (``update_display``) with that
line alone, so a saved notebook shows "sweep of 4 points" and no widget.
``%load_ext workbench`` makes it the bar of :func:`workbench.sweep`, and
:class:`WaitLine` the line a long wait (a kernel running on the simulator
for more than a few seconds) updates in the running cell.
"""
from __future__ import annotations

import html
import math
import time

import ipywidgets as widgets

from ..benchmarking import sweep
from ..present import waiting
from ..present.figures import line_chart_svg
from .. import tuning


def install(ipython) -> None:
    """Make :class:`SweepProgress` the sweeps' progress bar in a kernel that
    a front end talks to (a terminal IPython keeps tqdm's text bar)."""
    if getattr(ipython, "kernel", None) is not None:
        sweep.set_progress_factory(SweepProgress)
        tuning.set_progress_factory(TuneProgress)
        waiting.set_reporter(WaitLine)


def uninstall() -> None:
    sweep.set_progress_factory(None)
    tuning.set_progress_factory(None)
    waiting.set_reporter(None)


class WaitLine:
    """A line in the running cell that says what is being waited for, for how
    long, and how to stop it, updated in place (``update_display``); at the
    end it says how long it took, or that it was stopped (the error below
    says what is left)."""

    def __init__(self, what: str):
        self.what = what
        self._handle = None  # (shown at the first update, with the time waited so far)

    def running(self, elapsed: float) -> str:
        return (f"{self.what} has run for {elapsed:.0f} s on the simulator; to stop it, "
                f"interrupt the kernel (the stop button, or I, I): device arrays stay as they are")

    @staticmethod
    def ended(what: str, elapsed: float, outcome: str) -> str:
        if outcome == "interrupted":
            return f"{what} was stopped after {elapsed:.1f} s"
        if outcome == "failed":
            return f"{what} failed after {elapsed:.1f} s"
        return f"{what} ran for {elapsed:.1f} s on the simulator"

    def update(self, elapsed: float) -> None:
        if self._handle is None:
            from IPython.display import display  # lazy: the notebook layer's own import
            self._handle = display(_Line(self.running(elapsed)), display_id=True)
        else:
            self._handle.update(_Line(self.running(elapsed)))

    def close(self, elapsed: float, outcome: str) -> None:
        if self._handle is not None:
            self._handle.update(_Line(self.ended(self.what, elapsed, outcome)))
            self._handle = None


class SweepProgress:
    """tqdm's interface (``update``, ``set_postfix_str``, ``close``) over an
    ipywidgets progress bar shown in the running cell."""

    description = "sweep"

    def __init__(self, total: int):
        from IPython.display import display  # lazy: the notebook layer's own import
        self.total = int(total or 0)
        self.n = 0
        self._bar = widgets.IntProgress(value=0, min=0, max=max(self.total, 1),
                                        description=self.description, bar_style="info")
        self._label = widgets.Label(self._text())
        self._box = _ProgressBox(self, children=self._children())
        self._handle = display(self._box, display_id=True)
        self._closed = False

    def _children(self) -> list:
        return [self._bar, self._label]

    def _text(self, postfix: str = "") -> str:
        return f"{self.n}/{self.total} points" + (f" ({postfix})" if postfix else "")

    def line(self) -> str:
        """The fallback line: the same from start to end, so that a saved
        output and a re-run agree."""
        return f"sweep of {self.total} point{'s' if self.total != 1 else ''}"

    def update(self, n: int = 1) -> None:
        self.n += n
        self._bar.value = min(self.n, self._bar.max)
        self._label.value = self._text(self._postfix)

    _postfix = ""

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self._postfix = text

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handle is not None:
            self._handle.update(_Line(self.line()))
        self._box.close()


class TuneProgress(SweepProgress):
    """A tune's bar with a small live chart of the best value so far
    (SVG text, redrawn at most every ``REDRAW_S`` seconds)."""

    description = "tune"
    REDRAW_S = 0.3

    def __init__(self, total, label: str = ""):
        self.label = label
        self._chart = widgets.HTML("")
        self._drawn = 0.0
        super().__init__(total or 0)

    def _children(self) -> list:
        return [widgets.VBox([widgets.HBox([self._bar, self._label]), self._chart])]

    def _text(self, postfix: str = "") -> str:
        of = f"/{self.total}" if self.total else ""
        return f"{self.n}{of} configurations" + (f" ({postfix})" if postfix else "")

    def line(self) -> str:
        what = f" of {self.label}" if self.label else ""
        return f"tune{what}: {self.total or 'a budget of'} configuration{'s' if self.total != 1 else ''}"

    def best(self, values) -> None:
        """Redraw the best-so-far chart from ``values`` (one per configuration)."""
        now = time.monotonic()
        if now - self._drawn < self.REDRAW_S and len(values) != self.total:
            return
        self._drawn = now
        n = len(values)
        finite = [v for v in values if not math.isnan(v)]
        scale, unit = (1e3, "ms") if finite and max(finite) < 10 else (1.0, "")
        points = [(i + 1 - n, float(v) * scale) for i, v in enumerate(values) if not math.isnan(v)]
        self._chart.value = line_chart_svg(f"best so far {unit}".strip(), {"best": points},
                                           span=max(n - 1, 1), width=360, height=140)


class _ProgressBox(widgets.HBox):
    def __init__(self, progress: SweepProgress, **kwargs):
        super().__init__(**kwargs)
        self._progress = progress

    def __repr__(self) -> str:
        return self._progress.line()

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self._progress.line()
        bundle["text/html"] = f"<i>{html.escape(self._progress.line())}</i>"
        return bundle


class _Line:
    def __init__(self, text: str):
        self.text = text

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": self.text, "text/html": f"<i>{html.escape(self.text)}</i>"}
