"""CUPTI's kernel records collected in C (``backends/cupti_native.py``,
``native/cupti_records.c``): where its headers and library are found, and,
on a GPU, that it is the collector in use and times kernels as the
``cupti-python`` one does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.backends import cupti_native

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("")
    return folder


def test_a_toolkit_lays_cupti_out_under_targets(tmp_path):
    target = tmp_path / "cuda" / "targets" / "x86_64-linux"
    include = _files(target / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    _files(target / "lib", "libcupti.so.2025.3.1", "libcupti.so.13", "libcupti.so", "libcupti_static.a")
    sets, library, why = cupti_native.locate(roots=[tmp_path / "cuda"])
    assert why is None
    assert sets == [[include]]
    assert library == target / "lib" / "libcupti.so"  # the plain name: the link to the current one


def test_older_toolkits_keep_cupti_under_extras(tmp_path):
    root = tmp_path / "cuda"
    _files(root / "include", "cuda.h")
    include = _files(root / "extras" / "CUPTI" / "include", "cupti.h", "cupti_activity.h")
    _files(root / "extras" / "CUPTI" / "lib64", "libcupti.so.12")
    sets, library, why = cupti_native.locate(roots=[root])
    assert why is None
    assert sets == [[include, root / "include"]]  # cupti.h includes cuda.h: both folders
    assert library.name == "libcupti.so.12"


def test_a_wheels_headers_and_library_with_cuda_h_from_a_toolkit(tmp_path):
    wheel = tmp_path / "site" / "nvidia" / "cu13"
    include = _files(wheel / "include", "cupti.h", "cupti_activity.h")
    _files(wheel / "lib", "libcupti.so.13")
    toolkit = _files(tmp_path / "cuda" / "include", "cuda.h")
    sets, library, why = cupti_native.locate(roots=[wheel, tmp_path / "cuda"])
    assert why is None
    assert sets == [[include, toolkit]]
    assert library == wheel / "lib" / "libcupti.so.13"


def test_a_library_given_wins_over_the_one_beside_the_headers(tmp_path):
    target = tmp_path / "cuda" / "targets" / "x86_64-linux"
    _files(target / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    _files(target / "lib", "libcupti.so.13")
    chosen = _files(tmp_path / "elsewhere", "libcupti.so.13") / "libcupti.so.13"
    _, library, why = cupti_native.locate(roots=[tmp_path / "cuda"], library=chosen)
    assert why is None and library == chosen


@pytest.mark.parametrize("present, complaint", [
    ((), "no CUPTI headers"),
    (("cupti.h", "cupti_activity.h"), "no cuda.h"),
    (("cupti.h", "cupti_activity.h", "cuda.h"), "no libcupti"),
])
def test_what_is_missing_is_said(tmp_path, present, complaint):
    _files(tmp_path / "cuda" / "include", *present)
    sets, library, why = cupti_native.locate(roots=[tmp_path / "cuda"])
    assert sets is None and library is None
    assert complaint in why


def test_the_switch_turns_the_c_collector_off(monkeypatch):
    monkeypatch.setenv(cupti_native.SWITCH, "0")
    monkeypatch.setattr(cupti_native, "_reason", cupti_native._reason)  # (restored after)
    cupti_native.module.cache_clear()
    try:
        assert cupti_native.module() == (None, None)
        assert cupti_native.unavailable_reason() == f"{cupti_native.SWITCH}=0"
    finally:
        cupti_native.module.cache_clear()


def test_a_wheels_library_brings_its_own_headers(tmp_path):
    """Headers of the library's own release come first, a toolkit's after
    (the build takes the first set that compiles)."""
    toolkit = tmp_path / "cuda"
    _files(toolkit / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    wheel = tmp_path / "site" / "nvidia" / "cu13"
    own = _files(wheel / "include", "cupti.h", "cupti_activity.h")
    library = _files(wheel / "lib", "libcupti.so.13") / "libcupti.so.13"
    sets, _, why = cupti_native.locate(roots=[toolkit], library=library)
    assert why is None
    assert sets == [[own, toolkit / "include"], [toolkit / "include"]]


def test_where_cuptis_headers_are_found_the_collector_builds():
    """(It starts only on a GPU; the build, the part a compiler or a header
    of another release can break, is checked wherever the headers are.)"""
    sets, _, why = cupti_native.locate()
    if sets is None:
        pytest.skip(f"no CUPTI headers here: {why}")
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    cupti_native.module.cache_clear()
    built, library = cupti_native.module()
    assert built is not None, cupti_native.unavailable_reason()
    assert library.name.startswith("libcupti.so")
    assert built.take() == [] and built.dropped() == 0  # (not started: nothing collected)


# What a process reports about its timing of three spin kernels of known lengths.
_PROBE = textwrap.dedent(r'''
    import json, sys
    import numpy as np, workbench as wb
    from workbench.backends import cupti_activity
    k = wb.compile(sys.argv[1])["spin"]
    for us in (1, 1, 100, 400, 200):
        k(np.int64(us * 1000), grid=1, block=1)
    activity = cupti_activity.kernel_activity()
    print(json.dumps({"collector": getattr(activity, "collector", None),
                      "why": cupti_activity.unavailable_reason(),
                      "ms": list(wb.timings()["ms"])[2:]}))
''')

SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    long long t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
               if (t - t0 > ns) break; }
}
"""


def _probe(**env) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, SPIN], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), "WORKBENCH_BACKEND": "cupy", **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_on_a_gpu_with_cuptis_headers_the_c_collector_times_kernels():
    sets, _, why = cupti_native.locate()
    if sets is None:
        pytest.skip(f"no CUPTI to build against here: {why}")
    got = _probe()
    assert got["collector"] == "in C (native/cupti_records.c)", got["why"]
    assert got["ms"] == pytest.approx([0.1, 0.4, 0.2], rel=0.1)


@pytest.mark.gpu
def test_with_the_c_collector_off_cupti_python_collects_alike():
    pytest.importorskip("cupti", reason="cupti-python (the [cupti] extra) is not installed")
    got = _probe(**{cupti_native.SWITCH: "0"})
    assert got["collector"] == "through cupti-python", got["why"]
    assert got["ms"] == pytest.approx([0.1, 0.4, 0.2], rel=0.1)
