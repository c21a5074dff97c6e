"""Turning a dead worker into a :class:`~workbench.errors.KernelFault` that
says what happened and where: from the worker's fault record
(:class:`.protocol.FaultRecord`), its exit status, or the AddressSanitizer
report in its log."""
from __future__ import annotations

import re
import signal

from ...errors import KernelFault
from .protocol import FaultKind, FaultRecord
from .source import SOURCE_NAME
from .worker import WorkerDied

#: The ``signal`` a KernelFault names for each kind (SIGNAL: the signal's own name).
_KIND_SIGNAL = {FaultKind.TRAP: "trap", FaultKind.ASSERT: "assert", FaultKind.DEADLOCK: "deadlock",
                FaultKind.TIMEOUT: "timeout", FaultKind.ASAN: "AddressSanitizer",
                FaultKind.ERROR: "error", FaultKind.UNSUPPORTED: "unsupported"}
_SIGNAL_TEXT = {"SIGSEGV": "invalid memory access", "SIGBUS": "invalid memory access (bus error)",
                "SIGFPE": "arithmetic error (integer division by zero?)",
                "SIGILL": "illegal instruction", "SIGABRT": "abort"}


#: How to change the time limit, said wherever a launch ran out of it.
TIME_LIMIT_HINT = ("If the kernel only needs longer, raise the limit: "
                   "wb.backend('simulator', timeout_s=600).")


def kernel_fault(kernel: str, checked: bool, died: WorkerDied, timeout_s: float,
                 arena=None) -> KernelFault:
    """The fault of kernel ``kernel`` whose launch ended the worker (``arena``:
    the device memory, to say where a wild address points)."""
    rec = died.record
    if rec is None:
        if died.timed_out:
            return KernelFault(f"kernel {kernel!r} did not finish within {timeout_s:g} s "
                               "and was stopped; the simulator restarted (device arrays are "
                               f"intact). {TIME_LIMIT_HINT}", kernel=kernel, signal="timeout")
        what = _exit_text(died.returncode)
        return KernelFault(f"the simulator's worker ended with {what} while kernel {kernel!r} ran; "
                           "it restarted (device arrays are intact)", kernel=kernel,
                           signal=what, details=died.log)
    kind = rec.fault_kind
    sig = _KIND_SIGNAL.get(kind, "error")
    line = rec.source_line
    what = rec.text
    if kind is FaultKind.SIGNAL:
        sig = _signal_name(rec)
        if what.startswith("stack overflow"):
            what = f"{what} ({sig})"
            sig = "stack overflow"
        else:
            addr = ""
            if sig in ("SIGSEGV", "SIGBUS"):
                addr = f" at address {rec.address:#x}{_where_address(rec.address, arena)}"
            what = f"{sig}: {_SIGNAL_TEXT.get(sig, sig)}{addr}"
    elif kind is FaultKind.TIMEOUT:
        detail = what.partition("time limit exceeded: ")[2]
        what = (f"time limit of {timeout_s:g} s exceeded ("
                + (f"{detail}. " if detail else "an endless loop, or threads spinning on a flag "
                   "that another block or thread sets? ")
                + "On the GPU such a kernel hangs)")
    elif kind is FaultKind.ASAN:
        what, line = asan_summary(died.log)
    if checked and died.log and "runtime error:" in died.log:  # UndefinedBehaviorSanitizer's
        found = ubsan_summary(died.log)
        if found is not None:
            (what, line), sig = found, "misaligned address"
    block, thread = rec.block_index, rec.thread_index
    where = ""
    if block is not None:
        where += f" in block {block}"
    if thread is not None:
        where += f", thread {thread}"
    if line is not None and kind is not FaultKind.ASSERT:  # the assert message names its line
        where += f" at line {line}"
    hint = ""
    if kind is FaultKind.SIGNAL and sig in ("SIGSEGV", "SIGBUS") and not checked:
        hint = (" Run it checked (wb.backend('simulator', checked=True) or %%cuda --check) to "
                "find the line.")
    if kind is FaultKind.TIMEOUT:
        hint = " " + TIME_LIMIT_HINT
    message = (f"kernel {kernel!r} faulted: {what.rstrip('.')}{where}. The simulator restarted; device "
               f"arrays are intact.{hint}")
    return KernelFault(message, kernel=kernel, signal=sig, block=block, thread=thread,
                       line=line, details=died.log)


def worker_fault(died: WorkerDied, doing: str) -> KernelFault:
    """The fault of a worker that ended outside a kernel (while ``doing``:
    loading a library, accessing a global variable)."""
    rec = died.record
    if rec is not None:
        what = rec.text or _KIND_SIGNAL.get(rec.fault_kind, "error")
        if rec.fault_kind is FaultKind.SIGNAL:
            name = _signal_name(rec)
            if name.startswith("SIG"):
                what = f"{name}: {what}"
    elif died.timed_out:
        what = "no reply within the time limit"
    else:
        what = _exit_text(died.returncode)
    return KernelFault(f"the simulator's worker ended while {doing} ({what}); it restarts on "
                       "the next launch (device arrays are intact)",
                       signal=what, details=died.log)


def _where_address(address: int, arena) -> str:
    """What a faulting address points at, in words (empty when nothing useful)."""
    if address < 1 << 16:
        return " (a null pointer, or a small offset from one)"
    if arena is not None and arena.base <= address < arena.base + arena.size:
        return (" (in device memory, but outside every allocation: an index far out of "
                "bounds, or a pointer to freed memory)")
    return ""


def _signal_name(rec: FaultRecord) -> str:
    try:
        return signal.Signals(rec.signo).name
    except ValueError:
        return f"signal {rec.signo}"


def _exit_text(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


_ASAN_KIND = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ASAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)", re.M)
_ASAN_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (.+?) (?:\S*/)?" + re.escape(SOURCE_NAME) + r":(\d+)")


_UBSAN = re.compile(r"(?:\S*/)?" + re.escape(SOURCE_NAME) + r":(\d+):\d+: runtime error: (.*)")


def ubsan_summary(log: str) -> tuple[str, int | None] | None:
    """``(what happened, cell line)`` from UndefinedBehaviorSanitizer's report
    (the checked build's alignment check), or None."""
    m = _UBSAN.search(log)
    if not m:
        return None
    return m.group(2).strip().replace(", which requires", " (which requires") + (
        ")" if ", which requires" in m.group(2) else ""), int(m.group(1))


def asan_summary(log: str) -> tuple[str, int | None]:
    """``(what happened, cell line)`` from an AddressSanitizer report."""
    kind = _ASAN_KIND.search(log)
    access = _ASAN_ACCESS.search(log)
    frame = _ASAN_FRAME.search(log)
    what = kind.group(1) if kind else "memory error"
    if what in ("use-after-poison", "unknown-crash"):
        what = "out-of-bounds access to device memory"
    elif what == "SEGV":
        what = "invalid memory access (SIGSEGV), outside every allocation or a bad pointer"
    elif what.endswith("overflow"):
        what = what.replace("-", " ").replace("buffer overflow", "out-of-bounds access")
    if access:
        what = f"{what} ({access.group(1).lower()} of {access.group(2)} bytes at {access.group(3)})"
    return what, int(frame.group(2)) if frame else None
