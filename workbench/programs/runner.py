"""Running a program as a subprocess: its stdout and stderr go to this
process's ``sys.stdout`` and ``sys.stderr`` (a notebook cell's output, where
stderr is shown apart) as it writes them, and are kept; a time limit stops
it (its whole process group) and says so.

Output is bounded, so that a program printing without end cannot fill the
notebook's memory: the first and the last ``keep_chars`` characters of each
stream are kept (a line in between says how many were left out), and echoing
stops after ``echo_chars`` characters with a one-line note.

The pipes are read from their raw file descriptors in this thread (no reader
threads to wait for). Once the program's own process has exited, whatever it
started and left running (``sleep 30 &``, holding the pipes open) gets
:data:`DRAIN_S` seconds to finish writing, then its process group is killed.
"""
from __future__ import annotations

import codecs
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from .. import subprocesses

#: Seconds the pipes may stay open after the program's process has exited.
DRAIN_S = 1.0
#: Characters of each stream kept at its start and at its end.
KEEP_CHARS = 4 * 1024 * 1024
#: Characters of each stream echoed before echoing stops.
ECHO_CHARS = 4 * 1024 * 1024


@dataclass
class Completed:
    """What a run left: exit code (negative: the signal that ended it), the
    text of each stream, the seconds it ran, whether the time limit stopped it,
    and how many characters of each stream were left out of the text kept."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    stdout_cut: int = 0
    stderr_cut: int = 0


class _Stream:
    """One stream's bounded record: head, tail and the count in between."""

    def __init__(self, name: str, keep: int, echo_limit: int, echo: bool):
        self.name = name
        self.keep = keep
        self.echo_limit = echo_limit
        self.echo = echo
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.head: list[str] = []
        self.head_len = 0
        self.tail: list[str] = []
        self.tail_len = 0
        self.cut = 0
        self.echoed = 0
        self.unechoed = 0

    def add(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final=final)
        if not text:
            return
        self._echo(text)
        room = self.keep - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(self.head[-1])
            text = text[room:]
        if text:
            self.tail.append(text)
            self.tail_len += len(text)
            while self.tail_len > self.keep:
                extra = self.tail_len - self.keep
                if len(self.tail[0]) <= extra:
                    dropped = len(self.tail.pop(0))
                else:
                    self.tail[0] = self.tail[0][extra:]
                    dropped = extra
                self.tail_len -= dropped
                self.cut += dropped

    def _echo(self, text: str) -> None:
        if not self.echo:
            return
        room = self.echo_limit - self.echoed
        if room > 0:
            shown = text[:room]
            self.echoed += len(shown)
            target = sys.stdout if self.name == "stdout" else sys.stderr
            text = text[room:]
            if text:  # the limit is reached now: say so while the program may still run
                shown += f"\n[workbench: {self.name} is not shown past here ...]\n"
            target.write(shown)
            target.flush()
        self.unechoed += len(text)

    def note(self) -> None:
        """The one line saying echoing stopped, and how much was not shown."""
        if self.echo and self.unechoed:
            target = sys.stdout if self.name == "stdout" else sys.stderr
            target.write(f"\n[workbench: {self.name} cut after {self.echoed:,} characters; "
                         f"{self.unechoed:,} more were not shown]\n")
            target.flush()

    def text(self) -> str:
        middle = (f"\n[workbench: {self.cut:,} characters of {self.name} left out here]\n"
                  if self.cut else "")
        return "".join(self.head) + middle + "".join(self.tail)


def run(command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        timeout_s: float | None = None, echo: bool = True, keep_chars: int | None = None,
        echo_chars: int | None = None) -> Completed:
    """Run ``command``; with ``echo`` its output is written to ``sys.stdout``
    / ``sys.stderr`` while it runs. Stopped (SIGKILL to its process group)
    after ``timeout_s`` seconds; interrupting (Ctrl-C) stops it too.
    ``keep_chars``/``echo_chars``: the bounds on the output (module defaults)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    keep = KEEP_CHARS if keep_chars is None else keep_chars
    echo_limit = ECHO_CHARS if echo_chars is None else echo_chars
    start = time.perf_counter()
    proc = subprocesses.popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, cwd=cwd, env=full_env)
    streams = {proc.stdout.fileno(): _Stream("stdout", keep, echo_limit, echo),
               proc.stderr.fileno(): _Stream("stderr", keep, echo_limit, echo)}
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    timed_out = False
    deadline = None if timeout_s is None else start + timeout_s
    stop_at = None  # when to stop reading: the program exited (or was killed) DRAIN_S before
    try:
        while selector.get_map() or proc.poll() is None:
            now = time.perf_counter()
            if deadline is not None and now >= deadline and not timed_out:
                timed_out = True
                subprocesses.kill_group(proc)
            if stop_at is None and proc.poll() is not None:
                stop_at = now + DRAIN_S
            if stop_at is not None and now >= stop_at:
                break
            limits = [0.2] + [t - now for t in (deadline, stop_at) if t is not None]
            if not selector.get_map():  # both pipes closed, the program still runs
                try:
                    proc.wait(timeout=max(0.0, min(limits)))
                except subprocess.TimeoutExpired:
                    pass
                continue
            for key, _ in selector.select(max(0.0, min(limits))):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    streams[key.fd].add(data)
                else:
                    selector.unregister(key.fd)
        subprocesses.kill_group(proc)  # what the program left running must not outlive the cell
        returncode = proc.wait()
    except BaseException:  # KeyboardInterrupt: the program must not outlive the cell
        subprocesses.kill_group(proc)
        proc.wait()
        raise
    finally:
        selector.close()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    for s in streams.values():
        s.add(b"", final=True)
        s.note()
    out, err = streams.values()
    return Completed(returncode, out.text(), err.text(), time.perf_counter() - start, timed_out,
                     out.cut, err.cut)
