"""What a panel shows where no widget can: its static snapshot.

A widget's output carries the widget view (``application/vnd.jupyter.widget-view+json``)
and a ``text/plain`` repr. A notebook that is untrusted, exported to HTML
or shown on GitHub/nbviewer cannot draw the view; it shows the richest
other entry. ipywidgets' own repr is the widget tree
(``Dashboard(children=(DevicePanel(children=(HTML(value=...``); the panels
put a short ``text/plain`` line and a ``text/html`` snapshot of what they
show next to the view instead. JupyterLab prefers the view when it can
render it, and the sanitised HTML when it cannot.
"""
from __future__ import annotations

import html
import time

import ipywidgets as widgets

#: The class of every HTML part of a panel: JupyterLab's own look for
#: rendered HTML (the pandas table style), tables flush left as in an output.
TABLE_CLASSES = ("jp-RenderedHTMLCommon", "jp-OutputArea-output", "wb-panel-html")


def clock(when: float | None = None) -> str:
    """``HH:MM:SS`` of ``when`` (seconds since the epoch; None: now), the
    time every panel states ("live (...)", "stopped at ...", "snapshot of ...")."""
    return time.strftime("%H:%M:%S", time.localtime(when))


def html_part(value: str = "", **kwargs) -> widgets.HTML:
    """An HTML widget styled like JupyterLab's rendered HTML output."""
    part = widgets.HTML(value, **kwargs)
    for name in TABLE_CLASSES:
        part.add_class(name)
    return part


class StaticFallback:
    """Mixin for a panel (before the ipywidgets base class): a short
    ``repr`` and a ``text/html`` snapshot in the display's MIME bundle.

    A subclass defines ``_snapshot_html()`` (what it shows now, as HTML,
    without scripts or images) and ``_snapshot_title()`` (one line)."""

    #: After "snapshot of HH:MM:SS" at the foot of every snapshot.
    _live_note = "run the notebook for the live panel"

    def _snapshot_title(self) -> str:
        return type(self).__name__

    def _snapshot_html(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"<{self._snapshot_title()}>"

    def snapshot(self) -> str:
        """The panel as static HTML: what an untrusted or exported notebook
        shows, dated "snapshot of HH:MM:SS" (it never says "live")."""
        note = f"snapshot of {clock()}: {self._live_note}"
        return (f"<div class='wb-snapshot'><div><b>{html.escape(self._snapshot_title())}</b></div>"
                f"{self._snapshot_html()}<div><i>{html.escape(note)}</i></div></div>")

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = self.snapshot()
        return bundle
