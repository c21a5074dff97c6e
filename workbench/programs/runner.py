"""Running a program as a subprocess: its stdout and stderr go to this
process's ``sys.stdout`` and ``sys.stderr`` (a notebook cell's output, where
stderr is shown apart) as it writes them, and are kept; a time limit stops
it (its whole process group) and says so."""
from __future__ import annotations

import codecs
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass
class Completed:
    """What a run left: exit code (negative: the signal that ended it), the
    text of each stream, the seconds it ran, whether the time limit stopped it."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def _pump(stream, name: str, out: queue.Queue) -> None:
    """Put every chunk the child writes on ``out`` as it comes, then None."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            text = decoder.decode(chunk)
            if text:
                out.put((name, text))
        tail = decoder.decode(b"", final=True)
        if tail:
            out.put((name, tail))
    finally:
        out.put((name, None))


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        timeout_s: float | None = None, echo: bool = True) -> Completed:
    """Run ``command``; with ``echo`` its output is written to ``sys.stdout``
    / ``sys.stderr`` while it runs. Stopped (SIGKILL to its process group)
    after ``timeout_s`` seconds; interrupting (Ctrl-C) stops it too."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    start = time.perf_counter()
    proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=cwd, env=full_env, start_new_session=True)
    chunks: queue.Queue = queue.Queue()
    threads = [threading.Thread(target=_pump, args=(proc.stdout, "stdout", chunks), daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, "stderr", chunks), daemon=True)]
    for t in threads:
        t.start()
    texts = {"stdout": [], "stderr": []}
    open_streams = 2
    timed_out = False
    deadline = None if timeout_s is None else start + timeout_s
    try:
        while open_streams:
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.perf_counter()))
            try:
                name, text = chunks.get(timeout=wait)
            except queue.Empty:
                if deadline is not None and time.perf_counter() >= deadline and not timed_out:
                    timed_out = True
                    _kill(proc)
                continue
            if text is None:
                open_streams -= 1
                continue
            texts[name].append(text)
            if echo:
                target = sys.stdout if name == "stdout" else sys.stderr
                target.write(text)
                target.flush()
        try:
            returncode = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # the pipes closed, the process did not end
            _kill(proc)
            returncode = proc.wait(timeout=30)
    except BaseException:  # KeyboardInterrupt: the program must not outlive the cell
        _kill(proc)
        proc.wait(timeout=30)
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    return Completed(returncode, "".join(texts["stdout"]), "".join(texts["stderr"]),
                     time.perf_counter() - start, timed_out)
