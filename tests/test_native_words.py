"""The C words module (workbench/backends/native_words.py): a store, a watch
on another word with the GIL released, and the copy of an answer, as a ring's
host side uses them. Another thread plays the device here, writing words while
the C function watches; rings on both backends use it in tests/test_rings.py,
and ``WORKBENCH_NATIVE_WORDS=0`` is checked there to give the Python path."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from workbench.backends import native_words

rng = np.random.default_rng(11)


@pytest.fixture(scope="module")
def words():
    m = native_words.module()
    if m is None:
        pytest.skip(f"the C words module cannot be built here: {native_words.unavailable_reason()}")
    return m


def _later(seconds, action):
    t = threading.Timer(seconds, action)
    t.start()
    return t


def test_publish_wait_stores_watches_and_copies_the_answer(words):
    mem = np.zeros(8, dtype=np.int64)  # [0] head, [1] answer word
    answer = rng.integers(0, 2**63, 4, dtype=np.int64)
    src = np.zeros(4, dtype=np.int64)
    dst = np.zeros(4, dtype=np.int64)

    head_seen = []

    def device():
        head_seen.append(int(mem[0]))  # (checked in the test's own thread)
        src[:] = answer
        mem[1] = 41
    t = _later(0.05, device)  # the GIL is released while watching (past 100 µs): this thread runs
    got = words.publish_wait(mem.ctypes.data, 41, mem.ctypes.data + 8, 41, src.ctypes.data,
                             dst.ctypes.data, 32, 5_000_000_000)
    t.join()
    assert head_seen == [41]  # published before the watch began
    published, seen = got
    assert 0.04e9 < seen - published < 5e9
    assert abs(published - time.perf_counter_ns()) < 5e9  # perf_counter_ns's clock
    np.testing.assert_array_equal(dst, answer)


def test_a_watch_gives_up_after_its_time_and_copies_nothing(words):
    mem = np.zeros(2, dtype=np.int64)
    dst = np.full(2, 7, dtype=np.int64)
    t0 = time.perf_counter()
    assert words.publish_wait(mem.ctypes.data, 5, mem.ctypes.data + 8, 5, mem.ctypes.data,
                              dst.ctypes.data, 16, 20_000_000) is None
    assert 0.015 < time.perf_counter() - t0 < 2
    assert mem[0] == 5 and (dst == 7).all()
    assert words.wait_word(mem.ctypes.data + 8, 3, 1_000_000) is False
    mem[1] = 3
    assert words.wait_word(mem.ctypes.data + 8, 3, 1_000_000) is True


def test_run_length_counts_consecutive_numbers_up_to_the_first_gap(words):
    w = np.arange(100, 164, dtype=np.int64)
    assert words.run_length(w.ctypes.data, 100, 64) == 64
    assert words.run_length(w.ctypes.data, 100, 10) == 10
    w[37] = 0
    assert words.run_length(w.ctypes.data, 100, 64) == 37
    assert words.run_length(w.ctypes.data, 99, 64) == 0


def test_a_busy_python_thread_does_not_delay_an_answer_that_comes_quickly(words):
    """The first 100 µs of a watch keep the GIL: an answer already there, or
    coming within a GPU round trip, is taken without waiting for the GIL to
    come back from a thread that keeps it (up to 5 ms each time)."""
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            pass
    t = threading.Thread(target=busy)
    t.start()
    try:
        mem = np.zeros(2, dtype=np.int64)
        took = []
        for i in range(1, 51):
            mem[1] = i  # the answer is there before the watch
            t0 = time.perf_counter_ns()
            assert words.publish_wait(mem.ctypes.data, i, mem.ctypes.data + 8, i, 0, 0, 0,
                                      1_000_000_000) is not None
            took.append(time.perf_counter_ns() - t0)
    finally:
        stop.set()
        t.join()
    assert np.median(took) < 1_000_000  # far below the 5 ms a GIL hand-back can cost


def test_bad_addresses_and_sizes_are_refused_not_followed(words):
    w = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="aligned"):
        words.wait_word(w.ctypes.data + 4, 0, 10)
    with pytest.raises(ValueError, match="null"):
        words.run_length(0, 0, 1)
    with pytest.raises(TypeError):
        words.publish_wait(w.ctypes.data, 1)


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(native_words.SWITCH, "0")
    native_words.module.cache_clear()
    try:
        assert native_words.module() is None
        assert native_words.unavailable_reason() == f"{native_words.SWITCH}=0"
    finally:
        monkeypatch.delenv(native_words.SWITCH)
        native_words.module.cache_clear()
        native_words.module()
