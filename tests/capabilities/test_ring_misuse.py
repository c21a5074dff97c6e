"""Rings used wrongly say so, or do exactly what they say: numbers are never
copied into every field of a message, messages too large for a thread are
passed where they live and the queue's memory is stated and bounded, a send
that stops part-way says how much went, a fault leaves the ring's state
exact, and a count that cannot be is refused."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.rings import RingError, RingFull, RingLayoutError

INTS = r"""
struct Request { int a; int pad; };
struct Response { int twice; int pad; };
__device__ void handle(const Request& in, Response& out) { out.twice = 2 * in.a; }
"""
INT_REQUEST = np.dtype([("a", "i4"), ("pad", "i4")])
INT_RESPONSE = np.dtype([("twice", "i4"), ("pad", "i4")])


def test_numbers_are_never_copied_into_every_field_of_a_message(backend):
    with wb.ring(INTS, request=INT_REQUEST, response=INT_RESPONSE, capacity=32,
                 threads=64) as r:
        floats = np.arange(4, dtype=np.float32) + 0.5
        with pytest.raises(RingLayoutError, match=r"float32 array.*every field"):
            r.send(floats)
        with pytest.raises(RingLayoutError, match="a tuple of field values"):
            r.send([1.5, 2.5])
        with pytest.raises(RingLayoutError, match="a tuple of field values"):
            r.send(3)
        with pytest.raises(RingLayoutError, match="a tuple of field values"):
            r.call(1.5)
        with pytest.raises(RingLayoutError, match="int64 array"):
            r.call(np.array([1, 0]))
        assert r.depth == 0 and r.pending == 0  # nothing was sent
        # field values given per message are taken, each into its own field
        r.send([(1, 0), (2, 0), (3, 7)])
        assert r.recv(3)["twice"].tolist() == [2, 4, 6]
        r.send(floats.astype(np.int32).view(INT_REQUEST))  # the bytes on purpose: a view
        assert r.recv(2)["twice"].tolist() == [0, 4]
        assert r.call((5, 0))["twice"] == 10


HUGE = r"""
#define N 131072
struct Request { double v[N]; };                      // 1 MiB
struct Response { double first, last, sum; long long n; };
__device__ void handle(const Request& in, Response& out) {
    double s = 0.0;
    for (int i = 0; i < N; ++i) s += in.v[i];
    out.first = in.v[0];
    out.last = in.v[N - 1];
    out.sum = s;
    out.n = N;
}
"""
HUGE_REQUEST = np.dtype([("v", "f8", (131072,))])
HUGE_RESPONSE = np.dtype([("first", "f8"), ("last", "f8"), ("sum", "f8"), ("n", "i8")])


def test_megabyte_messages_are_read_where_they_are_and_the_queue_is_bounded(backend):
    r = wb.ring(HUGE, request=HUGE_REQUEST, response=HUGE_RESPONSE, threads=64, blocks=1,
                start=False)
    # the default capacity keeps the queue within 256 MiB of page-locked memory, and says so
    assert 32 <= r.capacity < 8192 and r.capacity % 32 == 0
    assert r.queue_bytes <= 256 << 20 and r.queue_bytes >= r.capacity * HUGE_REQUEST.itemsize
    assert "MiB of mapped host memory" in repr(r)
    with r:
        rng = np.random.default_rng(3)
        batch = np.zeros(3, dtype=HUGE_REQUEST)
        batch["v"] = rng.standard_normal((3, 131072))
        r.send(batch)
        got = r.recv(3)
        np.testing.assert_allclose(got["sum"], batch["v"].sum(axis=1), rtol=1e-9, atol=1e-9)
        assert got["first"].tolist() == batch["v"][:, 0].tolist()
        assert got["last"].tolist() == batch["v"][:, -1].tolist() and (got["n"] == 131072).all()
        one = r.call(batch[1])  # too large for the call box: through a slot
        assert one["sum"] == got["sum"][1]
        np.testing.assert_allclose(r.launch_batch(batch[:2])["sum"], got["sum"][:2], rtol=1e-12)
    with pytest.raises(RingError, match=r"8192 slots.*8\.0\d GiB.*at most 1\.00 GiB.*capacity="):
        wb.ring(HUGE, request=HUGE_REQUEST, response=HUGE_RESPONSE, capacity=8192, start=False)


BIG_ANSWER = r"""
#define M 65536
struct Request { int id; int pad; };
struct Response { int id; int pad; float v[M]; };     // 256 KiB: more than a thread's stack
__device__ void handle(const Request& in, Response& out) {
    out.id = in.id;
    for (int i = 0; i < M; ++i) out.v[i] = (float)(in.id + i);
}
"""


def test_answers_too_large_for_a_thread_are_written_in_place(backend):
    request = np.dtype([("id", "i4"), ("pad", "i4")])
    response = np.dtype([("id", "i4"), ("pad", "i4"), ("v", "f4", (65536,))])
    with wb.ring(BIG_ANSWER, request=request, response=response, capacity=32, threads=64,
                 blocks=1) as r:
        r.send(np.array([(3, 0), (4, 0)], dtype=request))
        got = r.recv(2)
        assert got["id"].tolist() == [3, 4]
        np.testing.assert_array_equal(got["v"][1], 4 + np.arange(65536, dtype=np.float32))
        assert got["pad"].tolist() == [0, 0]  # an answer starts zeroed, as a local one does


SLOW = r"""
#ifdef __WBSIM__
__device__ unsigned long long now_ns() { return __globaltimer(); }
#else
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
struct Request { int a; unsigned int spin_us; };
struct Response { int twice; int pad; };
__device__ void handle(const Request& in, Response& out) {
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < 1000ull * in.spin_us) { }
    out.twice = 2 * in.a;
}
"""
SLOW_REQUEST = np.dtype([("a", "i4"), ("spin_us", "u4")])


def test_a_send_that_stops_part_way_says_how_many_went(backend):
    with wb.ring(SLOW, request=SLOW_REQUEST, response=INT_RESPONSE, capacity=32,
                 threads=64) as r:
        batch = np.zeros(100, dtype=SLOW_REQUEST)
        batch["a"] = np.arange(100)
        batch["spin_us"][0] = 1_000_000  # the first answer takes a second: no room comes
        with pytest.raises(RingFull, match=r"32 of the 100 messages were sent \(numbers 1-32\)"
                                           r".*the other 68 were not") as caught:
            r.send(batch, block=False)
        assert caught.value.sent == 32 and caught.value.first == 1
        assert r.depth == 32
        with pytest.raises(RingFull, match=r"none of the 68 messages were sent"):
            r.send(batch[32:], timeout=0.05)
        assert r.recv(32, timeout=30)["twice"].tolist() == [2 * i for i in range(32)]
        assert r.send(batch[32:]) == 33  # the rest, numbered on from there
        assert r.recv(68, timeout=30)["twice"].tolist() == [2 * i for i in range(32, 100)]


def test_counts_that_cannot_be_are_refused(backend):
    with wb.ring(INTS, request=INT_REQUEST, response=INT_RESPONSE, capacity=32,
                 threads=64) as r:
        r.send([(1, 0), (2, 0)])
        for count in (-1, 2.5, "2"):
            with pytest.raises(RingError, match="count must be a whole number"):
                r.recv(count)
        with pytest.raises(RingError, match="asked for 3 answers but only 2"):
            r.recv(3)
        assert r.recv(0).size == 0 and r.recv(2)["twice"].tolist() == [2, 4]


FAULTING = INTS.replace("out.twice = 2 * in.a;",
                        "out.twice = 2 * in.a; if (in.a == 3) *(volatile int*)0 = 1;")


@pytest.mark.parametrize("how", ["send", "call"])
def test_after_a_fault_the_ring_says_what_was_lost_and_that_it_stopped(how):
    # its own process: on a GPU a fault ends the CUDA context for good
    script = f"""
import numpy as np, workbench as wb
from test_ring_misuse import FAULTING, INT_REQUEST, INT_RESPONSE
r = wb.ring(FAULTING, request=INT_REQUEST, response=INT_RESPONSE, capacity=32, threads=64)
try:
    if "{how}" == "send":
        r.send(np.array([(3, 0)], dtype=INT_REQUEST))
        r.recv(timeout=30)
    else:  # (a GPU may report the fault after the handler's answer: then the next call does)
        r.call((3, 0), timeout=30)
        r.call((4, 0), timeout=30)
except wb.KernelFault as exc:
    print("FAULT", exc)
print("STATE", r.running, r.depth, r.pending, r.lost)
print("REPR", repr(r))
for what in ("call", "send"):
    try:
        r.call((5, 0)) if what == "call" else r.send(np.array([(5, 0)], dtype=INT_REQUEST))
    except wb.rings.RingStopped as exc:
        print("STOPPED", what, exc)
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                                       os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)
    text = run.stdout + run.stderr
    fault = text.split("STATE")[0]
    assert "FAULT" in fault and re.search(r"Message \d was sent and never answered", fault), text
    assert "STATE False 0 0 1" in text, text
    assert "faulted" in text.split("REPR")[1].splitlines()[0], text
    for what in ("call", "send"):
        line = next(x for x in text.splitlines() if x.startswith(f"STOPPED {what}"))
        assert "its kernel faulted" in line and "ring.start()" in line
        assert "outstanding answers" not in line
