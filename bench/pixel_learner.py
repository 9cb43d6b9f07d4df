"""The pixel update alone: how many DrQ-style SAC updates per second the learner makes from frames.

The pixel twin of bench/learner.py: PixelSAC (learner/update/pixel_sac.py) on a frame replay
(learner/replay/frames.py) prefilled on the device with random frames and rows, so that it
measures the update (the stack gather, the random shift, the conv encoder, the critics, the actor,
both Adams, the Polyak step), not ingest. Each row is a learner setting over a config's own
(`--config`, default configs/walker-walk-pixels.yaml: 84x84, 3 frames, walker's 6 actions),
timed for `--seconds` after its capture. `--profile` adds the longest kernels of each row.

    python bench/pixel_learner.py                                  # every row (~2 min on an H100)
    python bench/pixel_learner.py --rows base,x4 --profile         # two rows, with kernels
    python bench/pixel_learner.py --quick                          # 32x32 frames, on the CPU

One flat record per row in bench/results/pixel-learner-<machine>.json: row, batch, amp, graph,
compile, updates_per_call, updates_per_s, samples_per_s, us_per_update, setup_s, the learner
settings of the row, GPU memory, machine, torch, command.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/ must not shadow the learner's modules
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import torch
import yaml

from bench.common import console, header, learner_from, learner_sets, result_path, save, sync, timed_calls
from herd.learner.build import build_ring, build_update
from herd.learner.graph.capture import GraphedUpdate, configure_backends
from herd.learner.replay.frames import FrameReplay
from herd.learner.replay.ring import memory_metrics
from herd.learner.update.encoder import Encoder
from herd.proto import codec

ROWS = {
    # name: learner settings over the config's
    "base": {},
    "x4": {"updates_per_call": 4},
    "no-target-encoder": {"target_encoder": False},
    "x4-no-target-encoder": {"updates_per_call": 4, "target_encoder": False},
    "compile": {"compile": True},
    "fp32": {"amp": "off"},
    "eager": {"cuda_graph": False},
    "nchw": {"channels_last": False},  # the encoder's convs on NCHW tensors (Encoder.channels_last)
    "no-pad": {"pad_to": 1},  # the first conv on its 9 channels as they are (Encoder.pad_to)
    "compile-no-target-encoder": {"compile": True, "target_encoder": False},
    "compile-no-target-encoder-no-pad": {"compile": True, "target_encoder": False, "pad_to": 1},
    "strided2": {"strided": 2, "target_encoder": False},  # the second conv of stride 2 too
    "strided2-compile": {"strided": 2, "target_encoder": False, "compile": True},
    "batch512": {"batch_size": 512},
    "privileged": {"privileged_critic": True},
}
WALKER_STATE_DIM = 24  # dm_control walker's observation: orientations 14, height 1, velocity 9


def prefill(rb: FrameReplay, seed: int = 1) -> None:
    """Random frames in every slot, one episode through the whole ring, every row alive."""
    g = torch.Generator(rb.device).manual_seed(seed)
    for chunk in torch.arange(rb.frame_capacity, device=rb.device).split(4096):
        rb.frames[chunk] = torch.randint(0, 256, (len(chunk), *rb.frame_shape), generator=g,
                                         device=rb.device, dtype=torch.uint8)
    n = rb.frame_capacity
    rb.gid.copy_(torch.arange(n, device=rb.device))
    rb.prev.copy_(torch.arange(n, device=rb.device) - 1)
    rows = torch.arange(rb.capacity, device=rb.device)
    rb.refs.copy_(torch.stack([rows, rows + 1], 1))
    a = rb.action_dim
    rb.rest[:, :a].uniform_(-1, 1, generator=g)
    rb.rest[:, a].uniform_(0, 1, generator=g)
    rb.rest[:, a + 1] = 0.0
    rb.rest[:, a + 2] = 0.99 ** 3
    rb.state.normal_(generator=g)
    rb.window_t.copy_(torch.tensor([0, rb.capacity], device=rb.device))
    rb.size = rb.inserted = rb.capacity
    rb.written = n


def measure(name: str, settings: dict, args, device: torch.device) -> tuple[dict, FrameReplay]:
    settings = dict(settings)
    Encoder.channels_last = settings.pop("channels_last", True)
    Encoder.pad_to = settings.pop("pad_to", 8)
    cfg = learner_from(args.config, **{**args.small, "device": device.type, "capacity": args.capacity,
                                       **settings, **args.sets})
    configure_backends(device, cfg.compute.tf32)
    state_dim = WALKER_STATE_DIM if cfg.encoder.privileged_critic else 0
    spec = codec.spec_to_proto("bench", args.frame_shape, "uint8", (args.act,), [-1.0] * args.act,
                               [1.0] * args.act, frame_stack=args.stack, state_dim=state_dim)
    rb, _ = build_ring(cfg, spec, device, capacity=cfg.replay.capacity)
    prefill(rb)
    sac = build_update(cfg, spec, device)
    cuda = device.type == "cuda"
    k = cfg.compute.updates_per_call if cuda and cfg.compute.cuda_graph else 1
    step = GraphedUpdate(sac, rb, k, compile_mode=cfg.compute.compile_mode
                         if cfg.compute.compile and cuda else None, in_flight=cfg.compute.graphs_in_flight)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    step()  # capture (and compile) happen here
    step()
    sync(device)
    setup_s = time.perf_counter() - t0
    calls, elapsed, _, out = timed_calls(step, args.seconds, device, 64)
    ups = calls * k / elapsed
    batch = cfg.replay.batch_size
    rec = dict(row=name, batch=batch, amp=cfg.compute.amp if cuda else "off",
               graph=step.use_graph, compile=bool(cfg.compute.compile and cuda),
               updates_per_call=k, target_encoder=cfg.encoder.target_encoder, strided=cfg.encoder.strided,
               privileged_critic=cfg.encoder.privileged_critic, channels_last=Encoder.channels_last,
               pad_to=Encoder.pad_to,
               updates_per_s=round(ups, 1), samples_per_s=round(ups * batch),
               us_per_update=round(1e6 / ups, 1), setup_s=round(setup_s, 2),
               finite=bool(torch.isfinite(out).all()), **memory_metrics(device))
    if args.profile:
        rec["profile"] = profile(step, k, device)
    return rec, rb


def profile(step, k: int, device: torch.device, calls: int = 20) -> dict:
    """Kernels per update and the longest of them, from a profiler trace of `calls` calls."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    with prof(activities=acts) as p:
        for _ in range(calls):
            step()
        sync(device)
    kind = "CUDA" if device.type == "cuda" else "CPU"
    events = [e for e in p.key_averages() if e.device_type.name == kind]
    time_of = (lambda e: e.self_device_time_total) if kind == "CUDA" else (lambda e: e.self_cpu_time_total)
    per = calls * k
    top = sorted(events, key=lambda e: -time_of(e))[:15]
    return {"kernels_per_update": round(sum(e.count for e in events) / per, 1),
            "kernel_us_per_update": round(sum(time_of(e) for e in events) / per, 1),
            "top": [{"kernel": e.key[:100], "calls_per_update": round(e.count / per, 2),
                     "us_per_update": round(time_of(e) / per, 2)} for e in top]}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/walker-walk-pixels.yaml")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    ap.add_argument("--seconds", type=float, default=None, help="timed seconds per row")
    ap.add_argument("--pixels", type=int, default=None, help="frame size (default: the config's)")
    ap.add_argument("--capacity", type=int, default=None, help="replay rows, prefilled")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a learner setting on every row (YAML value)")
    ap.add_argument("--profile", action="store_true", help="the longest kernels of each row")
    ap.add_argument("--quick", action="store_true", help="32x32 frames, small sizes: the CPU")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    env = (yaml.safe_load(Path(args.config).read_text()) or {}).get("env", {})
    px = env.get("pixels", {})
    size = args.pixels or (32 if args.quick else px.get("size", 84))
    args.frame_shape, args.stack, args.act = (3, size, size), px.get("frame_stack", 3), 6
    args.sets = learner_sets(args.set)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    args.small = (dict(batch_size=32, hidden_sizes=(64, 64), feature_dim=16, channels=8)
                  if args.quick or not cuda else {})
    args.capacity = args.capacity or (2_000 if args.quick else 100_000)
    args.seconds = args.seconds or (0.5 if args.quick else 3.0)
    info = header("pixel SAC update")
    console.print(f"  {args.config}: frames {args.frame_shape} x{args.stack}, "
                  f"replay {args.capacity:,} rows (prefilled)")
    torch._dynamo.config.cache_size_limit = 64
    records = []
    path = result_path("pixel-learner", args.out, args.quick)
    for name in args.rows.split(","):
        if name not in ROWS:
            raise SystemExit(f"--rows: no row {name!r} (rows: {', '.join(ROWS)})")
        if not cuda and ROWS[name].get("compile"):
            continue  # compile without the graph is not what a CPU learner runs
        base = dict(**info, env=env.get("id"), pixels=size, frame_stack=args.stack,
                    config=args.config, **args.sets)
        rb = None
        try:
            rec, rb = measure(name, ROWS[name], args, device)
            rec = {**base, **rec}
            console.print(f"  {name:22s} batch {rec['batch']}: {rec['updates_per_s']:8.1f} updates/s"
                          f"  {rec['us_per_update']:8.1f} us/update  (setup {rec['setup_s']} s)")
            for t in rec.get("profile", {}).get("top", []):
                console.print(f"      {t['us_per_update']:9.1f} us  x{t['calls_per_update']:<5} {t['kernel']}")
        except Exception as e:  # noqa: BLE001 - one broken row must not cost the table
            rec = {**base, "row": name, "error": f"{type(e).__name__}: {e}"[:500]}
            console.print(f"  [red]{name} failed: {rec['error']}[/]")
        records.append(rec)
        save(records, path)
        del rb
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    console.print(f"wrote {path}")
    return records


if __name__ == "__main__":
    main()
