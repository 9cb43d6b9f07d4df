"""Fan-in: N synthetic actors, spread over client processes, against one real learner.

Each actor is what an EnvActor is to the learner, without the env: the real Handshake (own
channel, own incarnation), a PushTransitions stream of Humanoid-size batches (obs 348, action
17) with a window of unacked batches, and a WatchWeights stream. Phases, with every actor
connected throughout: the learner's updates/s alone (actors idle, weights still flowing); with
ingest paced at --paced transitions/s in all; flat out. Per phase: transitions/s into the ring,
updates/s, per-actor ack rate, stalled actors (no ack for > 2 s while pushing), p50/p99 ack
latency, the learner's outbound weight bytes/s. One flat record per run.

    python bench/fanin.py --clients 1000 --relay          # the GPU box (~2 min)
    python bench/fanin.py --clients 1000                  # weights straight from the learner
    python bench/fanin.py --clients 1000 --relay --ingest-processes 2   # when ingest_cores ~ 1
    python bench/fanin.py --quick                         # CPU: 50 clients, 4 s phases
    python bench/fanin.py --quick --ingest-process on --gil-busy   # CPU: as during a compile
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/ must not shadow the packages
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import numpy as np

from bench.ingest import ACT, BOUND, OBS, humanoid_spec

IDLE, PUSH, STOP = 0, 1, 2
"""What every synthetic actor does now (a shared value the main process sets)."""
STALL_S = 2.0


def random_rows(rows: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(rows, OBS)).astype(np.float32),
        "action": rng.uniform(-BOUND, BOUND, (rows, ACT)).astype(np.float32),
        "reward": rng.normal(size=rows).astype(np.float32),
        "next_obs": rng.normal(size=(rows, OBS)).astype(np.float32),
        "terminated": (rng.random(rows) < 0.01).astype(np.uint8),
    }


class Books:
    """One synthetic actor's record: ack times and latencies, weights, refusals, errors."""

    def __init__(self):
        self.ack_t: list[float] = []
        self.ack_lat: list[float] = []
        self.sent = self.acked = self.weights = self.weight_bytes = self.refused = self.errors = 0
        self.failure = ""


async def synthetic_actor(k: int, address: str, rows: dict, window: int, mode, rate, ready,
                          books: Books, token: str | None, weights_address: str | None = None) -> None:
    import grpc

    from herd.proto import codec, keepalive
    from herd.proto import herd_pb2 as pb
    from herd.proto import herd_pb2_grpc as pb_grpc

    meta = ((codec.TOKEN_HEADER, token),) if token else ()
    limit = 64 * 2**20
    options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit),
               *keepalive.CLIENT_OPTIONS]
    channel = grpc.aio.insecure_channel(address, options=options)
    weights = grpc.aio.insecure_channel(weights_address, options=options) if weights_address else channel
    actor_id = f"fanin-{k}"
    request = pb.HandshakeRequest(actor_id=actor_id, spec=humanoid_spec(), incarnation=k + 1)
    push = channel
    while True:  # a full learner answers RESOURCE_EXHAUSTED: wait and try again, as an actor does
        try:
            reply = await pb_grpc.LearnerStub(channel).Handshake(request, metadata=meta, timeout=60)
            if reply.ingest_port:  # several ingest processes: this actor's is on that port
                if push is channel:
                    push = grpc.aio.insecure_channel(f"{address.rsplit(':', 1)[0]}:{reply.ingest_port}",
                                                     options=options)
                reply = await pb_grpc.LearnerStub(push).Handshake(request, metadata=meta, timeout=60)
            break
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            books.refused += 1
            await asyncio.sleep(0.5)

    async def watch():  # raw bytes: the actor side's parse is not what this bench measures
        stream = weights.unary_stream(codec.METHOD_PATHS["WatchWeights"],
                                      request_serializer=pb.WatchRequest.SerializeToString)(
            pb.WatchRequest(actor_id=actor_id), metadata=meta)
        async for raw in stream:
            books.weights += 1
            books.weight_bytes += len(raw)

    watcher = asyncio.create_task(watch())
    call = push.stream_stream(codec.METHOD_PATHS["PushTransitions"],
                              request_serializer=codec.WireBatch.SerializeToString,
                              response_deserializer=pb.PushAck.FromString)(metadata=meta)
    batch = codec.WireBatch(rows, session_id=reply.session_id, actor_id=actor_id, seq=0,
                            policy_version=0)
    n = batch.count
    room = asyncio.Semaphore(window)
    sent_at: dict[int, float] = {}

    async def read_acks():
        async for ack in call:
            now = time.monotonic()
            books.ack_t.append(now)
            books.ack_lat.append(now - sent_at.pop(ack.seq))
            books.acked += ack.accepted
            books.errors += ack.code != 0
            room.release()

    reader = asyncio.create_task(read_acks())
    with ready.get_lock():
        ready.value += 1
    due = time.monotonic()
    while mode.value != STOP:
        if mode.value == IDLE:
            await asyncio.sleep(0.02)
            due = time.monotonic()
            continue
        if rate.value > 0:  # paced: this actor's share of the target, batch by batch
            due = max(due + n / rate.value, time.monotonic() - 1.0)
            if due > time.monotonic():
                await asyncio.sleep(due - time.monotonic())
        await room.acquire()
        batch.seq += 1
        sent_at[batch.seq] = time.monotonic()
        await call.write(batch)
        books.sent += n
    for _ in range(window):  # every batch sent is acked before the stream closes
        await asyncio.wait_for(room.acquire(), 60)
    await call.done_writing()
    await reader
    watcher.cancel()
    for ch in {channel, push, weights}:
        await ch.close()


def client_process(address: str, first: int, count: int, rows_per_batch: int, window: int,
                   mode, rate, ready, out, token: str | None, weights_address: str | None = None) -> None:
    rows = random_rows(rows_per_batch, first)
    books = [Books() for _ in range(count)]

    async def run_all():
        tasks = [synthetic_actor(first + i, address, rows, window, mode, rate, ready, b, token, weights_address)
                 for i, b in enumerate(books)]
        for b, res in zip(books, await asyncio.gather(*tasks, return_exceptions=True)):
            if isinstance(res, BaseException):
                b.failure = f"{type(res).__name__}: {res}"

    asyncio.run(run_all())
    out.put([vars(b) for b in books])


def relay_process(address: str, port, stop) -> None:
    """One node's weights relay (learner/rpc/relay.py), as the driver places one per node."""
    from herd.learner.rpc.relay import WeightRelay

    relay = WeightRelay(address)
    port.value = relay.port
    stop.wait()
    relay.stop()


def ack_stats(books: list[dict], t0: float, t1: float) -> dict:
    """Per-actor ack rate, stalled actors and latency percentiles within [t0, t1]."""
    rates, lat, stalled = [], [], 0
    for b in books:
        t = np.asarray(b["ack_t"])
        inside = (t >= t0) & (t <= t1)
        rates.append(inside.sum() / (t1 - t0))
        lat.extend(np.asarray(b["ack_lat"])[inside].tolist())
        edges = np.concatenate([[t0], t[inside], [t1]])
        stalled += np.diff(edges).max() > STALL_S
    lat_ms = 1e3 * np.asarray(lat) if lat else np.zeros(1)
    return dict(stalled=int(stalled), ack_rate_min=round(float(np.min(rates)), 2),
                ack_rate_median=round(float(np.median(rates)), 2),
                p50_ack_ms=round(float(np.percentile(lat_ms, 50)), 2),
                p99_ack_ms=round(float(np.percentile(lat_ms, 99)), 2))


def gil_load(stop) -> None:
    """Pure Python until `stop`: holds the GIL as torch.compile's tracing and code generation
    do on the learner's background thread while its compiled graph is built (a GPU's start-up),
    for a CPU run to show what that does to ingest (--gil-busy)."""
    table: dict[int, str] = {}
    while not stop.is_set():
        for i in range(1000):
            table[i % 97] = str(i)


def measure(learner, seconds: float) -> tuple[dict, float, float]:
    """Rates over `seconds`, and the cores the learner's process and its ingest process used
    (an ingest process near 1.0 is the ceiling of one ingest loop)."""
    from bench.common import proc_cpu_s

    pids = (os.getpid(), *getattr(learner.ingest, "pids", ()))
    c0 = [proc_cpu_s(p) for p in pids]
    s0, t0 = learner.status_dict(), time.monotonic()
    time.sleep(seconds)
    s1, t1 = learner.status_dict(), time.monotonic()
    c1 = [proc_cpu_s(p) for p in pids]
    dt = t1 - t0
    versions = max(1, s1["policy_version"] - s0["policy_version"])
    return dict(learner_cores=(c1[0] - c0[0]) / dt, ingest_cores=sum(c1[1:]) / dt - sum(c0[1:]) / dt,
                updates_per_s=(s1["updates"] - s0["updates"]) / dt,
                transitions_per_s=(s1["inserted"] - s0["inserted"]) / dt,
                weight_bytes_per_s=(s1["weight_bytes_sent"] - s0["weight_bytes_sent"]) / dt,
                weight_bytes_per_publish=(s1["weight_bytes_sent"] - s0["weight_bytes_sent"]) / versions), t0, t1


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=max(1, min(12, (os.cpu_count() or 4) - 4)),
                    help="client processes the actors are spread over")
    ap.add_argument("--rows", type=int, default=128, help="transitions per batch")
    ap.add_argument("--window", type=int, default=4, help="unacked batches per actor")
    ap.add_argument("--paced", type=float, default=100_000, help="paced phase: transitions/s in all")
    ap.add_argument("--seconds", type=float, default=10.0, help="per measured phase")
    ap.add_argument("--warmup", type=float, default=3.0, help="before each measured phase")
    ap.add_argument("--publish-every", type=float, default=None,
                    help="learner.server.publish_every_s (default: the config's, else 0.5)")
    ap.add_argument("--config", default=None, help="take the learner's sizes from a job config's learner: section")
    ap.add_argument("--ingest-process", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--ingest-processes", type=int, default=1, help="learner.server.ingest_processes")
    ap.add_argument("--relay", action="store_true",
                    help="actors watch weights through one relay (a node's), not the learner")
    ap.add_argument("--quick", action="store_true", help="CPU-sized: 50 clients, 4 s phases")
    ap.add_argument("--gil-busy", action="store_true",
                    help="a pure-Python thread in the learner's process throughout, as a GPU's "
                         "background compile is in its first minute")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    # here, not at the top: the client processes import this module and need no torch
    from bench.common import console, header, result_path, save

    small = {}
    if args.quick:
        args.clients, args.procs, args.rows, args.paced = min(args.clients, 50), 2, 64, 5_000
        args.seconds, args.warmup = min(args.seconds, 4.0), 1.5
        small = dict(hidden_sizes=(64, 64), batch_size=64, capacity=50_000)
    info = header("Herd fan-in: synthetic actors -> one learner")
    out = result_path("fanin", args.out, args.quick)

    from bench.common import learner_from
    from herd.learner.config import LearnerConfig
    from herd.learner.learner import Learner

    min_replay = 5_000 if args.quick else 50_000
    make = (lambda **kw: learner_from(args.config, **kw)) if args.config else LearnerConfig.flat
    cfg = make(**{
        "ratio": None, "min_size": min_replay, "max_batch": max(4096, args.rows),
        "max_actors": max(2_000, args.clients), "ingest_process": args.ingest_process,
        "ingest_processes": args.ingest_processes,
        "host": "127.0.0.1", "token": None, **small,
        **({"publish_every_s": args.publish_every} if args.publish_every else {})})
    learner = Learner(cfg, humanoid_spec())
    busy = threading.Event()
    if args.gil_busy:
        threading.Thread(target=gil_load, args=(busy,), name="gil-load", daemon=True).start()
    ctx = mp.get_context("spawn")
    mode, rate, ready, results = ctx.Value("i", IDLE), ctx.Value("d", 0.0), ctx.Value("i", 0), ctx.Queue()
    per = [args.clients // args.procs + (i < args.clients % args.procs) for i in range(args.procs)]
    relay_port, relay_stop, weights_address = ctx.Value("i", 0), ctx.Event(), None
    relay = ctx.Process(target=relay_process, args=(learner.address(), relay_port, relay_stop)) if args.relay else None
    if relay is not None:
        relay.start()
        while not relay_port.value and relay.is_alive():
            time.sleep(0.05)
        weights_address = f"127.0.0.1:{relay_port.value}"
    procs = [ctx.Process(target=client_process, args=(learner.address(), sum(per[:i]), n, args.rows, args.window,
                                                      mode, rate, ready, results, cfg.server.token, weights_address))
             for i, n in enumerate(per) if n]
    phases: dict[str, tuple] = {}
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + 300
        while ready.value < args.clients and time.monotonic() < deadline:
            time.sleep(0.1)
        console.print(f"  {ready.value} of {args.clients} actors connected over {len(procs)} processes; "
                      f"learner on {learner.device}, ingest {type(learner.ingest).__name__}")
        mode.value = PUSH  # fill the ring past min_replay_size, then let the graph warm up
        while learner.buffer.size < min_replay and time.monotonic() < deadline:
            time.sleep(0.1)
        mode.value = IDLE
        while learner.updates < 100 and time.monotonic() < deadline:
            time.sleep(0.1)
        for name, m, r in (("alone", IDLE, 0.0), ("paced", PUSH, args.paced / args.clients), ("flat out", PUSH, 0.0)):
            rate.value, mode.value = r, m
            time.sleep(args.warmup)
            phases[name] = measure(learner, args.seconds)
            got = phases[name][0]
            console.print(f"  {name:>8}: {got['transitions_per_s']:>10,.0f} transitions/s "
                          f"{got['updates_per_s']:>7,.0f} updates/s  weights {got['weight_bytes_per_s'] / 1e6:,.1f} MB/s"
                          f"  cores: learner {got['learner_cores']:.2f} ingest {got['ingest_cores']:.2f}")
        mode.value = STOP
        books = [b for _ in procs for b in results.get(timeout=300)]
        for p in procs:
            p.join(60)
        message = len(learner.publisher.newer_wire(0)[1])  # one version's PolicyWeights bytes
    finally:
        mode.value = STOP
        relay_stop.set()
        busy.set()
        final = learner.stop()
    alone, paced, flat = (phases[k][0] for k in ("alone", "paced", "flat out"))
    rec = dict(
        info, clients=args.clients, procs=len(procs), rows_per_batch=args.rows, window=args.window,
        paced_target=args.paced, device=str(learner.device), ingest=type(learner.ingest).__name__,
        config=args.config, batch_size=cfg.replay.batch_size, ingest_processes=cfg.server.ingest_processes, publish_every_s=cfg.server.publish_every_s,
        relay=args.relay, gil_busy=args.gil_busy, weights_received_bytes=sum(b["weight_bytes"] for b in books),
        **ack_stats(books, *phases["flat out"][1:]),
        transitions_per_s=round(flat["transitions_per_s"]), transitions_per_s_paced=round(paced["transitions_per_s"]),
        updates_per_s_alone=round(alone["updates_per_s"], 1), updates_per_s_paced=round(paced["updates_per_s"], 1),
        updates_per_s_flat_out=round(flat["updates_per_s"], 1),
        update_retention_100k=round(paced["updates_per_s"] / alone["updates_per_s"], 3) if alone["updates_per_s"] else None,
        update_retention_flat_out=round(flat["updates_per_s"] / alone["updates_per_s"], 3) if alone["updates_per_s"] else None,
        weight_bytes_per_s=round(flat["weight_bytes_per_s"]), weight_bytes_per_publish=round(flat["weight_bytes_per_publish"]),
        learner_cores=round(flat["learner_cores"], 2), ingest_cores=round(flat["ingest_cores"], 2),
        weights_message_bytes=message, weight_copies_per_publish=round(flat["weight_bytes_per_publish"] / message, 2),
        stalled_paced=ack_stats(books, *phases["paced"][1:])["stalled"],
        p99_ack_ms_paced=ack_stats(books, *phases["paced"][1:])["p99_ack_ms"],
        refused=sum(b["refused"] for b in books), rejected=sum(b["errors"] for b in books),
        failures=sorted({b["failure"] for b in books if b["failure"]})[:5],
        books_agree=(sum(b["sent"] for b in books) == sum(b["acked"] for b in books)
                     and final["received"] == final["inserted"]),
    )
    save([rec], out)
    console.print({k: rec[k] for k in ("clients", "stalled", "transitions_per_s", "updates_per_s_alone",
                                       "update_retention_100k", "update_retention_flat_out", "weight_bytes_per_s",
                                       "p99_ack_ms", "books_agree")})
    console.print(f"wrote {out}")
    return rec


if __name__ == "__main__":
    main()
