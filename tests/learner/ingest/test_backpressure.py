"""A learner slower than its actors: pushes block on the window, memory stays bounded, and
every transition sent is received and inserted (nothing dropped)."""

import threading
import time

import numpy as np

from herd.actors.client import LearnerClient


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 4)).astype(np.float32),
        "action": rng.uniform(-3, 3, (n, 1)).astype(np.float32),
        "reward": np.full(n, seed, np.float32),
        "next_obs": rng.normal(size=(n, 4)).astype(np.float32),
        "terminated": np.zeros(n, np.uint8),
    }


def _slow_down(learner, seconds):
    """Every insert into the ring takes `seconds` longer: the learner is the bottleneck."""
    fast = learner.trainer._insert_pending

    def slow(block):
        time.sleep(seconds)
        fast(block)

    learner.trainer._insert_pending = slow


def test_slow_learner_blocks_actors_and_drops_nothing(make_learner, spec):
    learner = make_learner(min_size=50_000, capacity=50_000, staging_batches=2)
    _slow_down(learner, 0.05)
    window, batches, rows = 2, 30, 64
    client = LearnerClient(learner.address(), "slow0", spec, window=window)
    peaks = {"in_flight": 0, "staged": 0}
    done = threading.Event()

    def watch():
        while not done.is_set():
            peaks["in_flight"] = max(peaks["in_flight"], client.in_flight)
            peaks["staged"] = max(peaks["staged"], learner.ingest.staging.qsize())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    for s in range(batches):
        client.push(_rows(rows, s), policy_version=0)
        assert client.in_flight <= window
    assert client.flush(timeout=30)
    elapsed = time.monotonic() - t0
    done.set()
    watcher.join()
    deadline = time.monotonic() + 10
    while learner.buffer.inserted < batches * rows and time.monotonic() < deadline:
        time.sleep(0.02)
    # the producer was held back by the learner, not buffered without bound
    assert client.wait_s > 0.2 and elapsed > 0.5
    assert peaks["in_flight"] <= window and peaks["staged"] <= 2
    sent = client.stats["sent"]
    assert sent == batches * rows
    assert client.stats["acked"] == sent and client.stats["rejected"] == 0
    assert learner.received == sent
    assert learner.buffer.inserted == sent
    # every batch landed once, none twice: the rewards carry the batch number
    got = np.sort(learner.buffer.reward[:sent].cpu().numpy())
    np.testing.assert_array_equal(got, np.repeat(np.arange(batches, dtype=np.float32), rows))
    client.close()


def test_many_actors_share_a_slow_learner(make_learner, spec):
    learner = make_learner(min_size=50_000, capacity=50_000, staging_batches=2)
    _slow_down(learner, 0.02)
    clients = [LearnerClient(learner.address(), f"a{i}", spec, window=2) for i in range(3)]

    def produce(c, k):
        for s in range(10):
            c.push(_rows(32, 100 * k + s), policy_version=0)
        assert c.flush(timeout=30)

    threads = [threading.Thread(target=produce, args=(c, k)) for k, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    deadline = time.monotonic() + 10
    while learner.buffer.inserted < 3 * 10 * 32 and time.monotonic() < deadline:
        time.sleep(0.02)
    sent = sum(c.stats["sent"] for c in clients)
    assert sent == 3 * 10 * 32
    assert sum(c.stats["acked"] for c in clients) == sent
    assert learner.received == learner.buffer.inserted == sent
    for c in clients:
        c.close()
