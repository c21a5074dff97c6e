"""Persistent ring kernels (``wb.ring``) on every backend: messages answered
exactly once and in order, struct layout checks, stop and restart, a faulting
handler, a hanging handler caught by the watchdog, a full queue."""
from __future__ import annotations

import asyncio
import importlib
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import workbench as wb
from workbench.rings import RingFull, RingHang, RingLayoutError, RingStopped, callbox

SOURCE = r"""
#ifdef __WBSIM__
__device__ unsigned long long now_ns() { return __globaltimer(); }
#else
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
struct Request { float a; float b; int id; unsigned int spin_us; };
struct Response { double sum; int id; int twice; };

__device__ void handle(const Request& in, Response& out) {
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < 1000ull * in.spin_us) { }
    out.sum = (double)in.a + in.b;
    out.id = in.id;
    out.twice = 2 * in.id;
}
"""
REQUEST = np.dtype([("a", "f4"), ("b", "f4"), ("id", "i4"), ("spin_us", "u4")])
RESPONSE = np.dtype([("sum", "f8"), ("id", "i4"), ("twice", "i4")])


def messages(n, first_id=0, seed=0):
    rng = np.random.default_rng(seed)
    m = np.zeros(n, dtype=REQUEST)
    m["a"] = rng.standard_normal(n)
    m["b"] = rng.standard_normal(n)
    m["id"] = np.arange(first_id, first_id + n)
    return m


@pytest.fixture(params=["c", "python"])
def host_path(request, monkeypatch):
    """A ring's host side through the C words module (where it builds) or through
    Python (``WORKBENCH_NATIVE_WORDS=0``): the same answers either way."""
    from workbench.backends import native_words
    if request.param == "python":
        monkeypatch.setenv(native_words.SWITCH, "0")
    native_words.module.cache_clear()
    if request.param == "c" and native_words.module() is None:
        pytest.skip(f"no C words module here: {native_words.unavailable_reason()}")
    yield request.param
    monkeypatch.delenv(native_words.SWITCH, raising=False)
    native_words.module.cache_clear()


def check_answers(got, sent):
    assert got.dtype == RESPONSE and len(got) == len(sent)
    np.testing.assert_array_equal(got["id"], sent["id"])  # each once, in order
    np.testing.assert_array_equal(got["twice"], 2 * sent["id"])
    np.testing.assert_allclose(got["sum"], sent["a"].astype(np.float64) + sent["b"], rtol=1e-12)


def test_messages_are_answered_once_and_in_order(backend, host_path):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        sent = [messages(n, first_id=i * 1000, seed=i) for i, n in enumerate((1, 300, 77))]
        for batch in sent:  # 300 > 64 slots: send waits for answers and keeps them
            r.send(batch)
        assert r.pending + r.depth == 378
        check_answers(r.recv(), np.concatenate(sent))
        one = r.call((1.5, 2.25, 42, 0))
        assert (one["id"], one["twice"], one["sum"]) == (42, 84, 3.75)
        stats = r.stats()
        assert stats.messages == 379 and stats.rate > 0
        assert 0 < stats.percentile(50) <= stats.percentile(99)
        assert stats.device_time.size == 379 and (stats.device_time >= 0).all()
        assert "messages answered" in stats._repr_html_()
        assert list(stats.to_pandas()["figure"])[:2] == ["messages", "rate_per_s"]
    assert not r.running


def test_answers_finishing_out_of_order_come_back_in_order_across_the_wrap(backend, host_path):
    # recv() watches the last answer of a batch first; here the first messages of each
    # batch finish last (their handlers spin), and the batches cross the 64-slot queue's
    # end, in sizes that take each way of checking a run (a few words, a sum, NumPy)
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        total, spun = 0, 0
        for i, n in enumerate((3, 20, 40, 7, 64, 33, 5)):
            batch = messages(n, first_id=total, seed=i)
            slow = min(n, 3)
            batch["spin_us"][:slow] = np.arange(slow, 0, -1) * 2000  # 6, 4, 2 ms, then none
            spun += slow
            r.send(batch)
            check_answers(r.recv(n), batch)
            total += n
        assert r.send(messages(300)) == total + 1  # one send larger than the queue
        check_answers(r.recv(), messages(300))
        total += 300
        stats = r.stats()
        assert stats.messages == total == stats.device_time.size
        # each message's own figures, in one order: its round trip holds its handler's time
        assert (stats.host_latency >= stats.device_time - 1e-6).all()
        assert (np.sort(stats.device_time)[-spun:] >= 1.9e-3).all()


def test_receives_of_any_size_cross_sends_and_keep_every_figure(backend, host_path, monkeypatch):
    # recv(n) need not match the sends: a run of answers taken in C (or in Python) may end
    # inside one send's messages, start inside another's and cross the queue's end; each
    # message counted once
    queues = importlib.import_module("workbench.rings.queues")  # (recv() reads its spin there)
    monkeypatch.setattr(queues, "SPIN_ROUND_NS", 5_000_000_000)  # (C: every take waits)
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        taken = []
        if host_path == "c":  # count the runs the C path took
            slots = r._slots

            class Counting:
                write = slots.write

                def take(self, *args):
                    got = slots.take(*args)
                    taken.append(got is not None)
                    return got
            r._slots = Counting()
        sent = [messages(n, first_id=100 * i, seed=i) for i, n in enumerate((5, 9, 2, 30, 40))]
        for batch in sent[:4]:
            r.send(batch)
        got = [r.recv(k) for k in (3, 7, 1, 5, 30)]
        r.send(sent[4])  # messages 47-86: slots 47-63, then 0-22
        got += [r.recv(25), r.recv(15)]
        check_answers(np.concatenate(got), np.concatenate(sent))
        assert taken == ([True] * 7 if host_path == "c" else [])
        assert r.depth == r.pending == 0
        stats = r.stats()
        assert stats.messages == 86 == stats.host_latency.size == stats.device_time.size
        assert (stats.host_latency > 0).all()
        got[0]["id"] = -1  # each answer array the caller's own: the next ones keep theirs
        assert got[1]["id"][0] == sent[0]["id"][3]


def test_a_timed_out_recv_keeps_what_arrived(backend, host_path):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        sent = messages(33)
        sent["spin_us"][32] = 1_000_000  # the last one (a warp of its own on a GPU) takes 1 s
        r.send(sent)
        with pytest.raises(TimeoutError, match="unanswered after 0.3 s"):
            r.recv(33, timeout=0.3)
        assert r.pending + r.depth == 33 and r.depth >= 1
        check_answers(r.recv(33, timeout=30), sent)
        assert r.stats().messages == 33


def test_a_call_keeps_to_its_timeout_and_takes_any_timeout(backend, host_path):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        # an infinite (or NaN-free huge) timeout is no timeout: the answer comes
        assert r.call((1.0, 2.0, 1, 0), timeout=math.inf)["id"] == 1
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError):
            r.call((1.0, 2.0, 2, 600_000), timeout=0.2)  # its handler takes 0.6 s
        waited = time.perf_counter() - t0
        assert 0.2 <= waited < 0.45  # the timeout once, not the C spin and then the timeout again
        assert r.recv(1, timeout=30)["id"][0] == 2  # the late answer is kept, in order
        assert r.call((1.0, 2.0, 3, 0))["id"] == 3


def test_call_takes_a_tuple_a_record_or_refuses_clearly(backend, host_path):
    padded = """
    struct Request { char tag; double x; short n; };
    struct Response { double y; int id; int pad; };
    __device__ void handle(const Request& in, Response& out) {
        out.y = in.x * in.n + in.tag;
        out.id = in.tag;
    }
    """
    request = np.dtype([("tag", "i1"), ("x", "f8"), ("n", "i2")], align=True)  # C's padding
    response = np.dtype([("y", "f8"), ("id", "i4"), ("pad", "i4")])
    with wb.ring(padded, request=request, response=response, capacity=32, threads=64) as r:
        for tag, x, n in ((3, 0.1, -7), (-5, 1e300, 2)):  # a tuple: packed into the slot
            got = r.call((tag, x, n))
            assert got["id"] == tag and got["y"] == np.float64(x) * n + tag
        record = np.array([(9, 2.5, 4)], dtype=request)[0]  # a record: NumPy converts it
        assert r.call(record)["y"] == 19.0
        with pytest.raises(RingLayoutError, match="cannot make a message"):
            r.call((1, 2.0))  # a field short
        with pytest.raises(RingLayoutError, match="cannot make a message"):
            r.call((300, 2.0, 1))  # 300 does not fit a char
        assert r.call((1, 0.5, 2))["y"] == 2.0  # and the ring still answers
        answers = [r.call((1, float(i), 1)) for i in range(300)]  # each answer its own record
        answers[0]["y"] = -1.0
        assert [a["y"] for a in answers[1:]] == [i + 1.0 for i in range(1, 300)]


COUNTING = r"""
struct Request { float a; float b; int id; unsigned int spin_us; };
struct Response { double sum; int id; int handled; };
__device__ int handled_so_far;
__device__ void handle(const Request& in, Response& out) {
    out.sum = (double)in.a + in.b;
    out.id = in.id;
    out.handled = atomicAdd(&handled_so_far, 1) + 1;  // messages handled so far, this one too
}
"""
COUNTED = np.dtype([("sum", "f8"), ("id", "i4"), ("handled", "i4")])


def _checked_call(r, rng, id_: int) -> int:
    """One call of a COUNTING ring, its answer checked; the device's count of
    handlers run, as the answer carries it."""
    a = float(rng.standard_normal())
    got = r.call((a, 0.5, id_, 0))
    assert got["id"] == id_ and got["sum"] == np.float32(a) + np.float64(0.5)
    return int(got["handled"])


def _checked_batch(r, n: int, first_id: int, seed: int) -> None:
    """A batch of ``n`` sent and received, its answers checked."""
    batch = messages(n, first_id=first_id, seed=seed)
    r.send(batch)
    got = r.recv(n)
    np.testing.assert_array_equal(got["id"], batch["id"])
    np.testing.assert_allclose(got["sum"], batch["a"].astype(np.float64) + batch["b"], rtol=1e-12)


def test_calls_and_batches_interleave_each_answered_once_and_in_order(backend, host_path):
    # a call() goes through the call box and the dispatcher answers it; the message's own
    # thread must pass it over once a later batch's head covers it (the device counts the
    # handlers it runs). A queue of 32 slots reuses every slot, and on the simulator
    # every thread, many times over.
    with wb.ring(COUNTING, request=REQUEST, response=COUNTED, capacity=32, threads=64) as r:
        rng = np.random.default_rng(5)
        ids, first = 0, None
        for step in range(80):
            if step % 3 == 0 or rng.random() < 0.4:
                handled = _checked_call(r, rng, ids)
                first = handled if first is None else first
                ids += 1
            else:
                n = int(rng.integers(1, 40))  # up to 39: more than the queue holds
                _checked_batch(r, n, ids, seed=step)
                ids += n
        time.sleep(0.1)  # time for a thread that wrongly answers a call's message again
        last = r.call((0.0, 0.0, ids, 0))
        assert last["handled"] - first == ids  # every message handled once: none twice
        assert r.depth == 0 and r.pending == 0 and r.stats().messages == ids + 1
    # a call's figures: its handler's own time comes back with its answer
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as r:
        assert r.call((1.0, 2.0, 7, 3000))["id"] == 7  # the handler spins 3 ms
        stats = r.stats()
        assert stats.messages == 1 and 2.9e-3 <= stats.device_time[0] <= stats.host_latency[0]


@pytest.mark.parametrize("settle_ns", [None, 10**9])
def test_a_run_of_calls_longer_than_the_dispatcher_owes_then_batches(backend, host_path,
                                                                     settle_ns, monkeypatch):
    # the dispatcher writes the slots of calls it answered later, 16 at most owed: 50 calls in
    # a row, then batches over the same 32 slots; each message's thread must pass over every
    # call, and no answer of a call may be lost or land in a batch's place. With a second's wait
    # before it settles when idle (a simulated call takes longer than the usual 5 µs), the slots
    # are written only as the 16th call is answered, as a batch's head comes, and at the stop
    if settle_ns is not None:
        monkeypatch.setattr(callbox, "SETTLE_NS", settle_ns)
    with wb.ring(COUNTING, request=REQUEST, response=COUNTED, capacity=32, threads=64) as r:
        rng = np.random.default_rng(11)
        first = None
        for i in range(50):
            handled = _checked_call(r, rng, i)
            first = handled if first is None else first
        ids = 50
        for n in (7, 40, 3):
            _checked_batch(r, n, ids, seed=n)
            ids += n
        time.sleep(0.1)  # time for a thread that wrongly answers a call's message again
        last = r.call((0.0, 0.0, ids, 0))
        assert last["handled"] - first == ids  # every message handled once: none twice
        assert r.stats().messages == ids + 1
    assert r.state == "stopped" and r.lost == 0


def test_a_send_after_a_call_that_timed_out_waits_for_the_call_to_be_answered(backend, host_path):
    # a call's message that the dispatcher has not taken yet must not be overtaken by a later
    # send's head (its own thread would pass it over): the send waits for it, and recv()
    # returns both answers in order
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as r:
        # at once: the kernel has barely started (a simulator's worker takes a while)
        with pytest.raises(TimeoutError):
            r.call((1.0, 2.0, 1, 200_000), timeout=1e-6)  # its handler takes 0.2 s
        later = messages(3, first_id=2)
        if host_path == "c":  # a send that may not wait says so, and sends nothing
            with pytest.raises(RingFull, match="call\\(\\) of message 1 is still being answered"):
                r.send(later, block=False)
            with pytest.raises(RingFull, match="still being answered"):
                r.send(later, timeout=0.01)
            assert r.depth == 1
        t0 = time.perf_counter()
        r.send(later)
        if host_path == "c":  # through the box: it waited for the call's slow handler
            assert time.perf_counter() - t0 > 0.1
        got = r.recv(4, timeout=30)
        assert list(got["id"]) == [1, 2, 3, 4] and got["sum"][0] == 3.0
        check_answers(got[1:], later)
        assert r.call((2.0, 2.0, 9, 0))["sum"] == 4.0


def test_call_takes_any_message_numpy_can_make_a_record_of(backend, host_path):
    import collections
    Message = collections.namedtuple("Message", "a b id spin_us")
    other = np.dtype([("p", "f4"), ("q", "f4"), ("r", "i4"), ("s", "u4")])  # same size, other names
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as r:
        assert r.call(Message(1.0, 2.0, 3, 0))["sum"] == 3.0
        assert r.call(np.array([(2.0, 0.5, 4, 0)], dtype=other)[0])["id"] == 4  # by position
        assert r.call(np.array([(0.25, 0.5, 5, 0)], dtype=REQUEST)[0])["sum"] == 0.75
        with pytest.raises(RingLayoutError, match="cannot make a message"):
            r.call("not a message")
        with pytest.raises(RingLayoutError, match="cannot make a message"):
            r.call((1e39, 2.0, 1, 0))  # too large for a float (struct: OverflowError)
        with pytest.raises(RingLayoutError, match="cannot make a message"):
            r.call(Message(1.0, 2.0, 2**40, 0))  # too large for an int (NumPy: OverflowError)
        assert r.call((1.0, 1.0, 6, 0))["id"] == 6


def test_a_ring_needs_whole_warps_per_block(backend):
    with pytest.raises(wb.WorkbenchError, match="threads=48 is not a multiple of 32"):
        wb.ring(SOURCE, request=REQUEST, response=RESPONSE, threads=48, start=False)


BIG = r"""
struct Request { double v[LEN]; };
struct Response { double v[RLEN]; };
__device__ void handle(const Request& in, Response& out) {
    for (int i = 0; i < RLEN; ++i) out.v[i] = 2.0 * in.v[i % LEN] + i;
}
"""


@pytest.mark.parametrize("length, response_length",
                         [(25, 25), (31, 30), (3, 31), (32, 4), (60, 4), (3, 40)])
def test_calls_of_any_size_carry_every_byte(backend, host_path, length, response_length):
    # 200 bytes each way: a call box read by 25 lanes (and a 26th reading the head), answered by
    # 26; 248 and 240 bytes: all 32 lanes, and 31; a 248-byte answer: written by all 32 lanes;
    # 256- and 480-byte messages: too large for the box, so a slot; a 320-byte answer: too large
    # for the lanes, a slot too
    source = BIG.replace("RLEN", str(response_length)).replace("LEN", str(length))
    request = np.dtype([("v", "f8", (length,))])
    response = np.dtype([("v", "f8", (response_length,))])
    rng = np.random.default_rng(length)
    with wb.ring(source, request=request, response=response, capacity=32, threads=64) as r:
        boxed = length <= 31 and response_length <= 31
        assert (r._caller is not None) == (boxed and host_path == "c")  # the path named above
        for _ in range(20):
            v = rng.standard_normal(length)
            got = r.call(np.array([(v,)], dtype=request)[0])
            i = np.arange(response_length)
            np.testing.assert_array_equal(got["v"], 2.0 * v[i % length] + i)  # exact: one op each
        batch = np.zeros(5, dtype=request)
        batch["v"] = rng.standard_normal((5, length))
        r.send(batch)
        got = r.recv(5)
        np.testing.assert_array_equal(got["v"], 2.0 * batch["v"][:, i % length] + i)


def test_async_call_and_the_batch_launch_agree(backend):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as r:
        answer = asyncio.run(r.acall((1.0, 2.0, 7, 0), timeout=30))
        assert answer["sum"] == 3.0 and answer["id"] == 7
        sent = messages(50, seed=3)
        check_answers(r.launch_batch(sent), sent)


def test_struct_layout_is_checked_by_the_compiler(backend):
    unpadded = np.dtype([("sum", "f8"), ("id", "i4")])  # the struct has 16 bytes: twice too
    with pytest.raises(RingLayoutError, match=r"sizeof\(Response\): C says 16, the dtype 12"):
        wb.ring(SOURCE, request=REQUEST, response=unpadded)
    reordered = np.dtype([("id", "i4"), ("twice", "i4"), ("sum", "f8")])
    with pytest.raises(RingLayoutError, match=r"offset of Response::sum: C says 0, the dtype 8"):
        wb.ring(SOURCE, request=REQUEST, response=reordered)
    renamed = np.dtype([("total", "f8"), ("id", "i4"), ("twice", "i4")])
    with pytest.raises(RingLayoutError, match="name each field as its struct member"):
        wb.ring(SOURCE, request=REQUEST, response=renamed)
    with pytest.raises(RingLayoutError, match="structured NumPy dtype"):
        wb.ring(SOURCE, request=np.float32, response=RESPONSE)


def test_stop_and_restart(backend):
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
    sent = messages(10)
    r.send(sent)
    r.stop()  # drains first: the answers stay
    assert not r.running and r.depth == 0
    check_answers(r.recv(), sent)
    with pytest.raises(RingStopped, match="ring.start()"):
        r.send(sent)
    r.start()
    assert r.send(sent) == 1  # sequence numbers start again
    check_answers(r.recv(10), sent)
    r.stop()
    r.stop()  # twice is fine


def test_a_host_without_x86_memory_order_is_refused_with_the_reason(backend, monkeypatch):
    import platform
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64, start=False)
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    with pytest.raises(wb.WorkbenchError, match="memory order.*aarch64.*launch_batch"):
        r.start()
    assert not r.running
    monkeypatch.undo()
    with r:  # the same ring starts where the order holds
        sent = messages(4)
        r.send(sent)
        check_answers(r.recv(4), sent)


def test_a_full_queue_raises_or_waits_as_asked(backend):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as r:
        slow = messages(32)
        slow["spin_us"][0] = 1_500_000  # the first answer takes 1.5 s; the rest are quick
        r.send(slow)
        with pytest.raises(RingFull, match="all 32 slots"):
            r.send(messages(1), block=False)
        with pytest.raises(RingFull, match="stayed full for 0.2 s"):
            r.send(messages(1), timeout=0.2)
        r.send(messages(1, first_id=99))  # waits for room
        got = r.recv()
        assert list(got["id"]) == list(range(32)) + [99]


def test_a_hanging_handler_is_caught_by_the_watchdog(backend):
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64,
                watchdog_s=0.5)
    stuck = messages(3)
    # message 1 (block 0, thread 32: the first warp dispatches) runs for 3 s; on a GPU its
    # warp-mates (messages 2 and 3) wait for it too, as threads of one warp do
    stuck["spin_us"][0] = 3_000_000
    r.send(stuck)
    launch = r._launch
    start = time.monotonic()
    with pytest.raises(RingHang, match=r"Message 1 belongs to block 0, thread 32"):
        r.recv(timeout=20)
    assert time.monotonic() - start < 10
    assert not r.running
    if not wb.backend().simulated:
        # the stuck kernel runs on until its handler returns; meanwhile loading a module
        # could deadlock the driver, so the workbench refuses and says why
        with pytest.raises(wb.DeviceBusy, match=r"Stop the ring first"):
            wb.compile('extern "C" __global__ void later(float* x) { x[0] = 1; }')
        assert launch.wait(20)
    # the workbench goes on: a new ring and ordinary kernels work
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as again:
        again.send(messages(5))
        check_answers(again.recv(5), messages(5))
    np.testing.assert_array_equal(wb.to_host(wb.kernels.relu(wb.to_device(np.array([-1.0, 2.0])))),
                                  [0.0, 2.0])


def test_a_hanging_call_is_caught_and_names_its_thread(backend, host_path):
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64,
                watchdog_s=0.5)
    launch = r._launch
    # with the C words module a call goes through the call box and the dispatcher (thread 0
    # of block 0) answers it; through Python, a slot, answered by its thread (32)
    thread = 0 if host_path == "c" else 32
    with pytest.raises(RingHang, match=rf"Message 1 belongs to block 0, thread {thread}:"):
        r.call((1.0, 2.0, 1, 3_000_000), timeout=20)
    assert not r.running
    if not wb.backend().simulated:
        assert launch.wait(20)
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as again:
        assert again.call((1.0, 2.0, 2, 0))["id"] == 2


FAULTING = SOURCE.replace("out.twice = 2 * in.id;",
                          "out.twice = 2 * in.id; if (in.id == 3) *(volatile int*)0 = 1;")


@pytest.mark.parametrize("how, thread", [("send", 35), ("call", 0)])
def test_a_faulting_handler_raises_kernel_fault(how, thread):
    # its own process: on a GPU a fault ends the CUDA context for good. A sent message
    # (id 3: the fourth) faults in its own thread; a call()'s in the dispatcher's.
    script = f"""
import numpy as np, workbench as wb
from test_rings import FAULTING, REQUEST, RESPONSE, messages
r = wb.ring(FAULTING, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
print("BOX", r._caller is not None)  # (with WORKBENCH_NATIVE_WORDS=0 a call takes a slot)
try:
    if "{how}" == "send":
        r.send(messages(5))
        r.recv(timeout=30)
    else:  # (a GPU may report the fault after the handler's answer: then the next call does)
        r.call((1.0, 2.0, 3, 0), timeout=30)
        r.call((1.0, 2.0, 4, 0), timeout=30)
except wb.KernelFault as exc:
    print("FAULT", exc)
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                                       os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)
    assert "FAULT" in run.stdout, run.stdout + run.stderr
    text = run.stdout
    if wb.backend().simulated:
        if how == "call" and "BOX False" in text:  # the call through its slot: its own thread
            thread = 32
        assert "block (0, 0, 0)" in text and f"thread ({thread}, 0, 0)" in text, text
    else:
        assert "restart the notebook kernel" in text


@pytest.mark.gpu
def test_the_gpu_is_idle_after_stop():
    pynvml = pytest.importorskip("pynvml")
    if wb.backend().simulated:
        pytest.skip("needs a GPU")
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE) as r:
        r.send(messages(10000))
        r.recv()
    time.sleep(1.5)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(wb.backend().current_device())
    assert pynvml.nvmlDeviceGetUtilizationRates(handle).gpu < 20
    wb.synchronize()  # nothing persistent left: a device-wide synchronise returns


def test_a_deleted_ring_is_stopped_by_its_finalizer(backend):
    import gc
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
    launch = r._launch
    assert not launch.done()
    del r
    gc.collect()
    deadline = time.monotonic() + 10
    while not launch.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert launch.done()


def test_ctrl_c_while_waiting_stops_the_ring(backend, host_path):
    import signal
    import threading
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
    slow = messages(2)
    slow["spin_us"][0] = 1_500_000
    r.send(slow)
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        r.recv(timeout=20)
    assert not r.running
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64) as again:
        assert again.call((1.0, 1.0, 5, 0))["id"] == 5


def test_ctrl_c_in_call_stops_the_ring(backend, host_path):
    import signal
    import threading
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        r.call((1.0, 1.0, 5, 1_500_000), timeout=20)  # its handler takes 1.5 s
    assert not r.running
    r.start()  # and starts again, the message given up forgotten
    assert r.call((2.0, 1.0, 6, 0))["sum"] == 3.0
    assert r.stats().messages == 1
    r.stop()


def test_the_ring_panel_shows_depth_and_rate(backend):
    with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=64, threads=64) as r:
        panel = wb.RingPanel(r, interval=0.05)
        r.send(messages(40))
        r.recv()
        panel.refresh()
        assert panel.depth == 0 and panel.refreshes >= 2
        html = panel.snapshot()
        assert "messages answered" in html and "40" in html and "running" in html
        assert repr(panel).startswith("<ring handle")
    panel.refresh()
    assert "stopped" in panel.snapshot()
    r.start()  # the panel follows the ring through stop and start
    time.sleep(0.3)
    assert "running" in panel.snapshot()
    r.stop()
    panel.close()


def test_a_ring_panel_does_not_keep_a_deleted_ring_running(backend):
    import gc
    r = wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=32, threads=64)
    panel = wb.RingPanel(r, interval=0.05)
    launch = r._launch
    del r
    gc.collect()
    assert launch.wait(10)
    time.sleep(0.2)
    panel.refresh()
    assert "gone" in panel.snapshot()
    panel.close()
