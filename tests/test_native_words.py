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


ANSWER = np.dtype([("x", "<f4"), ("n", "<i4"), ("k", "<u4")])


def _flag(seq):
    return np.uint64((seq & 0xFFFFFFFF) | 0x80000000) << np.uint64(32)


def _box_caller(words, fields, nbytes=24, capacity=8):
    """A BoxCaller on plain memory (a 24-byte message, a 12-byte answer), its
    buffers kept alive with it."""
    marks = np.zeros(capacity, dtype=np.int64)
    box = np.zeros(6, dtype=np.uint64)  # 24 bytes: 6 flagged words
    answer = np.zeros(6, dtype=np.uint64)  # 3 words of answer + 2 of ns (+ a lane's spare)
    single, pools = [], []

    def make_pool():
        pool = np.zeros(3, dtype=ANSWER)
        pools.append(pool)
        return pool, pool.ctypes.data, len(pool)
    c = words.BoxCaller(marks.ctypes.data, capacity, box.ctypes.data, nbytes, 6,
                        answer.ctypes.data, 5, 12, fields, make_pool, single)
    return c, marks, box, answer, single, pools


def _answer_when_sent(box, answer, seq, reply, ns, delay=0.02, gap=1e-3):
    """Play the device: once the box holds ``seq`` (every word's flag), check
    and keep what it holds, then write the answer's flagged words, the last
    first, ``gap`` s apart (the caller must wait for every flag)."""
    seen = []

    def device():
        deadline = time.monotonic() + 5
        while not (box >> np.uint64(32) == _flag(seq) >> np.uint64(32)).all():
            if time.monotonic() > deadline:
                return
            time.sleep(1e-4)
        seen.append((box & np.uint64(0xFFFFFFFF)).astype(np.uint32).tobytes())
        values = list(np.frombuffer(reply, dtype=np.uint32)) + [ns & 0xFFFFFFFF, ns >> 32]
        for k in reversed(range(len(values))):
            answer[k] = _flag(seq) | np.uint64(values[k])
            time.sleep(gap)
    return _later(delay, device), seen


def test_box_caller_packs_writes_watches_and_answers_a_record(words):
    fields = ((0, "f"), (4, "d"), (12, "b"), (14, "H"), (16, "q"))
    c, marks, box, answer, single, pools = _box_caller(words, fields)
    reply = np.array([(2.5, -7, 123)], dtype=ANSWER).tobytes()
    answer[:] = _flag(13) | np.uint64(0xDEAD)  # stale words with this call's own flag: cleared first
    t, seen = _answer_when_sent(box, answer, 13, reply, ns=(5 << 32) + 17, gap=5e-3)
    got = c.call((1.5, -2.25, -100, 65535, -2**40), 13, 5_000_000_000)
    t.join()
    assert (got["x"], got["n"], got["k"]) == (2.5, -7, 123)  # every word waited for
    assert marks[13 % 8] == 13  # the slot's mark
    sent = seen[0]
    assert np.frombuffer(sent[:4], "<f4")[0] == 1.5 and np.frombuffer(sent[4:12], "<f8")[0] == -2.25
    assert np.frombuffer(sent[12:13], "<i1")[0] == -100
    assert np.frombuffer(sent[14:16], "<u2")[0] == 65535
    assert np.frombuffer(sent[16:24], "<i8")[0] == -2**40
    assert len(single) == 1 and single[0][1] == (5 << 32) + 17  # (round trip ns, handler ns)
    assert c.seen_ns - c.sent_ns == single[0][0]
    assert not box.any()  # emptied once answered: an old message never looks new


def test_box_caller_leaves_what_it_cannot_pack_to_python_and_gives_up_in_time(words):
    c, marks, box, answer, single, pools = _box_caller(words, ((0, "f"), (4, "d"), (12, "b")))
    for message in ((1.0, 2.0), (1.0, 2.0, 300), (1.0, 2.0, True), (np.float32(1), 2.0, 1),
                    (1e39, 2.0, 1), (1.0, 2.0, 2**70)):
        assert c.call(message, 3, 1_000_000) is NotImplemented
    assert marks[3] == 0 and not box.any() and not single  # nothing written
    with pytest.raises(ValueError, match="must have 24 bytes, not 5"):
        c.call(b"short", 3, 1_000_000)
    with pytest.raises(ValueError, match="number is >= 0"):
        c.call(bytes(24), -1, 1_000_000)
    t0 = time.perf_counter()
    assert c.call(bytes(range(24)), 3, 50_000_000) is None  # packed bytes; no answer in 50 ms
    assert 0.04 < time.perf_counter() - t0 < 2 and marks[3] == 3
    assert (box >> np.uint64(32) == _flag(3) >> np.uint64(32)).all()  # kept for the device
    c.clear()
    assert not box.any()
    # the pool rolls over: three answers each, each record a place of its own
    records = []
    for seq in range(4, 11):
        reply = np.array([(float(seq), seq, seq)], dtype=ANSWER).tobytes()
        t, _ = _answer_when_sent(box, answer, seq, reply, ns=1, delay=0, gap=0)
        records.append(c.call((1.0, 2.0, 1), seq, 5_000_000_000))
        t.join()
    assert [int(r["n"]) for r in records] == list(range(4, 11)) and len(pools) == 3


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
