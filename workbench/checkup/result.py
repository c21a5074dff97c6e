"""What ``wb.doctor()`` found: one :class:`Check` per row, in a :class:`Checkup`."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentValueError, NameNotFound
from ..present.tables import html_table, pandas

#: The statuses, best first: it works; it works with a limit the fix removes;
#: it is not installed (or not here); it is here but cannot work.
STATUSES = ("ok", "warning", "missing", "error")
#: A fix line for a row with nothing to do.
NOTHING_TO_DO = "nothing to do"


@dataclass(frozen=True)
class Check:
    """One row: what was checked, its status (one of :data:`STATUSES`),
    what was found, and the fix in one line."""

    name: str
    status: str
    found: str
    fix: str = NOTHING_TO_DO

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ArgumentValueError(f"status must be one of {STATUSES}, got {self.status!r}")


class Checkup:
    """The table of checks ``wb.doctor()`` returns: rows in a fixed order,
    ``checkup["CuPy"]`` for one, ``to_pandas()`` for all; its repr lists the
    fix of every row that is not ok."""

    def __init__(self, checks, backend: str = ""):
        self.checks = list(checks)
        self.backend = backend

    def __getitem__(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise NameNotFound(f"no check named {name!r}; the checks are: "
                           f"{', '.join(c.name for c in self.checks)}")

    def __iter__(self):
        return iter(self.checks)

    def __len__(self) -> int:
        return len(self.checks)

    def counts(self) -> dict[str, int]:
        """How many rows have each status."""
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def summary(self) -> str:
        counts = self.counts()
        parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"wb.doctor(): {self.backend} · {parts}" if self.backend else f"wb.doctor(): {parts}"

    def __repr__(self) -> str:
        width = max((len(c.name) for c in self.checks), default=0)
        lines = [self.summary()]
        for c in self.checks:
            lines.append(f"  {c.status:<8} {c.name:<{width}}  {c.found}")
            if c.status != "ok":
                lines.append(f"  {'':<8} {'':<{width}}  fix: {c.fix}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = {"ok": "#2e7d32", "warning": "#b26a00", "missing": "#616161", "error": "#c62828"}
        rows = [(c.name, c.status, c.found, "" if c.status == "ok" else c.fix) for c in self.checks]
        table = html_table(rows, ["check", "status", "found", "fix"], title=self.summary())
        for status, hue in colour.items():  # the status cells in their colour
            table = table.replace(f"<td style='text-align:left'>{status}</td>",
                                  f"<td style='text-align:left;color:{hue}'><b>{status}</b></td>")
        return table

    def to_pandas(self):
        """One row per check: ``check``, ``status``, ``found``, ``fix``."""
        return pandas().DataFrame([(c.name, c.status, c.found, c.fix) for c in self.checks],
                                  columns=["check", "status", "found", "fix"])
