"""The C words module (workbench/backends/native_words.py): a store, a watch
on another word with the GIL released, and the copy of an answer, as a ring's
host side uses them. Another thread plays the device here, writing words while
the C function watches; rings on both backends use it in tests/capabilities/test_rings.py,
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


def _box_caller(words, fields, nbytes=24, *bell):
    """A BoxCaller on plain memory (a 24-byte message, a 12-byte answer), its
    buffers kept alive with it (``bell``: a ring's control words to ring)."""
    box = np.zeros(6, dtype=np.uint64)  # 24 bytes: 6 flagged words
    answer = np.zeros(6, dtype=np.uint64)  # 3 words of answer + 2 of ns (+ a lane's spare)
    single, pools = bytearray(), []

    def make_pool(need):
        pool = np.zeros(max(3, need), dtype=ANSWER)
        pools.append(pool)
        return pool, pool.ctypes.data, len(pool)
    c = words.BoxCaller(box.ctypes.data, nbytes, 6, answer.ctypes.data, 5, 12, fields, make_pool,
                        single, *bell)
    return c, box, answer, single, pools


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
    c, box, answer, single, pools = _box_caller(words, fields)
    reply = np.array([(2.5, -7, 123)], dtype=ANSWER).tobytes()
    answer[:] = _flag(13) | np.uint64(0xDEAD)  # stale words with this call's own flag: cleared first
    t, seen = _answer_when_sent(box, answer, 13, reply, ns=(5 << 32) + 17, gap=5e-3)
    got = c.call((1.5, -2.25, -100, 65535, -2**40), 13, 5_000_000_000)
    t.join()
    assert (got["x"], got["n"], got["k"]) == (2.5, -7, 123)  # every word waited for
    sent = seen[0]
    assert np.frombuffer(sent[:4], "<f4")[0] == 1.5 and np.frombuffer(sent[4:12], "<f8")[0] == -2.25
    assert np.frombuffer(sent[12:13], "<i1")[0] == -100
    assert np.frombuffer(sent[14:16], "<u2")[0] == 65535
    assert np.frombuffer(sent[16:24], "<i8")[0] == -2**40
    figures = np.frombuffer(bytes(single), dtype=np.int64)  # (round trip ns, handler ns)
    assert len(figures) == 2 and figures[1] == (5 << 32) + 17
    assert c.seen_ns - c.sent_ns == figures[0]
    assert not box.any()  # emptied once answered: an old message never looks new


def test_box_caller_leaves_what_it_cannot_pack_to_python_and_gives_up_in_time(words):
    c, box, answer, single, pools = _box_caller(words, ((0, "f"), (4, "d"), (12, "b")))
    for message in ((1.0, 2.0), (1.0, 2.0, 300), (1.0, 2.0, True), (np.float32(1), 2.0, 1),
                    (1e39, 2.0, 1), (1.0, 2.0, 2**70)):
        assert c.call(message, 3, 1_000_000) is NotImplemented
    assert not box.any() and not single  # nothing written
    with pytest.raises(ValueError, match="must have 24 bytes, not 5"):
        c.call(b"short", 3, 1_000_000)
    with pytest.raises(ValueError, match="number is >= 0"):
        c.call(bytes(24), -1, 1_000_000)
    t0 = time.perf_counter()
    assert c.call(bytes(range(24)), 3, 50_000_000) is None  # packed bytes; no answer in 50 ms
    assert 0.04 < time.perf_counter() - t0 < 2
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



REQ = np.dtype([("a", "f4"), ("b", "f4"), ("id", "i4"), ("pad", "i4")])
RESP = np.dtype([("sum", "f4"), ("id", "i4")])


def _slots(words, capacity=8, pool=5, make_pool=None):
    """A ring's queue in plain memory: requests, responses, stamps, answered words, head
    (``make_pool``: the Slots' own, else one that keeps its arrays in q["pools"])."""
    q = {"requests": np.zeros(capacity, REQ), "responses": np.zeros(capacity, RESP),
         "stamps": np.zeros((capacity, 2), np.uint64), "answered": np.zeros(capacity, np.int64),
         "head": np.zeros(2, np.int64), "pools": []}

    def keeping(need):
        array = np.zeros(max(pool, need), RESP)
        q["pools"].append(array)
        return array, array.ctypes.data, len(array)
    slots = words.Slots(q["requests"].ctypes.data, q["responses"].ctypes.data,
                        q["stamps"].ctypes.data, q["answered"].ctypes.data,
                        q["head"].ctypes.data + 8, capacity, REQ.itemsize, RESP.itemsize,
                        make_pool or keeping)
    return slots, q


def _answer(q, seqs):
    """Play the device: answer messages ``seqs`` (sum and id from the request,
    stamps, the sequence word last)."""
    cap = len(q["requests"])
    for seq in seqs:
        slot = seq % cap
        req = q["requests"][slot]
        q["responses"][slot] = (req["a"] + req["b"], req["id"])
        q["stamps"][slot] = (1000 * seq, 1000 * seq + 7)
        q["answered"][slot] = seq


def test_slots_write_a_batch_wrapping_round_the_queue_without_publishing_it(words):
    slots, q = _slots(words)
    batch = np.zeros(5, REQ)
    batch["a"] = rng.random(5)
    batch["id"] = np.arange(5)
    t0 = time.perf_counter_ns()
    sent = slots.write(batch, 6, 3)  # messages 6..10 in slots 6, 7, 0, 1, 2 (3 answered already)
    assert t0 <= sent <= time.perf_counter_ns()
    np.testing.assert_array_equal(q["requests"][[6, 7, 0, 1, 2]], batch)
    assert q["head"][1] == 0  # the ring counts them, then publishes
    # refused, nothing written: no room for them all, or not whole requests in a row
    before = q["requests"].copy()
    assert slots.write(batch, 11, 3) is None  # 8 slots, 8 in flight already
    assert slots.write(np.zeros(5, RESP), 6, 6) is None  # another size
    assert slots.write(np.zeros(10, REQ)[::2], 6, 6) is None  # not contiguous
    assert slots.write(np.zeros((2, 2), REQ), 6, 6) is None  # not one row
    assert slots.write(np.zeros(0, REQ), 6, 6) is None
    assert slots.write(batch, -1, -1) is None  # (numbers are >= 0: never a slot before the queue)
    np.testing.assert_array_equal(q["requests"], before)


def test_slots_take_a_run_of_answers_once_all_are_there(words):
    slots, q = _slots(words)
    batch = np.zeros(6, REQ)
    batch["a"], batch["b"], batch["id"] = rng.random(6), rng.random(6), rng.integers(0, 99, 6)
    slots.write(batch, 5, 5)  # messages 5..10: slots 5, 6, 7, 0, 1, 2
    _answer(q, [10, 9, 7, 6, 5])  # the last ones first; 8 missing
    t0 = time.perf_counter()
    assert slots.take(5, 6, 10, 20_000_000) is None  # not all there: nothing taken
    assert 0.015 < time.perf_counter() - t0 < 5
    assert q["head"][1] == 10  # published on the way: a send cut short is published again
    t = _later(0.05, lambda: _answer(q, [8]))
    answers, stamps, seen = slots.take(5, 6, 10, 5_000_000_000)
    t.join()
    assert abs(seen - time.perf_counter_ns()) < 5e9
    np.testing.assert_allclose(answers["sum"], batch["a"] + batch["b"], rtol=1e-6)
    np.testing.assert_array_equal(answers["id"], batch["id"])
    np.testing.assert_array_equal(np.frombuffer(stamps, np.uint64).reshape(-1, 2)[:, 0],
                                  1000 * np.arange(5, 11))
    # each take gets places of its own: one longer than a pool gets a pool of its own size
    assert [len(p) for p in q["pools"]] == [6] and np.shares_memory(answers, q["pools"][0])
    slots.write(batch[:3], 11, 11)
    _answer(q, [11, 12, 13])
    first, _, _ = slots.take(11, 2, 13, 1_000_000)
    second, _, _ = slots.take(13, 1, 13, 1_000_000)
    assert first["id"].tolist() == batch["id"][:2].tolist() and second["id"][0] == batch["id"][2]
    assert [len(p) for p in q["pools"]] == [6, 5]  # (the first used up: a new one, both in it)
    assert np.shares_memory(first, q["pools"][1]) and np.shares_memory(second, q["pools"][1])
    with pytest.raises(ValueError):
        slots.take(11, 0, 13, 1000)
    with pytest.raises(ValueError):
        slots.take(11, 9, 13, 1000)  # more than the capacity


def test_slots_refuse_a_second_taker_and_a_pool_that_is_not_its_memory(words):
    inner = []

    def make_pool(need):  # another take while this one holds its places: refused
        try:
            slots.take(1, 1, 3, 1000)
        except RuntimeError as exc:
            inner.append(str(exc))
        array = np.zeros(need, RESP)
        return array, array.ctypes.data, need
    slots, q = _slots(words, make_pool=make_pool)
    slots.write(np.zeros(3, REQ), 1, 1)
    _answer(q, [1, 2, 3])
    answers, _, _ = slots.take(1, 3, 3, 1_000_000)
    assert "already waiting" in inner[0] and len(answers) == 3
    for bad in (lambda need: ([0] * need, 0, need),  # not an array at that address
                lambda need: (np.zeros(need, RESP), np.zeros(need, RESP).ctypes.data, need),
                lambda need: (np.zeros(1, RESP), np.zeros(1, RESP).ctypes.data, need + 5)):
        odd, q = _slots(words, make_pool=bad)
        odd.write(np.zeros(3, REQ), 1, 1)
        _answer(q, [1, 2, 3])
        with pytest.raises(ValueError, match="make_pool"):
            odd.take(1, 3, 3, 1_000_000)


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


def _futex_sleeper(address, expected, timeout_s):
    """A thread that sleeps on a futex (FUTEX_WAIT on the 32-bit word at
    ``address`` while it holds ``expected``), as the simulator's ring
    dispatcher does; ``woke`` gets how long it slept."""
    import ctypes
    import platform

    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    number = 202 if platform.machine().lower() in ("x86_64", "amd64") else 240
    woke = []

    def sleep():
        t0 = time.monotonic()
        ts = Timespec(int(timeout_s), 0)
        syscall(ctypes.c_long(number), ctypes.c_void_p(address), ctypes.c_int(0),  # FUTEX_WAIT
                ctypes.c_int(expected), ctypes.byref(ts), None, ctypes.c_int(0))
        woke.append(time.monotonic() - t0)
    t = threading.Thread(target=sleep)
    t.start()
    return t, woke


def test_ring_bell_wakes_a_dispatcher_only_when_it_said_it_sleeps(words):
    control = np.zeros(16, dtype=np.int64)  # a ring's control words: [2] asleep, [3] the bell
    words.ring_bell(control.ctypes.data)
    assert control[2] == control[3] == 0  # awake: nothing to do (no syscall)
    words.ring_bell(None)  # (no bell: a GPU's ring)
    control[2] = 1
    sleeper, woke = _futex_sleeper(control.ctypes.data + 24, 0, 10)
    time.sleep(0.1)  # (asleep by now; were it not, the bell's change makes its wait return)
    words.ring_bell(control.ctypes.data)
    sleeper.join(10)
    assert control[2] == 0 and control[3] == 1  # the flag taken down, the bell counted up
    assert woke and woke[0] < 5  # woken, not timed out
    with pytest.raises(ValueError, match="aligned"):
        words.ring_bell(control.ctypes.data + 4)


def test_a_call_and_a_head_published_ring_the_bell(words):
    control = np.zeros(16, dtype=np.int64)
    mem = np.zeros(2, dtype=np.int64)
    control[2] = 1
    assert words.publish_wait(mem.ctypes.data, 3, mem.ctypes.data + 8, 0, 0, 0, 0, 1000,
                              control.ctypes.data) is not None  # (the word holds 0 already)
    assert mem[0] == 3 and control[2] == 0 and control[3] == 1
    control[2] = 1
    fields = ((0, "f"), (4, "d"), (12, "b"), (14, "H"), (16, "q"))
    c, box, _, _, _ = _box_caller(words, fields, 24, control.ctypes.data)
    assert c.call((1.0, 2.0, 3, 4, 5), 1, 1000) is None  # no device: not answered in 1 µs
    assert control[2] == 0 and control[3] == 2  # but the message's words rang the bell
    assert (box >> np.uint64(32) == _flag(1) >> np.uint64(32)).all()

