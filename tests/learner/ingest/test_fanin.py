"""Many actors on one learner: 200 synthetic actors (bench/fanin.py's, each with its
own channel, handshake, push stream and weights stream) against a real learner on the CPU, all
served with the books exact and no thread per stream; past learner.server.max_actors a handshake is
refused at once with RESOURCE_EXHAUSTED, counted, and said in the actor's log.

The synchronous server this replaces stopped at 64 actors: the 65th handshake timed out.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import threading
import time

import grpc
import pytest

from bench.fanin import IDLE, PUSH, STOP, client_process
from bench.ingest import humanoid_spec
from herd.actors.client import LearnerClient
from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.rpc.test_bad_input import Stream, good, rows

CLIENTS, ROWS = 200, 16


@pytest.mark.parametrize("ingest_process", ["off", "on"])
def test_200_actors_all_served_books_exact(ingest_process):
    learner = Learner(LearnerConfig.flat(capacity=50_000, min_size=2_000, batch_size=32,
                                    hidden_sizes=(32, 32), publish_every_s=0.5,
                                    ingest_process=ingest_process), humanoid_spec())
    ctx = mp.get_context("spawn")
    mode, rate, ready, results = ctx.Value("i", IDLE), ctx.Value("d", 0.0), ctx.Value("i", 0), ctx.Queue()
    proc = ctx.Process(target=client_process, args=(learner.address(), 0, CLIENTS, ROWS, 2, mode, rate,
                                                    ready, results, None))
    try:
        proc.start()
        deadline = time.monotonic() + 60
        while ready.value < CLIENTS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.value == CLIENTS  # every handshake answered, every stream open
        threads = threading.active_count()
        rate.value, mode.value = ROWS / 0.5, PUSH  # a batch per actor every 0.5 s
        t0 = time.monotonic()
        time.sleep(5.0)
        t1 = time.monotonic()
        mode.value = STOP
        books = results.get(timeout=60)
        proc.join(30)
    finally:
        mode.value = STOP
        final = learner.stop()
    assert threads < 40, f"{threads} threads for {CLIENTS} actors' {2 * CLIENTS} streams"
    assert not [b["failure"] for b in books if b["failure"]]
    # served: every actor's batches acked within the window (a loaded 2-core box may stretch
    # the gaps between acks, never to none)
    served = [sum(t0 <= t <= t1 for t in b["ack_t"]) for b in books]
    assert min(served) >= 1, f"{served.count(0)} actors got no ack in 5 s"
    assert all(b["sent"] == b["acked"] > 0 for b in books)
    assert all(b["weights"] >= 1 for b in books)  # every WatchWeights stream delivered
    sent = sum(b["sent"] for b in books)
    assert sent == sum(b["acked"] for b in books) == final["received"] == final["inserted"] > 0
    assert final["rejected_batches"] == 0 and final["refused_actors"] == 0


def test_past_max_actors_refused_at_once_counted_and_logged(make_learner, spec, caplog):
    learner = make_learner(max_actors=2)
    with grpc.insecure_channel(learner.address()) as ch:
        stub = pb_grpc.LearnerStub(ch)
        streams = []
        for actor in ("a", "b"):
            sid = stub.Handshake(pb.HandshakeRequest(actor_id=actor, spec=spec)).session_id
            streams.append(Stream(ch))
            assert streams[-1].send(good(sid, actor, seq=1)).code == 0
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            stub.Handshake(pb.HandshakeRequest(actor_id="c", spec=spec), timeout=5)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert time.monotonic() - t0 < 1.0 and "max_actors" in e.value.details()
        # an actor already streaming may reconnect: its second connection is no new actor
        sid = stub.Handshake(pb.HandshakeRequest(actor_id="a", spec=spec)).session_id
        again = Stream(ch)
        assert again.send(good(sid, "a", seq=2)).code == 0
        again.close()
        with caplog.at_level(logging.WARNING, logger="herd.actor"):
            client = LearnerClient(learner.address(), "c", spec, backoff=(0.05, 0.2))
            client.push(rows(4), 0)
            deadline = time.monotonic() + 10
            while not client.stats["refused"] and time.monotonic() < deadline:
                time.sleep(0.02)
            assert "is full" in caplog.text and "max_actors" in caplog.text
            assert learner.status_dict()["refused_actors"] >= 2
            streams.pop().close()  # a place frees up: the waiting actor gets in, nothing lost
            assert client.flush(timeout=10)
        assert client.stats["acked"] == 4
        client.close()
        for s in streams:
            s.close()
    assert learner.status_dict()["received"] == 3 * 8 + 4
