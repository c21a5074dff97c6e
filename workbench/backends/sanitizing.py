"""What a sanitized launch found: plain data, the same whatever backend made
it (the simulator's instrumented and checked builds:
:meth:`Backend.sanitize_launches`). The profiling layer turns it into the
report users see (``wb.sanitize``), with the cell's lines and the arrays.

A *finding* is one kind of problem at one place of the kernel (for a race,
one pair of places), with how many times it happened and the first one's
threads, block and address: compute-sanitizer groups its reports the same way
("Race reported between Write access at line 8 and Read access at line 9
[1024 hazards]").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .counting import SharedVariable

#: The sanitizer's tools, as compute-sanitizer names them.
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


@dataclass(frozen=True)
class SiteAccess:
    """One side of a finding: an access (``"read"``, ``"write"``,
    ``"atomic"``) or a call (``"__syncwarp"``...) at ``line`` of the module's
    source (None where unknown) in ``function``, by ``thread`` (x, y, z) of
    the finding's block, of ``size`` bytes."""

    kind: str
    line: int | None
    function: str = ""
    thread: tuple | None = None
    size: int = 0


@dataclass(frozen=True)
class RawFinding:
    """One finding of one launch.

    ``tool``: one of :data:`TOOLS`; ``kind``: ``"RAW"``, ``"WAR"``,
    ``"WAW"`` (racecheck: read after write, write after read, write after
    write), ``"uninitialized read"`` (initcheck), ``"invalid arguments"``
    (synccheck), ``"out of bounds"``, ``"misaligned"`` or another fault
    (memcheck); ``severity``: ``"error"`` or ``"warning"``; ``count``: how
    many times (hazards, reads, threads); ``first``: the earlier access of a
    race (else None), ``second``: the access or call reported; ``space``:
    ``"shared"``, ``"global"``, ``"local"`` or ``""``; ``address``: the byte
    of the first occurrence (shared: canonical, see
    :data:`~workbench.backends.counting.SHARED_STATIC_BASE`); ``detail``: more
    in words (a mask, the sanitizer's message).
    """

    tool: str
    kind: str
    severity: str
    count: int
    block: tuple | None
    second: SiteAccess
    first: SiteAccess | None = None
    space: str = ""
    address: int | None = None
    detail: str = ""


@dataclass
class LaunchFindings:
    """Everything one sanitized launch found (``findings``; empty: clean)."""

    kernel: str
    tool: str
    grid: tuple
    block: tuple
    shared_mem: int
    findings: list = field(default_factory=list)
    cpu_seconds: float = 0.0
    shared_variables: tuple[SharedVariable, ...] = ()
