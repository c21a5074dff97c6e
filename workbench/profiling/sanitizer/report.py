"""What ``wb.sanitize`` found: :class:`Finding` and :class:`SanitizerReport`.

A finding is one kind of problem at one place of the kernel (for a race, one
pair of places) with how many times it happened, grouped as compute-sanitizer
groups its reports; its lines are the cell's (the ``%%cuda`` line is line 1)
and the report shows their source. The same objects come from the simulator
(the workbench's own checks) and from compute-sanitizer on a GPU.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field, replace

from ...present.tables import html_table, pandas

#: compute-sanitizer's words for each kind of finding (the first line of its report).
_HEADLINES = {
    "RAW": "Race reported between {First} access at line {l1} and {Second} access at line {l2}",
    "WAR": "Race reported between {First} access at line {l1} and {Second} access at line {l2}",
    "WAW": "Race reported between {First} access at line {l1} and {Second} access at line {l2}",
    "uninitialized read": "Uninitialized __global__ memory read of size {size} bytes at line {l2}",
    "invalid arguments": "Barrier error detected. Invalid arguments: {call} at line {l2}",
    "out of bounds": "Invalid __{space}__ {second} of size {size} bytes at line {l2}",
    "misaligned": "Misaligned __{space}__ {second} of size {size} bytes at line {l2}",
    "results differ": "Results differ between schedules",
}
_NOUN = {"racecheck": "hazard", "initcheck": "read", "synccheck": "thread", "memcheck": "error",
         "schedules": "element"}


@dataclass(frozen=True)
class Finding:
    """One finding (see the module docstring).

    ``tool``: ``"memcheck"``, ``"racecheck"``, ``"synccheck"``,
    ``"initcheck"`` or ``"schedules"``; ``kind``: ``"RAW"``, ``"WAR"``,
    ``"WAW"``, ``"uninitialized read"``, ``"invalid arguments"``, ``"out of
    bounds"``, ``"misaligned"``, ``"results differ"``...; ``severity``:
    ``"error"`` or ``"warning"``; ``count``: how many (hazards, reads,
    threads, elements); ``line`` / ``other_line``: the cell lines of the
    access reported and, for a race, of the earlier access (None where
    unknown); ``source`` / ``other_source``: their text; ``access`` /
    ``other_access``: ``"read"``, ``"write"``, ``"atomic"``, a call;
    ``thread`` / ``other_thread`` and ``block``: the first occurrence's
    (x, y, z); ``space``: ``"shared"``, ``"global"``, ``"local"``;
    ``address`` and ``where``: the first occurrence's byte, and in words
    (the array and element: ``s[128]``, ``out[7]``); ``detail``: more.
    """

    tool: str
    kind: str
    severity: str
    count: int
    kernel: str
    line: int | None
    source: str = ""
    access: str = ""
    thread: tuple | None = None
    block: tuple | None = None
    other_line: int | None = None
    other_source: str = ""
    other_access: str = ""
    other_thread: tuple | None = None
    space: str = ""
    address: int | None = None
    where: str = ""
    size: int = 0
    detail: str = ""

    @property
    def lines(self) -> tuple:
        """The cell lines involved, as a sorted tuple (one or two)."""
        return tuple(sorted({n for n in (self.line, self.other_line) if n is not None}))

    def headline(self) -> str:
        """The finding in one line, as compute-sanitizer words it."""
        template = _HEADLINES.get(self.kind, "{kind} at line {l2}")
        text = template.format(
            First=self.other_access.capitalize() or "?", Second=self.access.capitalize() or "?",
            second=self.access or "access",
            l1=_line(self.other_line), l2=_line(self.line), size=self.size or "?",
            call=self.access, space=self.space or "global", kind=self.kind.capitalize())
        noun = _NOUN.get(self.tool, "occurrence")
        return f"{self.severity.capitalize()}: {text} [{self.count:,} {noun}{'s' if self.count != 1 else ''}]"

    def details(self) -> list[str]:
        """The lines under the headline: the source lines, threads and address."""
        out = []
        shown = set()
        for n, text in ((self.other_line, self.other_source), (self.line, self.source)):
            if n is not None and n not in shown:
                shown.add(n)
                out.append(f"    line {n}: {text.strip()}")
        who = []
        if self.other_thread is not None and self.thread is not None:
            who.append(f"threads {_xyz(self.other_thread)} and {_xyz(self.thread)}")
        elif self.thread is not None:
            who.append(f"thread {_xyz(self.thread)}")
        if self.block is not None:
            who.append(f"block {_xyz(self.block)}")
        if self.where:
            who.append(f"{self.space + ' ' if self.space else ''}{self.where}")
        if who:
            out.append("    " + ", ".join(who) + " (the first one)")
        if self.detail:
            out.append(f"    {self.detail}")
        return out

    def row(self) -> dict:
        return {"tool": self.tool, "severity": self.severity, "kind": self.kind,
                "count": self.count, "kernel": self.kernel, "line": self.line,
                "other_line": self.other_line, "access": self.access,
                "other_access": self.other_access,
                "thread": _xyz(self.thread) if self.thread else None,
                "other_thread": _xyz(self.other_thread) if self.other_thread else None,
                "block": _xyz(self.block) if self.block else None, "space": self.space,
                "where": self.where, "source": self.source.strip(),
                "other_source": self.other_source.strip(), "detail": self.detail}


def _line(n) -> str:
    return "?" if n is None else str(n)


def _xyz(v) -> str:
    return "(" + ",".join(str(int(x)) for x in v) + ")"


@dataclass
class SanitizerReport:
    """What one ``wb.sanitize`` call (or one cell's sanitized launches) found.

    ``tool``; ``target`` (what was checked, in words); ``findings`` (errors
    first); ``errors`` and ``warnings``: the hazards (reads, threads...) of
    the error and warning findings, summed, as compute-sanitizer's summary
    counts them; ``launches``: how many launches were checked; ``where``:
    ``"simulator"`` or ``"compute-sanitizer"``; ``schedules``: how many
    random schedules were run besides the default one (their differences are
    findings of tool ``"schedules"``); ``output``: compute-sanitizer's own
    report (on a GPU).
    """

    tool: str
    target: str
    findings: list = field(default_factory=list)
    launches: int = 0
    where: str = "simulator"
    schedules: int = 0
    output: str = ""

    @property
    def errors(self) -> int:
        return sum(f.count for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(f.count for f in self.findings if f.severity == "warning")

    @property
    def clean(self) -> bool:
        """No finding at all."""
        return not self.findings

    @property
    def verdict(self) -> str:
        """``"error"``, ``"warning"`` or ``"clean"``: the worst finding's severity."""
        if any(f.severity == "error" for f in self.findings):
            return "error"
        return "warning" if self.findings else "clean"

    def __iter__(self):
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __getitem__(self, i) -> Finding:
        return self.findings[i]

    def summary(self) -> str:
        """One line: the tool, where it ran, and what it found."""
        runs = [f"{self.launches} launch{'es' if self.launches != 1 else ''}"] if self.launches else []
        if self.schedules:
            runs.append(f"{self.schedules} random schedule{'s' if self.schedules != 1 else ''}")
        runs = ", ".join(runs) or "nothing run"
        if self.clean:
            found = "no findings"
        else:
            found = (f"{self.errors:,} error{'s' if self.errors != 1 else ''}, {self.warnings:,} "
                     f"warning{'s' if self.warnings != 1 else ''} in {len(self.findings)} "
                     f"finding{'s' if len(self.findings) != 1 else ''}")
        return f"{self.tool} ({self.where}) of {self.target}: {found} ({runs})"

    def __repr__(self) -> str:
        lines = [self.summary()]
        for f in self.findings:
            lines.append(f.headline())
            lines.extend(f.details())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        color = {"error": "#c62828", "warning": "#ef6c00", "clean": "#2e7d32"}[self.verdict]
        parts = [f"<div class='wb-sanitizer'><p style='color:{color}'><b>"
                 f"{html.escape(self.summary())}</b></p>"]
        for f in self.findings:
            mark = "#c62828" if f.severity == "error" else "#ef6c00"
            parts.append(f"<p style='margin-bottom:2px'><b style='color:{mark}'>"
                         f"{html.escape(f.headline())}</b></p>")
            rows = []
            shown = set()
            for n, text, access in ((f.other_line, f.other_source, f.other_access),
                                    (f.line, f.source, f.access)):
                if n is not None and n not in shown:
                    shown.add(n)
                    rows.append((f"line {n}", access, text.strip()))
            if rows:
                parts.append(html_table(rows, align=("left", "left", "left")))
            more = [d.strip() for d in f.details() if not d.strip().startswith("line ")]
            if more:
                parts.append("<p style='margin-top:2px'>" + "<br>".join(
                    html.escape(m) for m in more) + "</p>")
        parts.append("</div>")
        return "".join(parts)

    def to_pandas(self):
        """One row per finding."""
        columns = list(Finding("", "", "", 0, "", None).row())
        return pandas().DataFrame([f.row() for f in self.findings], columns=columns)


def merge(findings) -> list:
    """Findings of several launches as one list: the same finding (tool,
    kind, severity, kernel and lines) once, its counts summed."""
    out: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.tool, f.kind, f.severity, f.kernel, f.line, f.other_line, f.access, f.other_access)
        seen = out.get(key)
        out[key] = f if seen is None else replace(seen, count=seen.count + f.count)
    return sorted(out.values(), key=lambda f: (f.severity != "error", f.line is None, f.line or 0))
