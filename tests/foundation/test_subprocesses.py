"""Commands and programs run in their own process group: a time limit, an
interrupt or the end of the program stops everything they started, and a
program's endless output stays bounded."""
import io
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench import subprocesses
from workbench.programs import runner


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocesses.run(["sh", "-c", script], timeout=1)
    grandchild = int(pidfile.read_text())
    assert _wait_gone(grandchild), "the grandchild outlived the timeout"


def test_an_interrupt_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            subprocesses.run(["sh", "-c", script], timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _wait_gone(int(pidfile.read_text()))


def test_run_gives_the_output_and_exit_code():
    done = subprocesses.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30)
    assert done.returncode == 3 and done.stdout == "out\n"


def test_a_program_leaving_a_background_process_returns_promptly(tmp_path):
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    done = runner.run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; echo done"], timeout_s=60,
                      echo=False)
    assert time.monotonic() - start < 15  # not the 30 s of the sleep
    assert done.returncode == 0 and done.stdout == "done\n" and not done.timed_out
    assert _wait_gone(int(pidfile.read_text())), "the background process outlived the program"


def test_a_program_timeout_ends_its_group(tmp_path):
    pidfile = tmp_path / "pid"
    done = runner.run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; sleep 60"], timeout_s=1,
                      echo=False)
    assert done.timed_out and done.returncode < 0
    assert _wait_gone(int(pidfile.read_text()))


def test_a_program_that_closes_its_output_still_runs_to_the_end():
    code = "import os, time; os.close(1); os.close(2); time.sleep(1.5); raise SystemExit(4)"
    done = runner.run([sys.executable, "-c", code], timeout_s=30, echo=False)
    assert done.returncode == 4 and not done.timed_out


def test_an_interrupt_stops_the_program(tmp_path):
    pidfile = tmp_path / "pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"], timeout_s=60, echo=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _wait_gone(int(pidfile.read_text()))


def test_endless_output_is_kept_bounded_and_the_echo_cut(monkeypatch):
    echoed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", echoed)
    code = "import sys\nfor i in range(200000): sys.stdout.write(f'line {i}\\n')"
    done = runner.run([sys.executable, "-c", code], timeout_s=60, keep_chars=10000, echo_chars=5000)
    total = sum(len(f"line {i}\n") for i in range(200000))
    assert done.stdout_cut == total - 20000
    assert done.stdout.startswith("line 0\nline 1\n")
    assert done.stdout.endswith("line 199999\n")
    assert f"{total - 20000:,} characters of stdout left out" in done.stdout
    assert len(done.stdout) < 20200
    shown = echoed.getvalue()
    assert shown.startswith("line 0\n")
    assert f"stdout cut after 5,000 characters; {total - 5000:,} more were not shown" in shown
    assert len(shown) < 5200
