"""Exceptions raised by the workbench.

Every error a user can cause carries what was wrong and how to fix it in its
message. They live at the bottom of the layers (beside :mod:`workbench.diagnostics`,
which describes compiler messages) so that backends, the core and the notebook
layer can all raise and catch them.
"""
from __future__ import annotations

from .diagnostics import Diagnostic, format_diagnostics


class WorkbenchError(Exception):
    """Base class of every workbench error."""


class CompileError(WorkbenchError):
    """The CUDA source did not compile.

    ``diagnostics`` lists every message with the cell's own line numbers;
    ``source`` is the text that was compiled and ``log`` the compiler's raw log.
    """

    def __init__(self, diagnostics, source: str = "", log: str = "",
                 line_offset: int = 0, compiler: str = "NVRTC"):
        self.diagnostics = list(diagnostics)
        self.source = source
        self.log = log
        self.line_offset = line_offset
        self.compiler = compiler
        super().__init__(self._message())

    @property
    def errors(self):
        return [d for d in self.diagnostics if d.severity == "error"]

    def _message(self) -> str:
        n = len(self.errors) or len(self.diagnostics)
        head = f"{self.compiler} failed with {n} error{'s' if n != 1 else ''}"
        body = format_diagnostics(self.diagnostics, self.source, self.line_offset)
        return f"{head}\n{body}" if body else f"{head}\n{self.log.strip()}"


class KernelArgumentError(WorkbenchError, TypeError):
    """A kernel was called with arguments that do not fit its signature."""


class LaunchConfigError(WorkbenchError, ValueError):
    """Grid, block or shared memory of a launch are not valid for the device."""


class KernelFault(WorkbenchError, RuntimeError):
    """A kernel crashed while it ran (bad address, trap, assert, timeout...).

    ``signal`` names what happened, ``block`` and ``thread`` say where when
    known, ``line`` is the kernel source line when the checked mode found it.
    """

    def __init__(self, message: str, *, kernel: str | None = None,
                 signal: str | None = None, block=None, thread=None,
                 line: int | None = None, details: str = ""):
        self.kernel = kernel
        self.signal = signal
        self.block = block
        self.thread = thread
        self.line = line
        self.details = details
        super().__init__(message)


class OutOfMemoryError(WorkbenchError, MemoryError):
    """A device allocation failed for lack of memory.

    ``requested`` is the size asked for in bytes; the message says what holds
    the memory and what to do.
    """

    def __init__(self, message: str, *, requested: int | None = None):
        self.requested = requested
        super().__init__(message)


class DeviceError(WorkbenchError, IndexError):
    """A device index that does not exist on the active backend."""


class DeviceBusy(WorkbenchError, RuntimeError):
    """The device cannot do this while a persistent kernel (a ring) runs on it."""


#: How every message about something this machine lacks ends.
DOCTOR_HINT = "wb.doctor() checks this machine"


class _PointsToDoctor:
    """An error about what this machine has or lacks: its message ends by
    pointing to ``wb.doctor()`` (once, however often it is re-created)."""

    def __init__(self, message: str = "", *args):
        if message and "wb.doctor()" not in message:
            message = f"{message.rstrip()} ({DOCTOR_HINT})"
        super().__init__(message, *args)


class BackendUnavailable(_PointsToDoctor, WorkbenchError, RuntimeError):
    """The requested backend cannot run here (no GPU, CuPy missing...)."""


class CompilerNotFound(BackendUnavailable):
    """The CPU simulator has no C++ compiler for a new build (kernels built
    before still run from its cache). The message is one line that names the
    package to install for this system; a notebook shows that line alone."""


class ProfilerUnavailable(_PointsToDoctor, WorkbenchError, RuntimeError):
    """A profiler (Nsight Compute ``ncu``, Nsight Systems ``nsys``) cannot run
    here: not installed, no GPU (the simulator backend), or the driver does
    not let this user read the performance counters. The message is one line
    that says which, and what to install or do."""


class ProfileFailed(WorkbenchError, RuntimeError):
    """The profiled program or cell failed (a non-zero exit, an exception in
    the profiling process) or the profiler measured no kernel; the message
    carries the exit code and the end of the output."""


class ProgramError(WorkbenchError, RuntimeError):
    """A whole CUDA program (``wb.program``, ``%%cuda_program``) exited with
    a non-zero code, faulted, or ran past its time limit.

    ``returncode`` is its exit code (negative: the signal that ended it),
    ``stdout`` and ``stderr`` what it wrote, ``fault`` the simulator's
    description of a kernel fault (else None), ``timed_out`` whether the
    workbench stopped it at its time limit.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stdout: str = "",
                 stderr: str = "", fault: str | None = None, timed_out: bool = False):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.fault = fault
        self.timed_out = timed_out
        super().__init__(message)


class MissingExtra(WorkbenchError, ImportError):
    """An optional package that a feature needs is not installed (Optuna for
    the tuning strategies, Dask for a cluster); the message is one line that
    names the extra to install and what works without it."""


class TuneError(WorkbenchError, ValueError):
    """``wb.tune`` cannot start as asked: the space, the objective, the
    reference or the kernel's arguments do not fit (the message says how)."""


class DefinesError(WorkbenchError, TypeError, ValueError):
    """Preprocessor defines given in a form the workbench will not guess at
    (``defines=`` of ``wb.compile``, ``wb.tune``, ``wb.program``; ``%%cuda -D``):
    they are a dict ``{"NAME": value}`` or a list of ``"NAME"`` /
    ``"NAME=VALUE"`` strings; the message says what was wrong."""


class ArgumentTypeError(WorkbenchError, TypeError):
    """An argument of a type the function does not take; the message says
    which it takes (``except TypeError`` catches it too)."""


class ArgumentValueError(WorkbenchError, ValueError):
    """An argument whose value the function cannot take; the message says
    which values it takes (``except ValueError`` catches it too)."""


class NameNotFound(WorkbenchError, KeyError):
    """A name looked up that is not there (a kernel of a module, a check, a
    memory kind...); the message says which there are (``except KeyError``
    catches it too)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""  # (KeyError's own quotes the message)


class NotInstantiated(NameNotFound):
    """A template kernel indexed with an instantiation it was not compiled
    for; the message says how to compile it."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (the notebook's interrupt) stopped something the workbench was
    waiting for: a ``KeyboardInterrupt`` whose message says what was stopped
    and what is left as it was (a notebook shows that line alone)."""
