"""Cooperative rings (``wb.ring(..., cooperative=True)``) and batch handlers
(``batch=True``) on every backend: a handler that syncs the grid gives the
answers only a whole-grid computation can, a batch handler sees each round's
messages (a round never crosses the queue's end), and a cooperative launch
that cannot be made is refused with the reason."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.rings import RingError

GRID_SUM = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
struct Request { int n; int id; };
struct Response { long long total; int id; int threads; };
__device__ long long contribution[4096];

// Every thread of the grid contributes n * (its rank + 1); after the grid sync, thread 0 adds
// them all up: n * T (T + 1) / 2 for T threads, which no thread can know without the others.
__device__ void handle(const Request& in, Response& out) {
    cg::grid_group grid = cg::this_grid();
    const unsigned long long rank = grid.thread_rank();
    contribution[rank] = (long long)in.n * (long long)(rank + 1);
    grid.sync();
    if (rank == 0) {
        long long sum = 0;
        for (unsigned long long i = 0; i < grid.size(); ++i) sum += contribution[i];
        out.total = sum;
        out.threads = (int)grid.size();
    }
    out.id = in.id;
}
"""
SUM_REQUEST = np.dtype([("n", "i4"), ("id", "i4")])
SUM_RESPONSE = np.dtype([("total", "i8"), ("id", "i4"), ("threads", "i4")])


def expected_total(n, threads):
    return np.asarray(n, dtype=np.int64) * threads * (threads + 1) // 2


def test_a_cooperative_handler_that_syncs_the_grid_gives_the_grid_wide_answer(backend):
    with wb.ring(GRID_SUM, request=SUM_REQUEST, response=SUM_RESPONSE, cooperative=True,
                 capacity=64, blocks=2, threads=64) as r:
        assert r.cooperative and not r.batch and (r.blocks, r.threads) == (2, 64)
        assert "cooperative" in repr(r)
        threads = 128
        rng = np.random.default_rng(11)
        batch = np.zeros(50, dtype=SUM_REQUEST)
        batch["n"] = rng.integers(-1000, 1000, 50)
        batch["id"] = np.arange(50)
        r.send(batch)
        r.send(batch[:30])  # 80 messages: the second send crosses the 64-slot queue's end
        got = r.recv()
        sent = np.concatenate([batch, batch[:30]])
        np.testing.assert_array_equal(got["id"], sent["id"])
        np.testing.assert_array_equal(got["threads"], threads)
        np.testing.assert_array_equal(got["total"], expected_total(sent["n"], threads))
        one = r.call((7, 99))
        assert (one["id"], one["total"]) == (99, expected_total(7, threads))
        np.testing.assert_array_equal(r.launch_batch(batch[:5])["total"],
                                      expected_total(batch["n"][:5], threads))
        stats = r.stats()
        assert stats.messages == 81 and (stats.device_time >= 0).all()
    assert not r.running


ROUND_SUM = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
struct Request { int x; int id; };
struct Response { int x; int total; int count; int id; };
__device__ int partial[4096];

// The round's messages in[0..count): every thread adds up its share (phase 1); after a grid
// sync every thread reads every partial sum and answers its share with the round's total
// (phase 2); the last sync frees `partial` for the next round.
__device__ void handle_batch(const Request* in, Response* out, int count) {
    cg::grid_group grid = cg::this_grid();
    const long long rank = grid.thread_rank(), size = grid.size();
    int mine = 0;
    for (long long i = rank; i < count; i += size) mine += in[i].x;
    partial[rank] = mine;
    grid.sync();
    int total = 0;
    for (long long j = 0; j < size; ++j) total += partial[j];
    for (long long i = rank; i < count; i += size) {
        out[i].x = in[i].x;
        out[i].total = total;
        out[i].count = count;
        out[i].id = in[i].id;
    }
    grid.sync();
}
"""
ROUND_REQUEST = np.dtype([("x", "i4"), ("id", "i4")])
ROUND_RESPONSE = np.dtype([("x", "i4"), ("total", "i4"), ("count", "i4"), ("id", "i4")])


def test_a_batch_handler_sees_each_round_and_a_round_never_wraps(backend):
    with wb.ring(ROUND_SUM, request=ROUND_REQUEST, response=ROUND_RESPONSE, batch=True,
                 capacity=64, blocks=2, threads=32) as r:
        assert r.batch and r.cooperative and r.name == "handle_batch"  # the batch default name
        rng = np.random.default_rng(5)
        first = np.zeros(40, dtype=ROUND_REQUEST)
        first["x"], first["id"] = rng.integers(-50, 50, 40), np.arange(40)
        r.send(first)  # one send, published at once: one round (slots 1-40)
        got = r.recv(40)
        np.testing.assert_array_equal(got["id"], first["id"])
        np.testing.assert_array_equal(got["x"], first["x"])
        assert (got["count"] == 40).all() and (got["total"] == first["x"].sum()).all()
        second = np.zeros(40, dtype=ROUND_REQUEST)
        second["x"], second["id"] = rng.integers(-50, 50, 40), 100 + np.arange(40)
        r.send(second)  # messages 41-80: slots 41-63, then 0-16: two rounds, 23 and 17
        got = r.recv(40)
        np.testing.assert_array_equal(got["id"], second["id"])
        assert (got["count"][:23] == 23).all() and (got["count"][23:] == 17).all()
        assert (got["total"][:23] == second["x"][:23].sum()).all()
        assert (got["total"][23:] == second["x"][23:].sum()).all()
        one = r.call((5, 7))  # a round of one
        assert (one["total"], one["count"], one["id"]) == (5, 1, 7)
        once = r.launch_batch(second)  # the same handler phase, one cooperative launch
        assert (once["count"] == 40).all() and (once["total"] == second["x"].sum()).all()
        stats = r.stats()  # a batch's messages carry the batch's handler time
        assert stats.messages == 81 and (stats.device_time > 0).all()


def test_cooperative_launches_that_cannot_be_made_are_refused_with_the_reason(backend,
                                                                              monkeypatch):
    with pytest.raises(RingError, match="batch handler runs in grid-wide rounds.*cooperative"):
        wb.ring(ROUND_SUM, request=ROUND_REQUEST, response=ROUND_RESPONSE, batch=True,
                cooperative=False, start=False)
    with pytest.raises(RingError, match=r"cooperative launch runs every block at once.*at most "
                                        r"\d+ blocks of 64 threads.*blocks="):
        wb.ring(GRID_SUM, request=SUM_REQUEST, response=SUM_RESPONSE, cooperative=True,
                blocks=100_000, threads=64, start=False)
    big = np.dtype([("v", "f8", (300,))])  # 2400 bytes: more than a thread holds
    source = GRID_SUM.replace("struct Response { long long total; int id; int threads; };",
                              "struct Response { double v[300]; };").replace(
        "out.total = sum;\n        out.threads = (int)grid.size();", "out.v[0] = sum;").replace(
        "    out.id = in.id;\n", "")
    with pytest.raises(RingError, match="every thread of the grid.*batch handler"):
        wb.ring(source, request=SUM_REQUEST, response=big, cooperative=True, start=False)
    b = wb.backend()
    monkeypatch.setattr(type(b), "device_attribute",
                        lambda self, name, index=None: 0 if "Cooperative" in name else None)
    with pytest.raises(RingError, match="cannot launch kernels cooperatively"):
        wb.ring(GRID_SUM, request=SUM_REQUEST, response=SUM_RESPONSE, cooperative=True,
                start=False)


def test_the_simulator_says_how_many_cooperative_blocks_it_can_run(simulator):
    with pytest.raises(RingError, match=r"simulator runs at most 16 blocks of 1024 threads"):
        wb.ring(GRID_SUM, request=SUM_REQUEST, response=SUM_RESPONSE, cooperative=True,
                blocks=17, threads=1024, start=False)
