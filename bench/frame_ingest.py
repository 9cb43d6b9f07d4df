"""The learner's CPU per camera frame taken in: what frame ingest costs the training process.

A pixel job's batches are taken in by the learner process itself (its ingest threads share the
interpreter with the training thread). This measures, for one actor's batches of walker-like
84x84 frames (3 channels, 6 actions, --envs x --steps rows a batch, episodes of --episode
steps), the CPU seconds of each stage a batch passes through on the learner:

    decode     the gRPC message's bytes parsed (TransitionBatch.FromString)
    validate   learner/rpc/validate.py: fields decoded to arrays, frame numbers and values checked
    place      the frame index (learner/replay/frames.py FrameIndex.place + commit)
    insert     FrameReplay.insert on this process's device (CPU: the copies into the rings;
               CUDA: the pinned host copy and the queued device copy)

and what that is at --rate agent steps/s (one frame each): the share of one core (and of the
GIL, which each stage holds but for numpy's larger copies). Median of --repeats batches.

    python bench/frame_ingest.py [--rate 2000] [--envs 8 --steps 8]

Writes bench/results/frame-ingest-<machine>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from bench.common import console, header, write_results
from herd.learner.replay.frames import FrameReplay
from herd.learner.rpc.validate import Session, validate
from herd.proto import codec
from herd.proto import herd_pb2 as pb

FRAME, STACK, ACTIONS = (3, 84, 84), 3, 6


def batches(envs: int, steps: int, episode: int, n: int, rng):
    """`n` batches of one actor: `envs` envs stepped `steps` times, each frame sent once."""
    number, last, t = 0, [-1] * envs, [0] * envs
    for _ in range(n):
        first, frames, prev, obs, nxt = number, [], [], [], []
        for _ in range(steps):
            for e in range(envs):
                if last[e] < 0 or t[e] % episode == 0:  # an episode's first frame
                    frames.append(rng.integers(0, 256, FRAME, dtype=np.uint8))
                    prev.append(-1)
                    last[e], number = number, number + 1
                frames.append(rng.integers(0, 256, FRAME, dtype=np.uint8))
                prev.append(last[e])
                obs.append(last[e])
                nxt.append(number)
                last[e], number, t[e] = number, number + 1, t[e] + 1
        rows = envs * steps
        yield {"frames": np.stack(frames), "first_frame": first,
               "frame_prev": np.array(prev, np.int64), "obs_frame": np.array(obs, np.int64),
               "next_frame": np.array(nxt, np.int64),
               "action": rng.uniform(-1, 1, (rows, ACTIONS)).astype(np.float32),
               "reward": rng.normal(size=rows).astype(np.float32),
               "terminated": np.zeros(rows, np.uint8)}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8, help="steps per env in a batch")
    ap.add_argument("--episode", type=int, default=500, help="agent steps an episode")
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--rate", type=float, default=2000, help="agent steps/s to cost")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    info = header("learner CPU per camera frame")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = codec.spec_to_proto("dm_control/walker-walk-v0", FRAME, "uint8", (ACTIONS,),
                               [-1.0] * ACTIONS, [1.0] * ACTIONS, frame_stack=STACK)
    session = Session(1, "a", spec)
    replay = FrameReplay(50_000, FRAME, STACK, ACTIONS, device)
    rng = np.random.default_rng(0)
    wire = [codec.pack_batch(b, session_id=1, actor_id="a", seq=i + 1, policy_version=0)
            .SerializeToString()
            for i, b in enumerate(batches(args.envs, args.steps, args.episode, args.repeats, rng))]
    stages: dict[str, list[float]] = {k: [] for k in ("decode", "validate", "place", "insert")}
    frames = []
    for raw in wire:
        t0 = time.process_time()
        msg = pb.TransitionBatch.FromString(raw)
        t1 = time.process_time()
        arrays = validate(msg, session, 100_000)
        t2 = time.process_time()
        arrays["placement"] = p = replay.index.place(arrays)
        replay.index.commit(p)
        t3 = time.process_time()
        replay.insert(arrays)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t4 = time.process_time()
        for k, a, b in zip(stages, (t0, t1, t2, t3), (t1, t2, t3, t4)):
            stages[k].append(b - a)
        frames.append(len(arrays["frames"]))
    per_frame = {k: statistics.median(v) / statistics.median(frames) * 1e6 for k, v in stages.items()}
    total = sum(per_frame.values())
    frames_per_step = statistics.median(frames) / (args.envs * args.steps)
    rec = dict(**info, device=str(device), frame=list(FRAME), rows_per_batch=args.envs * args.steps,
               frames_per_batch=statistics.median(frames), bytes_per_batch=statistics.median(map(len, wire)),
               **{f"{k}_us_per_frame": round(v, 2) for k, v in per_frame.items()},
               cpu_us_per_frame=round(total, 2), agent_steps_per_s=args.rate,
               core_share=round(total * frames_per_step * args.rate / 1e6, 4))
    for k, v in per_frame.items():
        console.print(f"  {k:9s} {v:8.2f} us per frame")
    console.print(f"  in all    {total:8.2f} us per frame: at {args.rate:,.0f} agent steps/s "
                  f"{rec['core_share']:.1%} of one core")
    write_results("frame-ingest", [rec], args.out)
    return [rec]


if __name__ == "__main__":
    main()
