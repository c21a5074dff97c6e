"""Where a tune's configurations run: here, one at a time (the next ones compiling
meanwhile), or on a Dask cluster."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from ..benchmarking.distributed import Pool, TaskTimeout, error_text
from ..runtime.session import backend as active_backend
from .task import Task, evaluate, precompile


def compile_threads() -> int:
    """Threads that compile the next configurations while one is measured: the
    compilers (NVRTC, g++) run outside the GIL, so up to four of them at once
    where there are the cores, one on a two-core machine."""
    return max(1, min(4, (os.cpu_count() or 2) - 1))


class Runner:
    """Runs tasks here, one at a time, or on a Dask cluster, several at once.

    Here, with ``compile_ahead`` threads, the configurations submitted after
    the one being measured compile meanwhile (measurements stay one at a time,
    in the order submitted: the GPU is never shared between two)."""

    def __init__(self, client, timeout: float | None = None, compile_ahead: int = 0):
        self.pool = None
        self.workers = 0
        self.capacity = 1
        self._done: list = []
        self._payloads: dict = {}
        self._compiler = None
        if client is None and compile_ahead > 0:
            self._compiler = ThreadPoolExecutor(compile_ahead,
                                                thread_name_prefix="workbench-tune-compile")
            self.capacity = compile_ahead + 1
        if client is not None:
            self.pool = Pool(client, timeout=timeout)
            self.workers = self.pool.n_workers
            # two a measuring worker: the next configuration waits on the worker while one
            # is measured, so the round trips to the scheduler and back to the tuner for the
            # next never leave a GPU idle (a worker runs one measurement at a time)
            self.capacity = 2 * self.pool.n_measure

    @property
    def resubmitted(self) -> int:
        return self.pool.lost if self.pool is not None else 0

    def submit(self, task: Task, handle) -> None:
        if self._compiler is not None:
            device = active_backend().current_device()
            self._done.append((task, handle, self._compiler.submit(_compile_on, device, task)))
            return
        if self.pool is None:
            self._done.append((task, handle, evaluate(task)))
            return
        # the inputs, the reference and the module variables' values travel once to
        # every worker, not with each task
        payload_key = (id(task.args), id(task.expected), id(task.constants))
        payload = self._payloads.get(payload_key)
        if payload is None:
            # hash=False: a key of its own, not one from the content, which an earlier tune
            # of the same inputs on this client may still be releasing (its workers then
            # "could not find data")
            payload = self.pool.client.scatter((task.args, task.expected, task.constants),
                                               broadcast=True, hash=False)
            self._payloads = {payload_key: payload}
        light = replace(task, args=(), expected=None, constants={})
        compiled = self.pool.submit(precompile, light, kind="compile", track=False)
        self.pool.submit(evaluate_compiled, compiled, light, payload, kind="measure",
                         tag=(task, handle))

    def in_flight(self) -> int:
        return self.pool.pending() if self.pool is not None else len(self._done)

    def finished(self):
        """Yield ``(task, handle, row)`` as tasks finish."""
        if self._compiler is not None:
            if self._done:  # the oldest, once compiled; the caller submits more before the next
                task, handle, compiled = self._done.pop(0)
                seconds = compiled.result()[2]
                row = evaluate(task)  # (its module is in compile_config's cache now)
                row["compile_s"] = seconds
                yield task, handle, row
            return
        if self.pool is None:
            while self._done:
                yield self._done.pop(0)
            return
        for (task, handle), row, error in self.pool.as_completed():
            if isinstance(error, TaskTimeout):
                row = {"index": task.index, "config": dict(task.config), "status": "timeout",
                       "reason": f"timeout: {error}", "median_s": None,
                       "compile_s": 0.0, "measure_s": 0.0}
            elif error is not None:
                row = {"index": task.index, "config": dict(task.config), "status": "error",
                       "reason": f"worker: {error_text(error)}", "median_s": None,
                       "compile_s": 0.0, "measure_s": 0.0}
            yield task, handle, row
            return  # one at a time: the caller submits more before the next

    def close(self) -> None:
        if self._compiler is not None:
            for _, _, compiled in self._done:
                compiled.cancel()
            self._done.clear()
            self._compiler.shutdown(wait=True)
        if self.pool is not None:
            self.pool.cancel()


def _compile_on(device: int, task: Task):
    """:func:`precompile` on a compile thread, for the tuning thread's device
    (the current device is per thread, and a GPU module loads on it)."""
    active_backend().set_device(device)
    return precompile(task)


def evaluate_compiled(compiled, task: Task, payload) -> dict:
    """On a measuring worker: the row of a configuration whose compile (on a
    CPU worker) failed, or its evaluation with ``payload`` (the inputs, the
    reference output and the module variables' values)."""
    task = replace(task, args=payload[0], expected=payload[1], constants=payload[2])
    ok, reason, seconds = compiled
    if not ok:
        status = "restricted" if reason.startswith("device limit") else "compile"
        return {"index": task.index, "config": dict(task.config), "status": status,
                "reason": reason, "median_s": None, "compile_s": seconds, "measure_s": 0.0}
    return evaluate(task)
