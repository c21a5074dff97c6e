"""What a notebook shows of ``wb.timings()``, a sweep and a tune: times in µs
or ms per column, clock times, one missing-value marker, ten columns at most
for the timing log, reasons never cut mid-word; and the data under them
unchanged (``to_pandas()``: seconds, every column)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench.runtime.session import TIMINGS_SHOWN

SCALE = r"""
extern "C" __global__ void scale_into(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
RAW = re.compile(r"\d\.\d+e[-+]\d+|\bNaN\b|<NA>|\bNone\b|\bnan\b|NaT")


@pytest.fixture
def kernel(backend):
    return wb.compile(SCALE, name="tables_shown")["scale_into"]


def inputs(n=4096):
    x = np.random.default_rng(7).random(n, np.float32)
    return wb.to_device(x), wb.allocate(n, np.float32), x


def test_timings_show_ten_columns_at_most_in_units_people_read(kernel):
    x, y, host = inputs()
    for block in (64, 128, 256):
        kernel(x, y, 4096, n=4096, block=block)
    np.testing.assert_array_equal(wb.to_host(y), 2 * host)
    log = wb.timings()
    view, left_out = log._wb_view()
    assert len(view.columns) <= 10 and set(log.columns) >= set(TIMINGS_SHOWN)
    assert "start_ms" in left_out and "device" in left_out
    assert [c for c in view.columns if c.startswith("duration (")], view.columns
    text, page = repr(log), log._repr_html_()
    assert not RAW.search(text), text
    assert "wb.timings(all=True) shows them" in text
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d\d\d", view["time"].iloc[-1])
    # the data: every column, ms in milliseconds
    plain = log.to_pandas()
    assert type(plain) is pd.DataFrame and "start_ms" in plain.columns
    at = plain.index[plain["kernel"] == "scale_into"][-1]
    last = plain.loc[at]
    assert 0 < last["ms"] < 60_000
    duration = [c for c in view.columns if c.startswith("duration")][0]
    unit = duration[len("duration ("):-1]
    factor = {"ns": 1e6, "µs": 1e3, "ms": 1.0, "s": 1e-3}[unit]
    assert float(view.loc[at, duration].replace(",", "")) == pytest.approx(last["ms"] * factor,
                                                                          rel=2e-3)
    every = wb.timings(all=True)._wb_view()[0]
    assert len(every.columns) == len(plain.columns) and "start" in every.columns


def test_a_sweep_shows_times_per_column_and_keeps_seconds(kernel):
    x, y, _ = inputs()
    table = wb.sweep(lambda size: kernel(x, y, size, n=size), sizes=[256, 4096],
                     max_time=0.01, progress=False)
    view, left_out = table._wb_view()
    assert "median (µs)" in view.columns or "median (ms)" in view.columns
    assert "median_s" not in view.columns and not RAW.search(repr(table))
    assert set(left_out) >= {"bytes", "flops"}  # no values: left out and named
    assert "no values in" in repr(table)
    plain = table.to_pandas()
    assert "median_s" in plain.columns and (plain["median_s"] < 1).all()
    assert table.attrs["sweep"] == plain.attrs["sweep"]


BROKEN = SCALE.replace("extern", """#if BAD
#error this configuration is refused on purpose with a message long enough to be shortened in the summary of the tune, which must end at a word boundary and say where every reason is
#endif
extern""", 1)


def cut_at_a_word(shown: str, whole: str) -> bool:
    """``shown`` is ``whole``, or its start ending where a word ends, marked " …"."""
    whole = " ".join(str(whole).split())
    return shown == whole or (shown.endswith(" …") and whole.startswith(shown[:-2])
                              and whole[len(shown) - 2] in " ,;:(")


def test_a_tune_table_and_summary_never_cut_a_word(backend):
    x, y, host = inputs()
    result = wb.tune(BROKEN, (x, y, 4096), space={"block": [64, 2048], "BAD": [0, 1]}, n=4096,
                     reference=lambda x, y, n: 2 * x, progress=False, cache=False,
                     max_time=0.01)
    failed = result.failed()
    assert [r["status"] for r in failed] == ["compile"]        # BAD=1 (block 2048: over the limits)
    assert len(" ".join(failed[0]["reason"].split())) > 160    # long enough to be shortened
    summary = re.sub(r"<[^>]+>", "", result._repr_html_())
    assert "1 (1 compile); first: " in summary
    shown = summary.split("first: ", 1)[1].split(" (every reason")[0].split("over the device")[0]
    shown = shown.strip()
    assert shown.endswith(" …") and cut_at_a_word(shown, failed[0]["reason"]), shown
    view, _ = result.table()._wb_view()
    assert view.columns[0] == "block"
    assert "median (µs)" in view.columns or "median (ms)" in view.columns
    for cell, whole in zip(view["reason"], result.to_pandas()["reason"]):
        assert cell == "N/A" if not whole else cut_at_a_word(cell, whole), (cell, whole)
    plain = result.to_pandas()
    assert type(plain) is pd.DataFrame and "median_s" in plain.columns
    assert set(plain["reason"]) >= {failed[0]["reason"]}      # whole in the data
