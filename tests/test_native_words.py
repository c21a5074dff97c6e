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


class _Lone:
    """A lone message's words as ll_call sees them: a 6-byte request, a 5-byte answer."""

    def __init__(self):
        self.src = np.frombuffer(bytes(range(1, 7)), np.uint8).copy()
        self.ll_out = np.zeros(2, np.uint64)  # two LL words for 6 bytes
        self.plain_out = np.zeros(6, np.uint8)
        self.mem = np.zeros(2, np.int64)  # [0] head, [1] the answer's sequence word
        self.ll_back = np.zeros(3, np.uint64)  # two LL words for 5 bytes, then the time
        self.plain_back = np.frombuffer(b"plain", np.uint8).copy()
        self.stamps = np.array([1000, 1750], np.uint64)
        self.dst = np.zeros(5, np.uint8)

    def call(self, words, seq, spin_ns):
        return words.ll_call(self.src.ctypes.data, 6, self.ll_out.ctypes.data,
                             self.plain_out.ctypes.data, self.mem.ctypes.data, seq,
                             self.ll_back.ctypes.data, 5, self.dst.ctypes.data,
                             self.mem.ctypes.data + 8, self.plain_back.ctypes.data,
                             self.stamps.ctypes.data, spin_ns)


def _ll(seq, data: bytes):
    flag = (seq & 0x7FFFFFFF) | 0x80000000  # (the top bit: a cleared word never matches)
    return [(flag << 32) | int.from_bytes(data[i:i + 4].ljust(4, b"\0"), "little")
            for i in range(0, len(data), 4)]


def test_ll_call_writes_ll_words_then_the_message_and_head_and_takes_the_ll_answer(words):
    lone = _Lone()
    stale = _ll(7 + 2**31, b"stale")  # another message's, with the same flag: cleared first
    lone.ll_back[:] = stale + [stale[0] | 1]
    seen = []

    def device():
        seen.append((lone.ll_out.tolist(), lone.plain_out.tobytes(), int(lone.mem[0]),
                     lone.ll_back.tolist()))
        answer = _ll(7, b"answe")
        lone.ll_back[0] = answer[0]
        time.sleep(0.01)
        seen.append(lone.dst.tobytes())  # (checked in the test's own thread)
        lone.ll_back[1:] = [answer[1], (answer[0] & ~0xFFFFFFFF) | 1234]
    t = _later(0.05, device)
    got = lone.call(words, 7, 5_000_000_000)
    t.join()
    assert seen == [(_ll(7, bytes(range(1, 7))), bytes(range(1, 7)), 7, [0, 0, 0]),
                    bytes(5)]  # the last word padded; half an LL answer is no answer
    assert lone.ll_out.tolist() == [0, 0]  # cleared after: no later message takes them
    published, answered, device_ns = got
    assert 0.04e9 < answered - published < 5e9 and device_ns == 1234
    assert lone.dst.tobytes() == b"answe"


def test_ll_call_takes_a_plain_answer_and_gives_up_after_its_time(words):
    lone = _Lone()
    lone.mem[1] = 9  # served the plain way: its bytes and stamps
    got = lone.call(words, 9, 1_000_000)
    assert got[2] == 750 and lone.dst.tobytes() == b"plain"
    lone.dst[:] = 0
    t0 = time.perf_counter()
    assert lone.call(words, 10, 20_000_000) is None
    assert 0.015 < time.perf_counter() - t0 < 2
    assert lone.mem[0] == 10 and lone.dst.tobytes() == bytes(5)  # sent, nothing copied
    with pytest.raises(ValueError, match="aligned"):
        words.ll_call(0x1000, 6, lone.ll_out.ctypes.data + 4, 0x1000, lone.mem.ctypes.data, 1,
                      lone.ll_back.ctypes.data, 5, 0x1000, lone.mem.ctypes.data,
                      0x1000, lone.stamps.ctypes.data, 0)


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
