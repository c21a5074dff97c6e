"""wb.report's JSON schema and contents, and wb.ceilings' measurement and
cache, on every backend."""
import json

import jsonschema
import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking import ceilings as ceilings_module, history
from workbench.benchmarking.report import SCHEMA_FILE

SCHEMA = json.loads(SCHEMA_FILE.read_text())


@pytest.fixture
def fresh_history():
    history.clear()
    yield
    history.clear()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    ceilings_module._memory_cache.clear()
    yield tmp_path / "cache"
    ceilings_module._memory_cache.clear()


def _some_benchmarks(backend):
    x = backend.to_device(np.random.default_rng(0).standard_normal(256).astype(np.float32))
    wb.bench(lambda a: a * 2, x, repeat=4, name="double", bytes=2048)
    wb.sweep(lambda a: a + 1, sizes=[8, 16], setup=lambda size: (x[:size],), repeat=2,
             warmup_time=0, progress=False)


def test_report_json_follows_its_schema(backend, fresh_history, cache_dir, tmp_path):
    _some_benchmarks(backend)
    rep = wb.report(tmp_path / "report.json")
    data = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data == rep.data
    assert [b["name"] for b in data["benchmarks"]] == ["double", "<lambda>", "<lambda>"]
    assert data["benchmarks"][0]["stats"]["repeats"] == 4
    assert [b["params"] for b in data["benchmarks"][1:]] == [{"size": 8}, {"size": 16}]
    assert data["sweeps"][0]["points"] == 2 and data["sweeps"][0]["finished"] is True
    env = data["environment"]
    assert env["backend"] == backend.name and env["simulated"] is bool(backend.simulated)
    assert env["versions"]["workbench"] == wb.__version__
    assert env["device"]["name"] == backend.device_properties().name
    assert data["ceilings"] is None  # nothing measured in this cache
    assert ("simulated" in str(rep)) is bool(backend.simulated)


def test_report_csv_and_without_times(backend, fresh_history, cache_dir, tmp_path):
    _some_benchmarks(backend)
    rep = wb.report(tmp_path / "report.csv")
    lines = (tmp_path / "report.csv").read_text().splitlines()
    assert len(lines) == 4 and lines[0].startswith("name,sweep")
    assert len(rep.to_pandas()) == 3
    shown = rep._repr_html_()
    assert shown.count("<tr>") == 1 + 3 and "double" in shown and "median_s" in shown
    slim = wb.report(include_times=False)
    assert all(b["times"] == [] for b in slim.data["benchmarks"])
    jsonschema.validate(slim.data, SCHEMA)
    with pytest.raises(ValueError, match=".json"):
        wb.report(tmp_path / "report.txt")


def test_schema_rejects_a_broken_report(backend, fresh_history, cache_dir):
    _some_benchmarks(backend)
    data = wb.report().data
    del data["benchmarks"][0]["stats"]["median"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


@pytest.mark.slow
def test_ceilings_are_measured_once_and_cached(backend, cache_dir, fresh_history):
    first = wb.ceilings()
    assert first.copy_gbps > 0 and first.fma_gflops > 0 and first.gemm_gflops["float32"] > 0
    assert first.simulated is bool(backend.simulated)
    assert first.compute_gflops == max(first.fma_gflops, first.gemm_gflops["float32"])
    cached = json.loads((cache_dir / "ceilings.json").read_text())
    assert len(cached) == 1 and next(iter(cached.values()))["copy_gbps"] == first.copy_gbps
    ceilings_module._memory_cache.clear()  # as in a new session: read back from disk
    again = wb.ceilings()
    assert again.measured == first.measured and again.copy_gbps == first.copy_gbps
    assert history.results() == []  # measuring the ceilings is not a user benchmark
    # the report includes ceilings once they are known
    jsonschema.validate(wb.report().data, SCHEMA)
    assert wb.report().data["ceilings"]["copy_gbps"] == first.copy_gbps
    assert "GEMM float32" in str(first) and list(first.to_pandas().columns) == ["ceiling", "value", "unit"]
