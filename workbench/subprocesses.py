"""Running a command so that nothing it starts outlives it.

Every command runs in its own session (``start_new_session=True``): its
process group is the command and whatever it starts (a compiler's ``cc1plus``,
a profiler's target, a program's ``sleep 30 &``). A time limit, an interrupt
(Ctrl-C) or any other exception kills that whole group, not only the direct
child, whose descendants would otherwise keep running and keep the pipes open.
"""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Mapping, Sequence

#: Seconds to collect what a killed group left in its pipes before giving up on them.
_DRAIN_S = 5.0


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (started with :func:`popen`); quiet
    when it is gone already."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


def popen(command: Sequence[str], **kwargs) -> subprocess.Popen:
    """:class:`subprocess.Popen` in a new session (its own process group)."""
    return subprocess.Popen([str(c) for c in command], start_new_session=True, **kwargs)


def run(command: Sequence[str], *, timeout: float | None = None, env: Mapping[str, str] | None = None,
        cwd=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text: bool = True,
        errors: str = "replace", input: str | bytes | None = None) -> subprocess.CompletedProcess:
    """Like :func:`subprocess.run` (output captured, as text by default), but
    the command runs in its own session and a timeout, Ctrl-C or any other
    exception kills its whole process group.

    Raises :class:`subprocess.TimeoutExpired` (with what was written before)
    when ``timeout`` seconds pass."""
    stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
    proc = popen(command, stdin=stdin, stdout=stdout, stderr=stderr, env=None if env is None else dict(env),
                 cwd=cwd, text=text, errors=errors if text else None)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=_DRAIN_S)
        except subprocess.TimeoutExpired:  # a descendant left the group and holds the pipes
            out = err = None
            _close(proc)
            proc.wait()
        raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from None
    except BaseException:  # KeyboardInterrupt included: nothing may outlive the caller
        kill_group(proc)
        _close(proc)
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _close(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
