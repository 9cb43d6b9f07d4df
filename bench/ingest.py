"""Transitions/s through gRPC into the replay buffer, and what ingest costs the learner's updates.

N sender processes stream Humanoid-sized TransitionBatches (obs 348 float32, action 17) with
Herd's own LearnerClient (windowed, acked) to a live Learner in this process, which updates
flat out (replay_ratio null). Phases: updates/s alone; with ingest paced at --rate (the actors'
rate); flat out (the ingest ceiling); alone again. Interference = 1 - updates/s with / alone.

    python bench/ingest.py            # the full run (~1 min on the H200 box)
    python bench/ingest.py --quick    # tiny, CPU
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/ must not shadow the packages
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import numpy as np

OBS, ACT, BOUND = 348, 17, 0.4


def humanoid_spec():
    from herd.proto import codec

    return codec.spec_to_proto("Humanoid-v5", (OBS,), "float32", (ACT,),
                               np.full(ACT, -BOUND), np.full(ACT, BOUND))


def sender(address: str, k: int, rows: int, rate: float, window: int, ready, stop, q) -> None:
    """Push the same-shaped random batch until `stop`; `rate` transitions/s (0: flat out)."""
    from herd.actors.client import LearnerClient

    rng = np.random.default_rng(k)
    batch = {
        "obs": rng.normal(size=(rows, OBS)).astype(np.float32),
        "action": rng.uniform(-BOUND, BOUND, (rows, ACT)).astype(np.float32),
        "reward": rng.normal(size=rows).astype(np.float32),
        "next_obs": rng.normal(size=(rows, OBS)).astype(np.float32),
        "terminated": (rng.random(rows) < 0.01).astype(np.uint8),
    }
    client = LearnerClient(address, f"ingest-{k}", humanoid_spec(), window=window)
    period = rows / rate if rate > 0 else 0.0
    client.push(batch, 0)
    client.flush(60)
    ready.set()
    nxt = time.monotonic()
    while not stop.is_set():
        if period:
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        client.push(batch, 0)
    client.flush(60)
    q.put((client.stats["sent"], client.stats["acked"], client.push_latency_s))
    client.close()


def run_senders(learner, n: int, rate: float, seconds: float, args) -> dict:
    """Start n senders, measure the learner for `seconds` once all stream, stop them."""
    ctx = mp.get_context("spawn")
    stop, q = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(n)]
    procs = [ctx.Process(target=sender, args=(learner.address(), k, args.rows, rate / n,
                                              args.window, readies[k], stop, q))
             for k in range(n)]
    for p in procs:
        p.start()
    for r in readies:
        r.wait(120)
    time.sleep(1.0)
    m = measure(learner, seconds)
    stop.set()
    finals = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    sent, acked = sum(f[0] for f in finals), sum(f[1] for f in finals)
    deadline = time.monotonic() + 30
    while learner.buffer.inserted < learner.received and time.monotonic() < deadline:
        time.sleep(0.05)
    m.update(sent=sent, acked=acked, push_latency_ms=1e3 * float(np.mean([f[2] for f in finals])))
    return m


def measure(learner, seconds: float) -> dict:
    s0, t0 = learner.status_dict(), time.monotonic()
    time.sleep(seconds)
    s1, t1 = learner.status_dict(), time.monotonic()
    dt = t1 - t0
    return dict(
        updates_per_s=(s1["updates"] - s0["updates"]) / dt,
        transitions_per_s=(s1["inserted"] - s0["inserted"]) / dt,
        mb_per_s=(s1["bytes_received"] - s0["bytes_received"]) / dt / 1e6,
    )


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1024, help="transitions per batch")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--rate", type=float, default=30_000, help="paced phase: transitions/s in all")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--batch", type=int, default=256, help="learner batch size")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    # here, not at the top: the sender processes import this module and need neither torch nor rich
    from rich.table import Table

    from bench.common import console, header, progress, result_path, save

    if args.quick:
        args.senders, args.rows, args.rate, args.seconds = 2, 256, 3_000, 3.0
    info = header("Herd ingest: gRPC -> replay buffer")
    out = result_path("ingest", args.out, args.quick)

    from herd.learner.config import LearnerConfig
    from herd.learner.learner import Learner

    cfg = LearnerConfig.flat(ratio=None, min_size=args.rows * 4, batch_size=args.batch,
                             capacity=1_000_000 if not args.quick else 50_000,
                             staging_batches=64, max_batch=max(4096, args.rows))
    learner = Learner(cfg, humanoid_spec())
    console.print(f"  learner on {learner.device}, batch {cfg.replay.batch_size}; "
                  f"{args.senders} senders x {args.rows} rows/batch "
                  f"({args.rows * (2 * OBS + ACT + 2) * 4 / 1e6:.2f} MB)")
    base = dict(info, env="Humanoid-v5 (synthetic)", device=str(learner.device), batch=cfg.replay.batch_size,
                senders=args.senders, rows_per_batch=args.rows)
    phases = [("alone", 0, None), ("paced", args.senders, args.rate),
              ("flat out", args.senders, 0.0), ("alone again", 0, None)]
    records: list[dict] = []
    try:
        run_senders(learner, 1, 0.0, 0.5, args)  # prefill past min_replay_size
        deadline = time.monotonic() + 120
        while learner.updates < 50 and time.monotonic() < deadline:  # graph captured, warm
            time.sleep(0.1)
        time.sleep(1.0)
        with progress() as prog:
            task = prog.add_task("ingest", total=len(phases))
            for name, n, rate in phases:
                prog.update(task, description=f"{name}")
                m = measure(learner, args.seconds) if n == 0 else run_senders(learner, n, rate, args.seconds, args)
                rec = dict(base, phase=name, target_per_s=rate, **{k: round(v, 1) if isinstance(v, float) else v
                                                                  for k, v in m.items()})
                records.append(rec)
                save(records, out)
                console.print(f"  {name:>11}: {m['transitions_per_s']:>10,.0f} transitions/s "
                              f"{m['mb_per_s']:>8,.1f} MB/s  {m['updates_per_s']:>7,.0f} updates/s")
                prog.advance(task)
    finally:
        final = learner.stop()
    alone = np.mean([r["updates_per_s"] for r in records if r["phase"].startswith("alone")])
    for r in records:
        r["interference_pct"] = round(100 * (1 - r["updates_per_s"] / alone), 1) if alone else None
    ok = final["received"] == final["inserted"] and all(r.get("sent", 0) == r.get("acked", 0) for r in records)
    for r in records:
        r["counts_agree"] = ok
    save(records, out)
    table = Table(title=f"ingest on {info['machine']} (torch {info['torch']}, {info['cores']} cores)")
    for col in ("phase", "transitions/s", "MB/s", "updates/s", "interference"):
        table.add_column(col, justify="right")
    for r in records:
        table.add_row(r["phase"], f"{r['transitions_per_s']:,.0f}", f"{r['mb_per_s']:,.1f}",
                      f"{r['updates_per_s']:,.0f}", f"{r['interference_pct']:+.1f}%")
    console.print(table)
    console.print(f"received {final['received']:,} inserted {final['inserted']:,} "
                  f"(agree: {ok}); wrote {out}")
    return records


if __name__ == "__main__":
    main()
