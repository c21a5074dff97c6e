"""Work spread over a Dask cluster: ``wb.sweep(..., client=)`` and ``wb.tune(..., client=)``.

Dask is an optional extra (``pip install cuda-workbench[tune]``) and is
imported only here, inside functions, when a client is passed. Any Dask
cluster works: ``dask_cuda.LocalCUDACluster`` (one worker per GPU), a
cluster across hosts, or on a CPU-only machine a ``LocalCluster`` whose
workers each run their own simulator backend.

Which worker does what: workers that declare a ``GPU`` resource
(``dask worker --resources GPU=1``) take the measurements, each holding the
resource for one measurement at a time, and compilation goes to the others;
when no worker declares one, every worker measures (give each one thread, as
``LocalCUDACluster`` does, so two measurements never share a device) and
compiles. Results come back as they finish (:meth:`Pool.as_completed`).

A worker lost mid-run (its process killed, its host gone) loses only the
tasks it held: the scheduler runs them again elsewhere, and a task that the
scheduler gives up on (``KilledWorker``) is submitted once more here before
it is reported as failed with the reason.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from ..errors import ArgumentTypeError, MissingExtra
from ..runtime.devices import device
from ..runtime.session import backend as active_backend

#: Times a task whose worker died is submitted again by the pool itself
#: (after the scheduler's own ``allowed-failures`` reschedules).
RESUBMITS = 1

_MISSING = ("Dask is not installed: pip install 'cuda-workbench[tune]' (dask, distributed) "
            "to spread work over a cluster")


def require_dask():
    """``distributed`` itself, or an ImportError whose one line says what to install."""
    try:
        import distributed  # lazy: an optional extra, needed only with a client
    except ImportError:
        raise MissingExtra(_MISSING) from None
    return distributed


def check_client(client) -> None:
    """A TypeError unless ``client`` looks like a ``distributed.Client``."""
    if not all(hasattr(client, a) for a in ("submit", "scheduler_info", "gather")):
        raise ArgumentTypeError(
            f"client= takes a dask.distributed Client, got {type(client).__name__}; "
            "make one with Client(LocalCluster(...)) or Client('scheduler-address')")


class TaskTimeout(TimeoutError):
    """A task gave no result within the pool's ``timeout`` and was cancelled."""


class Pool:
    """Submits measurement and compile tasks to a Dask client and yields
    finished ones as they come, resubmitting tasks lost with a worker.

    ``timeout``: seconds a tracked task may take from its submission (its
    inputs' tasks, such as its compile, included); a task past it is
    cancelled and reported with a :class:`TaskTimeout`."""

    def __init__(self, client, *, timeout: float | None = None):
        check_client(client)
        self.distributed = require_dask()
        self.client = client
        workers = client.scheduler_info().get("workers", {})
        if not workers:
            raise RuntimeError("the Dask cluster has no workers; start some (or wait for them "
                               "with client.wait_for_workers(n)) before passing client=")
        gpu = [a for a, w in workers.items() if (w.get("resources") or {}).get("GPU")]
        self.gpu_workers = gpu
        self.cpu_workers = [a for a in workers if a not in gpu]
        self.n_measure = len(gpu) or len(workers)
        self._as_completed = self.distributed.as_completed([], with_results=False)
        self._tasks: dict = {}     # future key -> (fn, args, kind, tag, resubmits left)
        self._futures: dict = {}   # future key -> (future, submitted at) of tracked tasks
        self.timeout = timeout
        self.lost = 0               # tasks resubmitted after their worker died

    @property
    def n_workers(self) -> int:
        return len(self.gpu_workers) + len(self.cpu_workers)

    def _options(self, kind: str) -> dict:
        if kind == "measure" and self.gpu_workers:
            return {"resources": {"GPU": 1}}
        if kind == "compile" and self.gpu_workers and self.cpu_workers:
            return {"workers": self.cpu_workers, "allow_other_workers": False}
        return {}

    def submit(self, fn: Callable, *args, kind: str = "measure", tag: Any = None,
               resubmits: int = RESUBMITS, track: bool = True):
        """Run ``fn(*args)`` on a worker (``kind``: "measure" or "compile");
        ``tag`` comes back with the result. Arguments may be futures of
        earlier tasks (Dask passes their results). An untracked task
        (``track=False``) is only an input of others: :meth:`as_completed`
        does not yield it."""
        # compiles too: a GPU module loads on the device current where it is built, and the
        # measurement that follows on the same worker finds it in the compile cache
        future = self.client.submit(on_worker_device, fn, *args, pure=False, **self._options(kind))
        if not track:
            return future
        self._futures[future.key] = (future, time.monotonic())
        self._tasks[future.key] = (fn, args, kind, tag, resubmits)
        self._as_completed.add(future)
        return future

    def pending(self) -> int:
        return len(self._tasks)

    def as_completed(self) -> Iterator[tuple[Any, Any, BaseException | None]]:
        """``(tag, value, error)`` for each task as it finishes: ``error`` is
        None or the exception that left the task without a value (its worker
        lost more often than the retries allow, or one the task raised)."""
        while self._tasks:
            future = self._next()
            if future is None:
                yield from self._timed_out()
                continue
            if future.key not in self._tasks:       # cancelled after its timeout
                continue
            fn, args, kind, tag, resubmits = self._tasks.pop(future.key)
            self._futures.pop(future.key, None)
            try:
                value = future.result()
            except Exception as exc:  # noqa: BLE001 - reported with the task, never fatal
                if _worker_lost(exc, self.distributed) and resubmits > 0:
                    self.lost += 1
                    self.submit(fn, *args, kind=kind, tag=tag, resubmits=resubmits - 1)
                    continue
                yield tag, None, exc
                continue
            finally:
                future.release()
            yield tag, value, None

    def _next(self):
        """The next finished future; without a timeout, waits for one; with
        one, None when none finished within a short poll."""
        if self.timeout is None:
            return next(self._as_completed)
        deadline = time.monotonic() + min(0.05, self.timeout)
        while time.monotonic() < deadline:
            if self._as_completed.has_ready():
                return next(self._as_completed)
            time.sleep(0.002)
        return None

    def _timed_out(self):
        now = time.monotonic()
        late = [k for k in self._tasks if now - self._futures[k][1] > self.timeout]
        for k in late:
            future = self._futures.pop(k)[0]
            _, _, _, tag, _ = self._tasks.pop(k)
            self.client.cancel([future])
            yield tag, None, TaskTimeout(f"no result after {self.timeout:g} s; cancelled")

    def cancel(self) -> None:
        """Cancel the tasks still queued or running on the cluster (a stopped
        run) and forget them."""
        outstanding = [f for f, _ in self._futures.values() if not f.done()]
        if outstanding:
            self.client.cancel(outstanding)
        self._tasks.clear()
        self._futures.clear()
        self._as_completed.clear()


def worker_device(name, count: int) -> int | None:
    """The device a worker named ``name`` measures on when it sees ``count``
    devices: worker ``k`` of a local cluster (named 0, 1, ...) takes device
    ``k % count``; a worker with another name, or one device, takes the current one."""
    if count <= 1:
        return None
    try:
        return int(str(name)) % count
    except ValueError:
        return None


def on_worker_device(fn, *args):
    """``fn(*args)`` on this worker's own device (see :func:`worker_device`)."""
    from distributed import get_worker  # lazy: runs on a Dask worker only
    try:
        name = get_worker().name
    except ValueError:       # not on a worker (a synchronous scheduler): the current device
        name = None
    index = worker_device(name, active_backend().device_count())
    if index is None:
        return fn(*args)
    with device(index):
        return fn(*args)


def local_cluster(n_workers: int | None = None, *, processes: bool = True, **options):
    """A Dask cluster on this machine with one measuring worker per device.

    On a GPU with ``dask-cuda`` installed: ``LocalCUDACluster`` (each worker
    sees its own GPU). Otherwise a ``LocalCluster`` of ``n_workers``
    (default: one per device of the active backend, the simulator's virtual
    devices included) single-threaded worker processes, worker ``k``
    measuring on device ``k``; each worker process runs its own backend.
    Use it as ``with local_cluster() as cluster, Client(cluster) as client``.
    """
    distributed = require_dask()
    b = active_backend()
    n = n_workers or b.device_count()
    if not b.simulated:
        try:
            from dask_cuda import LocalCUDACluster  # lazy: optional, GPU machines only
        except ImportError:
            pass
        else:
            return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, range(n))), **options)
    options.setdefault("dashboard_address", None)
    return distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                                    **options)


def error_text(exc: BaseException) -> str:
    """``Type: first line`` of an exception."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _worker_lost(exc: BaseException, distributed) -> bool:
    killed = getattr(distributed, "KilledWorker", None)
    if killed is None:
        from distributed.scheduler import KilledWorker as killed  # lazy: older layouts
    from asyncio import CancelledError  # a future cancelled when its worker left
    return isinstance(exc, (killed, CancelledError)) or type(exc).__name__ == "FutureCancelledError"

