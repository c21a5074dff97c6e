"""CUPTI's kernel records collected in C (``backends/gpu/native_cupti.py``,
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

from workbench.backends.gpu import native_cupti

ROOT = Path(__file__).resolve().parents[2]


def _files(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("")
    return folder


def test_a_toolkit_lays_cupti_out_under_targets(tmp_path):
    target = tmp_path / "cuda" / "targets" / "x86_64-linux"
    include = _files(target / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    _files(target / "lib", "libcupti.so.2025.3.1", "libcupti.so.13", "libcupti.so", "libcupti_static.a")
    sets, library, why = native_cupti.locate(roots=[tmp_path / "cuda"])
    assert why is None
    assert sets == [[include]]
    assert library == target / "lib" / "libcupti.so"  # the plain name: the link to the current one


def test_older_toolkits_keep_cupti_under_extras(tmp_path):
    root = tmp_path / "cuda"
    _files(root / "include", "cuda.h")
    include = _files(root / "extras" / "CUPTI" / "include", "cupti.h", "cupti_activity.h")
    _files(root / "extras" / "CUPTI" / "lib64", "libcupti.so.12")
    sets, library, why = native_cupti.locate(roots=[root])
    assert why is None
    assert sets == [[include, root / "include"]]  # cupti.h includes cuda.h: both folders
    assert library.name == "libcupti.so.12"


def test_a_wheels_headers_and_library_with_cuda_h_from_a_toolkit(tmp_path):
    wheel = tmp_path / "site" / "nvidia" / "cu13"
    include = _files(wheel / "include", "cupti.h", "cupti_activity.h")
    _files(wheel / "lib", "libcupti.so.13")
    toolkit = _files(tmp_path / "cuda" / "include", "cuda.h")
    sets, library, why = native_cupti.locate(roots=[wheel, tmp_path / "cuda"])
    assert why is None
    assert sets == [[include, toolkit]]
    assert library == wheel / "lib" / "libcupti.so.13"


def test_a_library_given_wins_over_the_one_beside_the_headers(tmp_path):
    target = tmp_path / "cuda" / "targets" / "x86_64-linux"
    _files(target / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    _files(target / "lib", "libcupti.so.13")
    chosen = _files(tmp_path / "elsewhere", "libcupti.so.13") / "libcupti.so.13"
    _, library, why = native_cupti.locate(roots=[tmp_path / "cuda"], library=chosen)
    assert why is None and library == chosen


@pytest.mark.parametrize("present, complaint", [
    ((), "no CUPTI headers"),
    (("cupti.h", "cupti_activity.h"), "no cuda.h"),
    (("cupti.h", "cupti_activity.h", "cuda.h"), "no libcupti"),
])
def test_what_is_missing_is_said(tmp_path, present, complaint):
    _files(tmp_path / "cuda" / "include", *present)
    sets, library, why = native_cupti.locate(roots=[tmp_path / "cuda"])
    assert sets is None and library is None
    assert complaint in why


def test_the_switch_turns_the_c_collector_off(monkeypatch):
    monkeypatch.setenv(native_cupti.SWITCH, "0")
    monkeypatch.setattr(native_cupti, "_reason", native_cupti._reason)  # (restored after)
    native_cupti.module.cache_clear()
    try:
        assert native_cupti.module() == (None, None)
        assert native_cupti.unavailable_reason() == f"{native_cupti.SWITCH}=0"
    finally:
        native_cupti.module.cache_clear()


def test_a_wheels_library_brings_its_own_headers(tmp_path):
    """Headers of the library's own release come first, a toolkit's after
    (the build takes the first set that compiles)."""
    toolkit = tmp_path / "cuda"
    _files(toolkit / "include", "cupti.h", "cupti_activity.h", "cuda.h")
    wheel = tmp_path / "site" / "nvidia" / "cu13"
    own = _files(wheel / "include", "cupti.h", "cupti_activity.h")
    library = _files(wheel / "lib", "libcupti.so.13") / "libcupti.so.13"
    sets, _, why = native_cupti.locate(roots=[toolkit], library=library)
    assert why is None
    assert sets == [[own, toolkit / "include"], [toolkit / "include"]]


def test_where_cuptis_headers_are_found_the_collector_builds():
    """(It starts only on a GPU; the build, the part a compiler or a header
    of another release can break, is checked wherever the headers are.)"""
    sets, _, why = native_cupti.locate()
    if sets is None:
        pytest.skip(f"no CUPTI headers here: {why}")
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    native_cupti.module.cache_clear()
    built, library = native_cupti.module()
    assert built is not None, native_cupti.unavailable_reason()
    assert library.name.startswith("libcupti.so")
    assert built.take() == [] and built.dropped() == 0  # (not started: nothing collected)


# The C collector driven by a stand-in libcupti (tests/fake_cupti.c), in a
# process of its own (the collector starts once per process): what a GPU
# cannot be made to show on demand -- records out of order, a name's address
# reused, many buffers -- and what CUPTI refusing leaves behind.
_STAND_IN = textwrap.dedent(r'''
    import ctypes, json, subprocess, sys
    from pathlib import Path
    from workbench.backends import native_build
    from workbench.backends.gpu import native_cupti
    sets, _, _ = native_cupti.locate()
    lib = Path(sys.argv[1])
    for folders in sets:  # (the first set of headers that compiles, as the collector's own build)
        includes = [f"-I{f}" for f in folders]
        if subprocess.run([*native_build.compiler(), "-shared", "-fPIC", *includes, sys.argv[2],
                           "-o", str(lib)], capture_output=True).returncode == 0:
            break
    fake = ctypes.CDLL(str(lib))  # (the collector's dlopen of the same path gets this one)
    fake.fake_queue.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]
    # (built here with room for 8192 unread records, not 4 Mi: the oldest half goes sooner)
    built, why = native_build.build(native_cupti.SOURCE, "_wb_cupti", native_cupti.SWITCH,
                                    ("-ldl", "-lpthread"), depends=native_cupti._headers(folders),
                                    flags=(*includes, "-DMAX_KEPT=8192"))
    assert built is not None, why
    out = {}
    try:
        built.start(str(lib), 1 << 16)  # 64 KiB buffers: about 450 records each
    except RuntimeError as exc:
        print(json.dumps({"refused": str(exc), "zeroed": fake.fake_zeroed_attribute()}))
        sys.exit(0)
    out["zeroed"], out["enabled"] = fake.fake_zeroed_attribute(), fake.fake_enabled()
    names = [b"k5", b"k3", b"k5", b"k4"]  # (kept alive until the records are taken)
    for (corr, start), name in zip(((5, 50), (3, 30), (5, 40), (4, 45)), names):
        fake.fake_queue(corr, name, start, start + 7)
    out["ordered"] = built.take()
    fake.fake_name(b"first"); fake.fake_queue(10, None, 1, 2); fake.fake_complete()
    fake.fake_name(b"second"); fake.fake_queue(11, None, 3, 4); fake.fake_complete()
    out["names"] = [r[1] for r in built.take()]
    for i in range(3000):
        fake.fake_queue(100 + i, b"many", i, i + 1)
    got = built.take()
    out["many"] = [len(got), got[0][0], got[-1][0], got[-1][3] - got[-1][2]]
    for i in range(3000):
        fake.fake_queue(5000 + i, b"again", i, i + 1)
    out["again"] = len(built.take())
    out["flags"] = [fake.fake_last_flag()]
    built.take(False)
    out["flags"].append(fake.fake_last_flag())
    names = [b"kernel_%d" % i for i in range(300)]  # (the table grows past its first 256 slots)
    for i, name in enumerate(names):
        fake.fake_queue(20000 - i, name, i, i + 1)  # (and in reverse order, across buffers)
    got = built.take()
    out["named"] = [[r[0] for r in got] == list(range(20000 - 299, 20001)),
                    [r[1] for r in got] == [n.decode() for n in reversed(names)]]
    for chunk in range(4):  # 12000 unread records: past 8192 the oldest half goes
        for i in range(3000):
            fake.fake_queue(30000 + chunk * 3000 + i, b"flood", i, i + 1)
        fake.fake_complete()
    got = built.take()
    out["flood"] = [len(got), built.dropped(), got[0][0], got[-1][0]]
    out["buffers"], out["dirty"] = fake.fake_buffers_seen(), fake.fake_dirty_buffers()
    built.disable()
    out["disabled"] = fake.fake_enabled()
    out["timestamp"] = built.timestamp()
    print(json.dumps(out))
''')


def _stand_in(tmp_path, **env) -> dict:
    sets, _, why = native_cupti.locate()
    if sets is None:
        pytest.skip(f"no CUPTI headers here: {why}")
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    done = subprocess.run(
        [sys.executable, "-c", _STAND_IN, str(tmp_path / "libcupti_stand_in.so"), str(ROOT / "tests" / "fake_cupti.c")],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
             "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_c_collector_hands_records_over_in_launch_order_with_names_copied_in_time(tmp_path):
    got = _stand_in(tmp_path)
    assert got["zeroed"] == 1 and got["enabled"] == 1  # CUPTI told its buffers come zeroed
    # sorted by correlation id, a tie by start
    assert got["ordered"] == [[3, "k3", 30, 37], [4, "k4", 45, 52], [5, "k5", 40, 47], [5, "k5", 50, 57]]
    # a name is copied when its buffer completes: the same address with a new text later
    # (a module unloaded and another loaded) leaves the first record its own name
    assert got["names"] == ["first", "second"]
    assert got["many"] == [3000, 100, 3099, 1] and got["again"] == 3000
    # every buffer the collector handed out was zeroed, recycled ones too
    assert got["buffers"] >= 14 and got["dirty"] == 0
    assert got["flags"] == [1, 0]  # forced when the log is read, not while launches run
    assert got["named"] == [True, True]
    kept, dropped, first, last = got["flood"]
    assert kept + dropped == 12000 and 0 < dropped <= 12000 - 4096  # the oldest ones went
    assert first == 30000 + dropped and last == 30000 + 11999  # and the newest were kept
    assert got["disabled"] == 0 and got["timestamp"] == 123456789


def test_when_cupti_refuses_the_c_collector_says_why_and_leaves_cupti_as_found(tmp_path):
    got = _stand_in(tmp_path, FAKE_CUPTI_REFUSE="1")
    assert "CUPTI refused kernel activity" in got["refused"] and "refused by the stand-in" in got["refused"]
    assert got["zeroed"] == 0  # the next collector (cupti-python) hands CUPTI buffers it did not zero


# What a process reports about its timing of three spin kernels of known lengths.
_PROBE = textwrap.dedent(r'''
    import json, sys
    import numpy as np, workbench as wb
    from workbench.backends.gpu import cupti
    k = wb.compile(sys.argv[1])["spin"]
    for us in (1, 1, 100, 400, 200):
        k(np.int64(us * 1000), grid=1, block=1)
    activity = cupti.kernel_activity()
    print(json.dumps({"collector": getattr(activity, "collector", None),
                      "why": cupti.unavailable_reason(),
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
    sets, _, why = native_cupti.locate()
    if sets is None:
        pytest.skip(f"no CUPTI to build against here: {why}")
    got = _probe()
    assert got["collector"] == "in C (native/cupti_records.c)", got["why"]
    assert got["ms"] == pytest.approx([0.1, 0.4, 0.2], rel=0.1)


@pytest.mark.gpu
def test_with_the_c_collector_off_cupti_python_collects_alike():
    pytest.importorskip("cupti", reason="cupti-python (the [cupti] extra) is not installed")
    got = _probe(**{native_cupti.SWITCH: "0"})
    assert got["collector"] == "through cupti-python", got["why"]
    assert got["ms"] == pytest.approx([0.1, 0.4, 0.2], rel=0.1)
