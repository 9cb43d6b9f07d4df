"""CPU per batch on the wire: protobuf's own encoder against Herd's hand-serialized bytes.

Actor side: one Humanoid-v5 TransitionBatch (obs 348, act 17) of --rows rows, built and
serialized as the client used to (pack_batch + ByteSize + SerializeToString) and as it does
now (codec.WireBatch; the same bytes, checked). Learner side: one PolicyWeights of the
256x256 policy serialized, which WatchWeights did once per actor stream per version and now
does once per version. CPU time of this process (time.process_time), median of --repeats.

    python bench/wire.py [--rows 128]

Writes bench/results/wire-<machine>.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # actors/, not bench/actors.py

import numpy as np

from bench.common import console, header, median_seconds, timing_flags, write_results
from herd.proto import codec


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=128, help="transitions per batch (16 steps x 8 envs)")
    timing_flags(ap, n=100)
    args = ap.parse_args(argv)
    info = header("Wire encoding: protobuf vs hand-serialized")
    rng = np.random.default_rng(0)
    rows = args.rows
    arrays = {"obs": rng.normal(size=(rows, 348)).astype(np.float32),
              "action": rng.uniform(-1, 1, (rows, 17)).astype(np.float32),
              "reward": rng.normal(size=rows).astype(np.float32),
              "next_obs": rng.normal(size=(rows, 348)).astype(np.float32),
              "terminated": (rng.random(rows) < 0.05).astype(np.uint8)}
    ids = {"session_id": 2**62 + 12345, "actor_id": "humanoid-actor-3", "seq": 4242, "policy_version": 99}

    def protobuf():
        b = codec.pack_batch(arrays, **ids)
        b.ByteSize()  # the client's bytes_sent counter
        return b.SerializeToString()  # what gRPC's generated stub calls

    def hand():
        b = codec.WireBatch(arrays, **ids)
        assert b.nbytes > 0  # the client's bytes_sent counter
        return b.SerializeToString()

    same = protobuf() == hand()
    from bench.actors import random_policy_weights

    weights = random_policy_weights(348, 17)
    records = []
    for name, fn, unit in (("batch, protobuf encoder", protobuf, rows), ("batch, WireBatch", hand, rows),
                           ("PolicyWeights, protobuf encoder", weights.SerializeToString, 1)):
        us = median_seconds(fn, args.n, args.repeats, time.process_time) * 1e6
        rec = dict(info, what=name, rows=rows if unit > 1 else None, bytes=len(fn()),
                   cpu_us=round(us, 1), cpu_us_per_row=round(us / unit, 3) if unit > 1 else None,
                   identical_bytes=same)
        records.append(rec)
        per = f" = {us / unit:6.2f} us per transition" if unit > 1 else ""
        console.print(f"  {name:34s} {rec['bytes']:>9,} bytes {us:9.1f} CPU us{per}")
    console.print(f"  identical bytes: {same}")
    write_results("wire", records, args.out)
    return records


if __name__ == "__main__":
    main()
