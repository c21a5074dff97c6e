"""What building and running a program gives back."""
from __future__ import annotations

import html
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..present.tables import html_fields, pandas
from .toolkit import ToolkitCheck


def _tail(text: str, lines: int = 200) -> str:
    """The last ``lines`` lines of ``text`` (a note says how many were left out)."""
    parts = text.splitlines()
    if len(parts) <= lines:
        return text
    return f"... {len(parts) - lines} lines left out ...\n" + "\n".join(parts[-lines:])


@dataclass
class ProgramBuild:
    """An executable: ``backend`` (``"gpu"``: nvcc, ``"simulator"``: g++
    against the simulator's runtime), where it is, the command that built it
    (empty when it came from the cache), the seconds the build took,
    ``compiler`` and its version, the GPU ``arch`` it targets, the
    compiler's warnings (``log``) and, on the GPU, the toolkit/driver check."""

    backend: str
    executable: Path
    command: list[str]
    seconds: float
    cache_hit: bool
    compiler: str
    files: tuple[str, ...]
    arch: str | None = None
    log: str = ""
    toolkit: ToolkitCheck | None = None

    @property
    def command_line(self) -> str:
        return shlex.join(self.command) if self.command else "(cached)"

    def _fields(self) -> list[tuple]:
        return [("backend", self.backend), ("compiler", self.compiler), ("architecture", self.arch),
                ("files", ", ".join(self.files)),
                ("build (s)", round(self.seconds, 3)), ("cached", self.cache_hit),
                ("build command", self.command_line), ("executable", str(self.executable))]

    def __repr__(self) -> str:
        where = f" for {self.arch}" if self.arch else ""
        return (f"<ProgramBuild {', '.join(self.files)} on {self.backend}{where}: "
                f"{self.seconds:.2f} s{' (cached)' if self.cache_hit else ''}>")

    def _repr_html_(self) -> str:
        return html_fields(self._fields(), title="Program build")


@dataclass
class ProgramRun:
    """A finished run: its :class:`ProgramBuild`, the arguments, the command
    that ran it, exit code, what it wrote on stdout and stderr, and the
    seconds it ran (wall clock, start to exit)."""

    build: ProgramBuild
    args: tuple[str, ...]
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def _fields(self) -> list[tuple]:
        return [("exit code", self.returncode), ("run (s)", round(self.seconds, 3)),
                ("run command", shlex.join(self.command)),
                ("stdout lines", len(self.stdout.splitlines())),
                ("stderr lines", len(self.stderr.splitlines())), *self.build._fields()]

    def __repr__(self) -> str:
        cached = " (cached)" if self.build.cache_hit else ""
        return (f"<ProgramRun exit {self.returncode} on {self.build.backend}: build "
                f"{self.build.seconds:.2f} s{cached}, run {self.seconds:.3f} s, "
                f"{len(self.stdout.splitlines())} lines of stdout>")

    def _repr_html_(self) -> str:
        table = html_fields(self._fields(), title="Program run", notes=self.notes)
        streams = "".join(
            f"<details><summary>{name} ({len(text.splitlines())} lines)</summary>"
            f"<pre>{html.escape(_tail(text))}</pre></details>"
            for name, text in (("stdout", self.stdout), ("stderr", self.stderr)) if text)
        return table + streams

    def to_pandas(self):
        """One row: the run's and the build's fields."""
        return pandas().DataFrame([dict(self._fields())])
