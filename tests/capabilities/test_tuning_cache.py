"""The tuning cache: what makes two tunes the same, which best configuration
is kept, and what ``wb.tuned`` runs (on the simulator)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import workbench as wb
from workbench.errors import TuneError, WorkbenchError

# out[i] = i + SHIFT; the block size changes nothing but the time
SHIFTED = r"""
#ifndef SHIFT
#define SHIFT 0
#endif
extern "C" __global__ void shifted(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(i + SHIFT);
}
"""
N = 64
SPACE = {"block": [32, 64]}
FAST = {"max_time": 0.005, "min_repeat": 2}


def args():
    return (np.zeros(N, np.float32), np.int32(N))


def shifted_by(shift):
    return lambda out, n: np.arange(n, dtype=np.float32) + shift


def tune(kernel=SHIFTED, **options):
    options = {"space": SPACE, "n": N, "progress": False, **FAST, **options}
    return wb.tune(kernel, args(), **options)


pytestmark = pytest.mark.usefixtures("simulator", "private_tuning_cache")


def run_tuned(tk):
    out = wb.to_device(np.zeros(N, np.float32))
    tk(out, np.int32(N), n=N)
    return wb.to_host(out)


# -- 1. fixed defines and compile options are part of the key ----------------------------------

def test_fixed_defines_are_part_of_the_key():
    first = tune(defines=["SHIFT=0"], reference=shifted_by(0))
    assert not first.from_cache and first.failed() == []
    other = tune(defines=["SHIFT=5"], reference=shifted_by(5))
    assert not other.from_cache and other.failed() == []
    assert tune(defines=["SHIFT=5"], reference=shifted_by(5)).from_cache


def test_compile_options_are_part_of_the_key():
    tune(wb.compile(SHIFTED)["shifted"], reference=shifted_by(0))
    fast = tune(wb.compile(SHIFTED, fast_math=True)["shifted"], reference=shifted_by(0))
    assert not fast.from_cache
    # a source tuned as text and a Kernel compiled with default options are the same kernel
    assert tune(SHIFTED, reference=shifted_by(0)).from_cache


def test_tuned_runs_its_own_defines_not_the_stored_ones(capsys):
    tune(defines=["SHIFT=0"], reference=shifted_by(0))
    tk = wb.tuned(wb.compile(SHIFTED, defines=["SHIFT=7"])["shifted"], block=32)
    np.testing.assert_array_equal(run_tuned(tk), np.arange(N, dtype=np.float32) + 7)
    assert tk.config is None and "default used" in capsys.readouterr().out
    # once SHIFT=7 is tuned, its own best is used, still with SHIFT=7
    tune(defines=["SHIFT=7"], reference=shifted_by(7))
    tk = wb.tuned(wb.compile(SHIFTED, defines=["SHIFT=7"])["shifted"])
    np.testing.assert_array_equal(run_tuned(tk), np.arange(N, dtype=np.float32) + 7)
    assert tk.config is not None and "tuned configuration used" in capsys.readouterr().out


def test_tuned_with_other_compile_options_is_not_tuned():
    tune(SHIFTED, reference=shifted_by(0))
    tk = wb.tuned(wb.compile(SHIFTED, fast_math=True)["shifted"], block=32, verbose=False)
    run_tuned(tk)
    assert tk.config is None
    tk = wb.tuned(wb.compile(SHIFTED)["shifted"], verbose=False)
    run_tuned(tk)
    assert tk.config is not None


# -- 2. every input of the tune is part of the run key -----------------------------------------

def test_a_reference_function_and_no_reference_are_different_tunes():
    assert not tune(reference=shifted_by(0)).from_cache
    assert not tune(reference=False).from_cache
    assert not tune(reference=None).from_cache
    assert tune(reference=False).from_cache


def test_two_reference_functions_are_different_tunes():
    def one(out, n):
        return np.arange(n, dtype=np.float32)

    def other(out, n):
        return np.arange(n, dtype=np.float64).astype(np.float32)

    assert not tune(reference=one).from_cache
    assert not tune(reference=other).from_cache
    assert tune(reference=one).from_cache


def test_a_reference_without_source_is_never_read_from_the_cache():
    unreadable = functools.partial(lambda out, n, s: np.arange(n, dtype=np.float32) + s, s=0)
    first = tune(reference=unreadable)
    second = tune(reference=unreadable)
    assert not first.from_cache and not second.from_cache
    assert "not read from the tuning cache" in second.note and "reference=" in second.note
    assert "not read from the tuning cache" in second._repr_html_()


@pytest.mark.parametrize("change", [
    {"bytes": 1e3}, {"flops": 64}, {"rtol": 1e-3}, {"atol": 1e-3},
    {"n": N - 1}, {"shared_mem": 128}, {"max_time": 0.004}, {"repeat": 3}],
    ids=lambda c: next(iter(c)))
def test_every_input_of_a_tune_is_part_of_its_key(change):
    tune(reference=False)
    assert not tune(reference=False, **change).from_cache


def test_a_grid_function_is_part_of_the_key():
    def grid(c):
        return N // c["block"]

    def rounded_up(c):
        return (N + c["block"] - 1) // c["block"]

    tune(n=None, grid=grid, reference=False)
    assert tune(n=None, grid=grid, reference=False).from_cache
    assert not tune(n=None, grid=rounded_up, reference=False).from_cache


# -- 3. the stored best: per objective, checked, replaced only when better ---------------------

def stored_best(cache):
    (bests,) = cache.best_entries(tune(reference=False).key).values()
    return bests


def test_an_unchecked_or_worse_tune_does_not_replace_a_checked_better_one(private_tuning_cache):
    checked = tune(reference=shifted_by(0))
    best = stored_best(private_tuning_cache)["time"]
    assert best["config"] == checked.best and best["value"] == checked.best_time
    # unchecked, and made to look better: never stored as the best
    # cache=False: only the store below may write, whatever these measure
    unchecked = tune(space={"block": [128]}, reference=False, cache=False)
    private_tuning_cache.store(checked.key, None, _faster(unchecked), when="now",
                                 variant=private_tuning_cache.variant((), {}))
    assert stored_best(private_tuning_cache)["time"]["config"] == checked.best
    # checked but slower (a budget-limited tune that found worse): not stored either
    slower = tune(space={"block": [128]}, reference=shifted_by(0), cache=False)
    slower.rows[0]["median_s"] = checked.best_time * 10
    private_tuning_cache.store(checked.key, "slower", slower, when="now",
                                 variant=private_tuning_cache.variant((), {}))
    assert stored_best(private_tuning_cache)["time"]["config"] == checked.best
    tk = wb.tuned(wb.compile(SHIFTED)["shifted"], verbose=False)
    run_tuned(tk)
    assert tk.config == checked.best and "best time" in tk.note
    # the same tune measured again replaces its own entry, better or not
    again = tune(reference=shifted_by(0), cache="refresh")
    assert stored_best(private_tuning_cache)["time"]["value"] == again.best_time


def _faster(result):
    for row in result.rows:
        row["median_s"] = 1e-12
    return result


def test_only_unchecked_tunes_leave_nothing_for_tuned():
    tune(reference=False)
    tk = wb.tuned(SHIFTED)
    with pytest.raises(TuneError, match="run wb.tune"):
        run_tuned(tk)


def test_tuned_says_which_objective(capsys):
    tune(objective="gbps", bytes=N * 4, reference=shifted_by(0))
    tk = wb.tuned(wb.compile(SHIFTED)["shifted"])
    run_tuned(tk)
    assert "the best gbps" in capsys.readouterr().out and "best gbps" in tk.note
    with pytest.raises(TuneError, match="objective"):
        wb.tuned(SHIFTED, objective="speed")


# -- 4. wb.tuned reads shapes where the arrays are, and the cache once per size ----------------

def test_tuned_copies_no_argument_to_the_host_and_reads_the_cache_once(monkeypatch,
                                                                      private_tuning_cache):
    tune(reference=shifted_by(0))
    tk = wb.tuned(wb.compile(SHIFTED)["shifted"], verbose=False)
    reads = []
    real = private_tuning_cache._cache.get_json
    monkeypatch.setattr(private_tuning_cache._cache, "get_json", lambda k: reads.append(k) or real(k))
    from workbench.tuning import arguments

    def no_copy(value):
        raise AssertionError("wb.tuned copied an argument to the host")

    monkeypatch.setattr(arguments, "to_numpy", no_copy)
    out = wb.to_device(np.zeros(N, np.float32))
    for _ in range(3):
        tk(out, np.int32(N), n=N)
    assert tk.config is not None and len(reads) == 1
    np.testing.assert_array_equal(wb.to_host(out), np.arange(N, dtype=np.float32))


# -- 6. errors ---------------------------------------------------------------------------------

def test_tuned_errors_are_workbench_errors_that_say_what_to_do():
    with pytest.raises(WorkbenchError, match=r"run wb.tune\(\.\.\.\) first"):
        run_tuned(wb.tuned(SHIFTED))


def test_energy_on_workers_without_nvml_is_explained(monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    with distributed.LocalCluster(dashboard_address=None, n_workers=1, processes=False,
                                  threads_per_worker=1) as cluster, \
            distributed.Client(cluster) as client:
        with pytest.raises(TuneError, match="none of the 1 worker"):
            tune(objective="energy", client=client, cache=False)


# -- 7. a configuration that takes too long on a Dask worker -----------------------------------

def _sleep(seconds):
    import time
    time.sleep(seconds)
    return seconds


@pytest.fixture
def threads_client(monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    with distributed.LocalCluster(dashboard_address=None, n_workers=1, processes=False,
                                  threads_per_worker=2) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def test_a_task_past_its_timeout_is_cancelled_and_reported(threads_client):
    from workbench.benchmarking.distributed import Pool, TaskTimeout
    pool = Pool(threads_client, timeout=0.3)
    slow = pool.submit(_sleep, 1.0, tag="slow")
    pool.submit(_sleep, 0.0, tag="quick")
    results = {tag: (value, error) for tag, value, error in pool.as_completed()}
    assert results["quick"] == (0.0, None)
    assert results["slow"][0] is None and isinstance(results["slow"][1], TaskTimeout)
    assert slow.cancelled()


def test_cancel_cancels_the_outstanding_tasks_on_the_cluster(threads_client):
    from workbench.benchmarking.distributed import Pool
    pool = Pool(threads_client)
    future = pool.submit(_sleep, 1.0, tag="slow")
    pool.cancel()
    assert future.cancelled() and pool.pending() == 0


def test_a_tune_with_a_timeout_records_timeout_rows(threads_client):
    r = tune(client=threads_client, timeout=1e-4, reference=False, cache=False)
    assert {row["status"] for row in r.rows} == {"timeout"}
    assert "no result after" in r.rows[0]["reason"]
    with pytest.raises(TuneError, match="client="):
        tune(timeout=1.0)
