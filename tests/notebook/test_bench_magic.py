"""%gpu_bench in a real IPython shell, and the benchmark panel's state."""
import inspect

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking import history
from workbench.benchmarking.timer import bench
from workbench.ipython.bench_magic import BenchMagics


def test_magic_defaults_come_from_bench_signature():
    parser = BenchMagics.gpu_bench.parser
    params = inspect.signature(bench).parameters
    actions = {a.dest: a for a in parser._actions}
    for dest in ("repeat", "max_time", "min_repeat", "max_repeat", "warmup", "warmup_time",
                 "flush_l2", "name"):
        assert actions[dest].default == params[dest].default, dest


def test_line_magic_prints_returns_or_stays_quiet(shell, backend, capsys):
    shell.user_ns["x"] = backend.to_device(np.arange(64, dtype=np.float32))
    assert shell.run_line_magic("gpu_bench", "-n 4 x * 2") is None
    printed = capsys.readouterr().out
    assert printed.startswith("x * 2: ") and "4 repeats" in printed
    assert ("simulated" in printed) is bool(backend.simulated)

    r = shell.run_line_magic("gpu_bench", "-q -o -n 3 --bytes '2 * x.nbytes' --name twice x * 2")
    assert capsys.readouterr().out == ""
    assert isinstance(r, wb.types.BenchResult) and r.repeats == 3 and r.name == "twice"
    assert r.bytes == 2 * 64 * 4


def test_a_label_from_a_long_first_line_stays_within_sixty_characters(shell, backend):
    shell.user_ns["x"] = backend.to_device(np.arange(64, dtype=np.float32))
    name = "a_very_long_name_for_the_array_the_benchmark_multiplies_by_two_each_time"
    shell.user_ns[name] = shell.user_ns["x"]
    r = shell.run_line_magic("gpu_bench", f"-q -o -n 2 {name}*2")
    assert len(r.name) <= 60 and r.name.endswith(" …") and name.startswith(r.name[:-2])


def test_cell_magic_runs_setup_once_and_times_the_body(shell, backend, capsys):
    shell.user_ns.update(calls=[], setups=[])
    r = shell.run_cell_magic("gpu_bench", "-o -q -n 5 setups.append(1)", "calls.append(1)\n")
    assert shell.user_ns["setups"] == [1]
    assert r.repeats == 5 and len(shell.user_ns["calls"]) == 5 + r.warmup
    assert capsys.readouterr().out == ""


def test_magic_without_code_says_what_to_do(shell, backend):
    with pytest.raises(ValueError, match="needs a statement"):
        shell.run_line_magic("gpu_bench", "-n 3")


def test_panel_follows_a_running_sweep(backend):
    pytest.importorskip("ipywidgets")
    history.clear()  # a sweep of an earlier test would be shown first (points 0 at the start)
    panel = wb.BenchmarkPanel(min_interval=0)
    seen = []
    panel.observe(lambda change: seen.append(change["new"]), names="points")
    x = backend.to_device(np.random.default_rng(1).standard_normal(64).astype(np.float32))
    table = wb.sweep({"add": lambda a: a + 1, "mul": lambda a: a * 3}, sizes=[16, 32],
                     setup=lambda size: (x[:size],), bytes=lambda size: 8 * size,
                     ceilings=False, repeat=2, warmup_time=0, progress=False)
    state = panel.get_state()
    assert seen == [1, 2, 3, 4]  # the panel updated at every point, while the sweep ran
    assert state["sweep_id"] == table.attrs["sweep"]
    assert state["points"] == state["total"] == 4 and state["running"] is False
    assert state["simulated"] is bool(backend.simulated)
    assert state["columns"][:2] == ["name", "size"]
    assert [row[:2] for row in state["rows"]] == [["add", 16], ["mul", 16], ["add", 32], ["mul", 32]]
    median = state["columns"].index("median_s")
    np.testing.assert_allclose([row[median] for row in state["rows"]], table["median_s"])
    drawn = state["redraws"]
    assert drawn >= 1 and b"<svg" in bytes(panel._image.value)
    panel.y = "bandwidth"
    assert panel.redraws == drawn + 1
    with pytest.raises(Exception, match="choose one of"):
        panel.y = "latency"
    panel.close()


def test_panel_draws_a_sweep_over_parameters_only(backend):
    pytest.importorskip("ipywidgets")
    import warnings
    panel = wb.BenchmarkPanel(min_interval=0)
    x = backend.to_device(np.random.default_rng(2).standard_normal(256).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failing redraw is reported as a warning
        table = wb.sweep(lambda block: x[:block] * 2, params={"block": [32, 64]},
                         repeat=2, warmup_time=0, ceilings=False, progress=False)
    state = panel.get_state()
    assert "size" not in table.columns and table.attrs["params"] == ["block"]
    assert state["points"] == 2 and state["columns"][:2] == ["name", "block"]
    assert state["redraws"] >= 2 and b"<svg" in bytes(panel._image.value)
    panel.close()
