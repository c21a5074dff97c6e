"""Result tables shown for people (``present.frames``) while their data stay
plain numbers, and text shortened at word boundaries (``present.tables.shorten``)."""
from __future__ import annotations

import datetime as dt
import pickle

import numpy as np
import pandas as pd
import pytest

from workbench.present.frames import readable, shown_column
from workbench.present.tables import shorten


def times_frame():
    rng = np.random.default_rng(3)
    median = rng.uniform(2e-6, 9e-6, 4)           # microseconds
    return pd.DataFrame({
        "name": ["a", "b", "c", "d"],
        "median_s": median,
        "max_s": median * 1e3,                     # milliseconds
        "ms": [0.5, np.nan, 2.0, 1.25],            # a duration in ms, one missing
        "bytes": pd.array([4096, None, 8, 16], dtype="Int64"),
        "gbps": [np.nan, None, 1.5, 2.0],
        "grid": [(64, 1, 1), (16, 16, 1), None, (1, 1, 1)],
        "start_ms": [1.7e12 + 1234.5, 1.7e12, np.nan, 1.7e12 + 60_000],
        "empty": [None, None, None, None],
    })


def test_each_time_column_gets_its_own_unit_and_the_data_stay_seconds():
    df = times_frame()
    shown = readable(df)
    view, _ = shown._wb_view()
    assert "median (µs)" in view.columns and "max (ms)" in view.columns
    assert "duration (ms)" in view.columns and "ms" not in view.columns
    np.testing.assert_allclose(view["median (µs)"].astype(float), df["median_s"] * 1e6,
                               rtol=1e-3)
    np.testing.assert_allclose(view["max (ms)"].astype(float), df["max_s"] * 1e3, rtol=1e-3)
    assert not any("e-" in cell or "e+" in cell for col in view for cell in view[col])
    plain = shown.to_pandas()
    assert type(plain) is pd.DataFrame
    pd.testing.assert_frame_equal(plain, df)       # every column, in seconds, as given


def test_one_missing_marker_and_clock_times():
    view, _ = readable(times_frame())._wb_view()
    cells = {cell for col in view for cell in view[col]}
    assert {"nan", "NaN", "<NA>", "None", "NaT"}.isdisjoint(cells)
    assert view["duration (ms)"][1] == "N/A" and view["bytes"][1] == "N/A"
    assert view["gbps"][0] == "N/A" and view["gbps"][1] == "N/A"
    assert list(view["grid"]) == ["(64, 1, 1)", "(16, 16, 1)", "N/A", "(1, 1, 1)"]
    expected = dt.datetime.fromtimestamp((1.7e12 + 1234.5) / 1e3)
    assert view["start"][0] == f"{expected:%H:%M:%S}.{expected.microsecond // 1000:03d}"
    assert view["start"][2] == "N/A"


def test_columns_left_out_are_named_with_how_to_see_them():
    shown = readable(times_frame(), shown=["name", "median_s", "ms"], hide_empty=True,
                     more="all=True shows them")
    view, left_out = shown._wb_view()
    assert list(view.columns) == ["name", "median (µs)", "duration (ms)"]
    text = repr(shown)
    assert "also max_s, bytes, gbps, grid, start_ms, empty: all=True shows them" in text
    assert "no values in" not in text  # (empty is left out because it was not chosen)
    assert "<i>also max_s" in shown._repr_html_()
    # the frame itself still has every column
    assert list(shown.columns) == list(times_frame().columns)
    assert shown["bytes"].iloc[0] == 4096


def test_frames_made_from_one_show_the_same_way_with_every_column_they_have():
    shown = readable(times_frame(), shown=["name"], hide_empty=True)
    part = shown.tail(2)[["name", "median_s", "bytes"]]
    assert type(part) is type(shown)
    view, left_out = part._wb_view()
    assert list(view.columns) == ["name", "median (µs)", "bytes"] and left_out == []
    again = pickle.loads(pickle.dumps(shown))
    pd.testing.assert_frame_equal(again.to_pandas(), times_frame())


def test_a_shortened_reason_ends_at_a_word_with_a_mark():
    reason = ("LaunchConfigError: scale(): block (2048, 1, 1) has 2048 threads; this device "
              "allows at most 1024 per block and (1024, 1024, 64) per dimension.")
    view, _ = readable(pd.DataFrame({"reason": [reason, "", None]}))._wb_view()
    first = view["reason"][0]
    assert len(first) <= 80 and first.endswith(" …")
    assert reason.startswith(first[:-2])                 # a prefix of the reason ...
    assert reason[len(first) - 2] == " "                 # ... that ends where a word ends
    assert list(view["reason"][1:]) == ["N/A", "N/A"]


@pytest.mark.parametrize("width", [10, 25, 40, 70])
def test_shorten_cuts_between_words(width):
    text = "the tune summary says what failed and why, in words that are never cut in two"
    out = shorten(text, width)
    assert len(out) <= width and out.endswith(" …")
    kept = out[:-2]
    assert text.startswith(kept) and text[len(kept)] in " ,"
    assert shorten(text, 200) == text


@pytest.mark.parametrize("width", [8, 20, 40])
def test_a_first_word_longer_than_the_width_is_cut_within_it(width):
    text = "checked_reduction_kernel_over_rows_and_columns(x, y, n) + more"
    out = shorten(text, width)
    assert len(out) == width and out.endswith(" …")
    assert text.startswith(out[:-2])


def test_a_rings_error_gist_is_cut_at_a_word():
    from workbench.rings.watchdog import _gist
    words = "handler faulted while the ring was draining its queue " * 8
    gist = _gist(RuntimeError(words))
    kept = gist.removeprefix("RuntimeError: ")
    assert len(kept) <= 200 and kept.endswith(" …")
    assert words.startswith(kept[:-2]) and words[len(kept) - 2] == " "


def test_shown_column_leaves_text_and_counts_alone():
    assert shown_column("size", pd.Series([256, 1024]))[1] == [256, 1024]  # as pandas shows them
    assert shown_column("status", pd.Series(["ok", "launch"]))[1] == ["ok", "launch"]


def test_small_and_large_rates_are_written_without_an_exponent():
    view, _ = readable(pd.DataFrame({"gbps": [7.363e-05, 0.1763, 1234.56, 3.0]}))._wb_view()
    assert list(view["gbps"]) == ["0.00007363", "0.1763", "1,235", "3"]


def test_a_long_frame_formats_only_the_rows_pandas_shows(monkeypatch):
    from workbench.present import frames
    rng = np.random.default_rng(11)
    n = 5000
    median = rng.uniform(2e-6, 9e-6, n)
    median[n // 2] = 7.5                 # an outlier in the rows left out: the unit stays µs
    df = pd.DataFrame({"name": [f"k{i}" for i in range(n)], "median_s": median,
                       "gbps": rng.uniform(0, 900, n), "size": np.arange(n)})
    shown = readable(df)
    everything, _ = shown._wb_view()
    with pd.option_context("display.max_rows", n + 1):   # (every row shown: every row formatted)
        full = repr(shown)
    formatted = []
    real_number = frames._number
    monkeypatch.setattr(frames, "_number", lambda x: formatted.append(x) or real_number(x))
    text = repr(shown)
    assert "median (µs)" in text and f"[{n} rows x 4 columns]" in text
    assert len(formatted) <= 2 * pd.get_option("display.max_rows")
    lines = [line.split() for line in text.splitlines()]
    full_lines = [line.split() for line in full.splitlines()]
    head = pd.get_option("display.min_rows") // 2
    assert lines[1:1 + head] == full_lines[1:1 + head]             # the same first rows ...
    assert lines[-2 - head:-2] == full_lines[-head:]                # ... and last rows
    assert "median (µs)" in everything.columns
