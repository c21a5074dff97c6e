"""Kernel Tuner's formats and scripts: T4 results written and validated
against Kernel Tuner's schema, Kernel Tuner's cache and T4 files read back,
and kernels written in the style of Kernel Tuner's examples (tests/data/tuning: a tiled
matmul, a convolution whose filter is in constant memory, which Kernel Tuner feeds through
cmem_args), tuned as Kernel Tuner's example scripts tune theirs
tuned by wb.tune the way Kernel Tuner's scripts tune them.

The files in tests/data/kernel_tuner/ (its README names their source and
licence) were written by Kernel Tuner 1.5.0 itself.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.errors import TuneError

pytestmark = pytest.mark.usefixtures("private_tuning_cache")

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner"
TUNING_DATA = Path(__file__).resolve().parents[1] / "data" / "tuning"
FAST = {"max_time": 0.005, "min_repeat": 3}


def _schema(name: str) -> dict:
    return json.loads((DATA / f"{name}-schema.json").read_text())


def _validate(document: dict, name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(document, _schema(name))


SPIN = r"""
#if W == 5
#error W=5 is not supported
#endif
extern "C" __global__ void spin(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (W == 4) ? -1.0f : (float)i;
}
"""


def test_to_t4_is_valid_against_the_t4_schema(simulator, tmp_path):
    n = 64
    r = wb.tune(SPIN, (np.zeros(n, np.float32), np.int32(n)), n=n,
                space={"block": [32, 64, 4096], "W": [1, 4, 5]},
                reference=lambda out, n: np.arange(n, dtype=np.float32), cache=False,
                progress=False, **FAST)
    document = r.to_t4()
    _validate(document, "results")
    _validate(r.t4_metadata(), "metadata")
    assert document["schema_version"] == "1.0.0"
    assert document["metadata"]["timeunit"] == "milliseconds"
    by_config = {(e["configuration"]["block"], e["configuration"]["W"]): e
                 for e in document["results"]}
    assert len(by_config) == 9
    assert by_config[(32, 1)]["invalidity"] == "correct"
    assert by_config[(32, 4)]["invalidity"] == "correctness" and by_config[(32, 4)]["correctness"] == 0
    assert by_config[(32, 5)]["invalidity"] == "compile"
    assert by_config[(4096, 1)]["invalidity"] == "constraints"      # the device's limit
    time = next(m for m in by_config[(32, 1)]["measurements"] if m["name"] == "time")
    row = next(row for row in r.rows if row["config"] == {"block": 32, "W": 1})
    assert time["unit"] == "ms" and time["value"] == pytest.approx(row["median_s"] * 1e3)
    assert by_config[(32, 1)]["objectives"] == ["time"]
    # written to a file, the metadata beside it; and read back as a TuneResult
    r.to_t4(tmp_path / "spin.json")
    _validate(json.loads((tmp_path / "spin_metadata.json").read_text()), "metadata")
    again = wb.tuning.from_kernel_tuner(tmp_path / "spin.json")
    assert again.best == r.best
    assert [row["status"] for row in again.rows] == [row["status"] for row in r.rows]
    assert again.rows[0]["median_s"] == pytest.approx(r.rows[0]["median_s"])


def _kernel_tuner_best(cache: dict) -> dict:
    """The best configuration as Kernel Tuner computes it: the least time
    among the entries without an error."""
    keys = cache["tune_params_keys"]
    ok = [e for e in cache["cache"].values()
          if isinstance(e.get("time"), (int, float)) and "__error__" not in e]
    best = min(ok, key=lambda e: e["time"])
    return {k: best[k] for k in keys}


def test_a_kernel_tuner_cache_file_reads_into_a_tune_result():
    path = DATA / "kernel_tuner_cache.json"
    raw = json.loads(path.read_text())
    r = wb.tuning.from_kernel_tuner(path)
    assert r.best == _kernel_tuner_best(raw) == {"reps": 2, "chunk": 2}
    assert r.kernel == "spin" and r.params == {"reps": "define", "chunk": "define"}
    assert len(r.rows) == len(raw["cache"]) == 8
    failed = r.failed()
    assert [(row["config"], row["status"]) for row in failed] == \
        [({"reps": 2, "chunk": 3}, "compile")]
    entry = raw["cache"]["1,1"]
    row = r.rows[0]
    assert row["median_s"] == pytest.approx(entry["time"] * 1e-3)
    assert row["min_s"] == pytest.approx(min(entry["times"]) * 1e-3)
    assert row["repeats"] == len(entry["times"])
    assert row["compile_s"] == pytest.approx(entry["compile_time"] * 1e-3)
    df = r.to_pandas()
    assert list(df.columns[:2]) == ["reps", "chunk"] and len(df) == 8
    assert "reps=2, chunk=2" in repr(r)
    assert r.plot_best() is not None and r.plot_params() is not None
    _validate(r.to_t4(), "results")


def test_a_kernel_tuner_t4_file_reads_like_its_cache_file():
    from_t4 = wb.tuning.from_kernel_tuner(DATA / "kernel_tuner_t4.json")
    from_cache = wb.tuning.from_kernel_tuner(DATA / "kernel_tuner_cache.json")
    assert from_t4.best == from_cache.best == {"reps": 2, "chunk": 2}
    assert [(r["config"], r["status"]) for r in from_t4.rows] == \
        [(r["config"], r["status"]) for r in from_cache.rows]
    assert [r["median_s"] for r in from_t4.rows] == \
        pytest.approx([r["median_s"] for r in from_cache.rows], nan_ok=True)
    _validate(json.loads((DATA / "kernel_tuner_t4.json").read_text()), "results")


def test_a_cache_file_left_open_is_read(tmp_path):
    # Kernel Tuner appends entries with a trailing comma and closes the file at the end
    text = (DATA / "kernel_tuner_cache.json").read_text().rstrip()
    assert text.endswith("}\n}") or text.endswith("}}")
    opened = tmp_path / "open.json"
    opened.write_text(text[:-3].rstrip() + ",")
    r = wb.tuning.from_kernel_tuner(opened)
    assert len(r.rows) == 8 and r.best == {"reps": 2, "chunk": 2}
    (tmp_path / "other.json").write_text('{"something": 1}')
    with pytest.raises(TuneError, match="neither a Kernel Tuner cache file .* nor a T4 results file"):
        wb.tuning.from_kernel_tuner(tmp_path / "other.json")
    with pytest.raises(TuneError, match="no such file"):
        wb.tuning.from_kernel_tuner(tmp_path / "missing.json")


@pytest.mark.gpu
def test_a_cache_file_kernel_tuner_wrote_on_the_gpu_loads():
    """WORKBENCH_KERNEL_TUNER_CACHE names a cache file Kernel Tuner wrote on
    the GPU machine (benchmarks/tuning.py --kernel-tuner-examples writes one
    under $OUT, with Kernel Tuner's own best configuration beside it)."""
    name = os.environ.get("WORKBENCH_KERNEL_TUNER_CACHE")
    if not name:
        pytest.skip("WORKBENCH_KERNEL_TUNER_CACHE does not name a Kernel Tuner cache file")
    path = Path(name)
    raw = json.loads(path.read_text())
    r = wb.tuning.from_kernel_tuner(path)
    assert r.best == _kernel_tuner_best(raw)
    assert len(r.rows) == len(raw["cache"]) and r.device == raw["device_name"]
    said = path.with_name(path.stem + "_best.json")
    if said.exists():                 # what Kernel Tuner's tune_kernel returned as its best
        assert r.best == json.loads(said.read_text())


# -- kernels in the style of Kernel Tuner's examples, tuned as its scripts tune them -----------

def test_kernel_tuners_matmul_example(simulator):
    width = 64
    source = f"#define WIDTH {width}\n" + (TUNING_DATA / "matmul.cu").read_text()
    rng = np.random.default_rng(11)
    A = rng.standard_normal((width, width)).astype(np.float32)
    B = rng.standard_normal((width, width)).astype(np.float32)
    C = np.zeros_like(A)
    # as in Kernel Tuner's examples/cuda/matmul.py, with fewer values
    tune_params = {"block_size_x": [16, 32], "block_size_y": [2, 4, 8],
                   "tile_size_x": [1, 2], "tile_size_y": [2, 4]}
    grid_div_x = ["block_size_x", "tile_size_x"]
    grid_div_y = ["block_size_y", "tile_size_y"]
    restrict = ["block_size_x==block_size_y*tile_size_y"]
    answer = [A.astype(np.float64) @ B.astype(np.float64), None, None]
    r = wb.tune(source, [C, A, B], kernel_name="matmul_kernel", space=tune_params,
                problem_size=(width, width), grid_div_x=grid_div_x, grid_div_y=grid_div_y,
                restrictions=restrict, reference=answer, atol=1e-3, rtol=1e-3,
                cache=False, progress=False, **FAST)
    assert r.params["block_size_x"] == "launch" and r.params["tile_size_x"] == "define"
    configs = [row["config"] for row in r.rows]
    assert all(c["block_size_x"] == c["block_size_y"] * c["tile_size_y"] for c in configs)
    assert len(configs) == 6 and r.restricted == 24 - 6
    assert [row["status"] for row in r.rows] == ["ok"] * 6 and r.checked
    assert r.best in configs


def test_kernel_tuner_grids_are_kernel_tuners(simulator):
    """The grid and block of every configuration as Kernel Tuner computes them."""
    util = pytest.importorskip("kernel_tuner.util", reason="Kernel Tuner is not installed "
                               "(pip install kernel_tuner): its grids cannot be compared")
    from workbench.tuning.grids import GridDivisors
    from workbench.tuning.task import Task, launch_options
    problem_size = (1000, 37)
    divisors = (["block_size_x", "tile_size_x"], ["block_size_y / 3", 3], None)
    grid = GridDivisors.make(problem_size, *divisors,
                             names=("block_size_x", "block_size_y", "tile_size_x"))
    for params in ({"block_size_x": 32, "block_size_y": 4, "tile_size_x": 3},
                   {"block_size_x": 128, "block_size_y": 6, "tile_size_x": 1},
                   {"block_size_x": 64, "block_size_y": 8, "tile_size_x": 2}):
        threads, kt_grid = util.setup_block_and_grid(problem_size, divisors, params,
                                                     util.default_block_size_names)
        task = Task(source="", kernel="k", template_params=(), config=params,
                    kinds={k: "launch" for k in params}, grid=grid)
        options = launch_options(task)
        assert options["grid"] == tuple(kt_grid)
        assert tuple(options["block"]) == tuple(threads)


def _convolution(n: int, fh: int, fw: int):
    source = f"#define image_height {n}\n#define image_width {n}\n" + \
        (TUNING_DATA / "convolution.cu").read_text()
    rng = np.random.default_rng(5)
    image = rng.standard_normal((n + fh - 1) * (n + fw - 1)).astype(np.float32)
    weights = rng.standard_normal(fh * fw).astype(np.float32)
    padded = image.reshape(n + fh - 1, n + fw - 1).astype(np.float64)
    expected = sum(padded[i:i + n, j:j + n] * float(weights[i * fw + j])
                   for i in range(fh) for j in range(fw)).ravel()
    return source, image, weights, expected


def test_kernel_tuners_convolution_example_with_its_constant_memory(simulator):
    n, fh, fw = 32, 3, 3
    source, image, weights, expected = _convolution(n, fh, fw)
    output = np.zeros(n * n, np.float32)
    # as in Kernel Tuner's examples/cuda/convolution.py (cmem_args={'d_filter': ...})
    tune_params = {"filter_height": [fh], "filter_width": [fw], "block_size_x": [32, 48],
                   "block_size_y": [4], "tile_size_x": [1], "tile_size_y": [2],
                   "use_padding": [0, 1], "read_only": [1]}
    options = dict(kernel_name="convolution_kernel", space=tune_params, problem_size=(n, n),
                   grid_div_x=["block_size_x", "tile_size_x"],
                   grid_div_y=["block_size_y", "tile_size_y"],
                   restrictions=["use_padding==0 or (block_size_x % 32 != 0)"], cache=False,
                   progress=False, **FAST)
    # without the constant memory's values every configuration computes zeros:
    # the default configuration's zeros are refused as a reference
    with pytest.raises(TuneError, match=r"module variables \(d_filter\).*constants="):
        wb.tune(source, [output, image, weights], output=0, **options)
    answer = [expected, None, None]
    r = wb.tune(source, [output, image, weights], constants={"d_filter": weights},
                reference=answer, atol=1e-4, rtol=1e-4, **options)
    assert [row["config"]["block_size_x"] for row in r.rows] == [32, 48, 48]
    assert [row["status"] for row in r.rows] == ["ok"] * 3
