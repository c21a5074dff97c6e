"""The session's benchmarks: every result of :func:`workbench.bench` and
every sweep (:class:`~workbench.benchmarking.sweep.SweepRun`), kept for
:func:`workbench.report` and the benchmark panel.

Listeners (the panel) are told about each new sweep point as it arrives, so
that a plot can grow while a sweep runs.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

_lock = threading.Lock()
_results: list = []           # BenchResult, in order of measurement
_sweeps: list = []            # SweepRun, finished or running
_listeners: list[Callable[[str, Any], None]] = []


def record_result(result) -> None:
    """Keep ``result`` for the session report."""
    with _lock:
        _results.append(result)
    _notify("result", result)


def start_sweep(run) -> None:
    """Register a sweep (its ``results`` grow as points arrive)."""
    with _lock:
        _sweeps.append(run)
    _notify("sweep_started", run)


def sweep_updated(run) -> None:
    _notify("sweep_point", run)


def sweep_finished(run) -> None:
    _notify("sweep_finished", run)


def results() -> list:
    """Every benchmark result of the session, oldest first."""
    with _lock:
        return list(_results)


def sweeps() -> list:
    """Every sweep of the session, oldest first."""
    with _lock:
        return list(_sweeps)


def latest_sweep():
    """The most recent sweep (running or finished), or None."""
    with _lock:
        return _sweeps[-1] if _sweeps else None


def clear() -> None:
    """Forget every result and sweep (listeners stay)."""
    with _lock:
        _results.clear()
        _sweeps.clear()
    _notify("cleared", None)


def add_listener(callback: Callable[[str, Any], None]) -> Callable[[], None]:
    """Call ``callback(event, payload)`` on every change; returns a function
    that removes it. Events: ``result``, ``sweep_started``, ``sweep_point``,
    ``sweep_finished``, ``cleared``."""
    with _lock:
        _listeners.append(callback)

    def remove():
        with _lock:
            if callback in _listeners:
                _listeners.remove(callback)
    return remove


def _notify(event: str, payload) -> None:
    with _lock:
        listeners = list(_listeners)
    for callback in listeners:
        try:
            callback(event, payload)
        except Exception as exc:  # a broken display must not stop a measurement
            warnings.warn(f"benchmark listener {callback!r} failed on {event!r}: {exc!r}",
                          RuntimeWarning, stacklevel=2)
