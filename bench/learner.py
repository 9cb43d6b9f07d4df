"""The seed's learner table on our learner: how far eager, AMP, one CUDA graph and compile go.

Rows: FP32 eager, AMP eager, FP32 + graph, AMP + graph, FP32 + graph + compile,
AMP + graph + compile (all with the update's branches on parallel CUDA streams), and the two
compiled rows again on one stream (CleanRL's order), each at batch 256 / 1024 / 4096, on Humanoid sizes (obs 348, act 17,
256x256 nets) with the replay ring on the device, prefilled with random rows. Reports
updates/s, samples/s (batch x updates/s) and GPU memory, and writes one flat record per row
to bench/results/learner-<gpu>.json.

    python bench/learner.py                  # the full table (~3-4 min on an H200)
    python bench/learner.py --quick          # tiny sizes, runs on the CPU in seconds
    python bench/learner.py --profile        # + where one update's microseconds go
    python bench/learner.py --nets plain,configs/humanoid.yaml --rows "amp graph+compile"
                                             # plain SAC beside a config's networks and critic
    python bench/learner.py --nets configs/humanoid.yaml --rows "amp graph+compile" \
        --compile-mode default --set 'compile_options={triton.autotune_pointwise: false}'
                                             # a learner setting on every row (setup_s: the
                                             # compile, cold when the compile cache is empty)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/learner.py must not shadow learner/
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import torch
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.common import learner_sets, sync, timed_calls
from herd.learner.build import build_update
from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate, configure_backends
from herd.learner.replay.ring import ReplayBuffer, memory_metrics
from herd.proto import codec


@dataclass(frozen=True)
class Row:
    name: str
    amp: str  # off | bf16 | fp16
    graph: bool
    compile: bool
    simultaneous: bool = True  # actor and critic steps on parallel streams (learner/update/branches.py)
    in_flight: int = 2  # replays queued before the host sleeps on an event; 0: it spins instead


ROWS = (
    Row("fp32 eager", "off", False, False),
    Row("amp eager", "bf16", False, False),
    Row("fp32 graph", "off", True, False),
    Row("amp graph", "bf16", True, False),
    Row("fp32 graph+compile", "off", True, True),
    Row("amp graph+compile", "bf16", True, True),
    # the same two with CleanRL's order (critic step, then the actor's loss): one stream
    Row("fp32 graph+compile 1 stream", "off", True, True, False),
    Row("amp graph+compile 1 stream", "bf16", True, True, False),
    # the host thread unbounded: spinning in CUDA's launch queue (host_cpu ~1.0)
    Row("amp graph+compile unpaced", "bf16", True, True, True, 0),
)


def prefill(buf: ReplayBuffer) -> None:
    """Random rows straight on the device: the table measures the learner, not ingest."""
    g = torch.Generator(buf.device).manual_seed(1)
    buf.obs.normal_(generator=g)  # the views: pad columns stay zero
    buf.next_obs.normal_(generator=g)
    buf.action.uniform_(-1, 1, generator=g)
    buf.reward.normal_(generator=g)
    buf.terminated.copy_(torch.rand(buf.capacity, device=buf.device, generator=g) < 0.01)
    buf.size = buf.inserted = buf.capacity
    buf.size_t.fill_(float(buf.capacity))


NET_FIELDS = ("hidden_sizes", "actor_arch", "actor_width", "actor_blocks", "critic_arch", "critic_width",
              "critic_blocks", "expansion", "critic_loss", "num_atoms", "v_min", "v_max", "obs_norm",
              "reward_norm", "n_step")
"""The learner settings that shape the update's cost (taken from a config by --nets)."""


def net_settings(name: str, hidden) -> dict:
    """'plain': the classic 2x256 MLP SAC; else a config file's network and critic settings."""
    if name == "plain":
        return {"hidden_sizes": tuple(hidden)}
    algorithm = yaml.safe_load(Path(name).read_text()).get("learner", {}).get("algorithm", {})
    return {k: algorithm[k] for k in NET_FIELDS if k in algorithm}


def measure(row: Row, batch: int, buf: ReplayBuffer, args, device, nets: dict) -> dict:
    k = args.updates_per_call if row.graph else 1
    cfg = LearnerConfig.flat(**{
        "hidden_sizes": tuple(args.hidden), **nets, "device": device.type, "batch_size": batch,
        "amp": row.amp, "cuda_graph": row.graph, "compile": row.compile,
        "capacity": max(buf.capacity, 1000), "updates_per_call": k, "tf32": args.tf32,
        "simultaneous": row.simultaneous, **args.sets,
    })
    spec = codec.spec_to_proto("bench", (args.obs,), "float32", (args.act,), [-0.4] * args.act,
                               [0.4] * args.act)
    sac = build_update(cfg, spec, device)
    step = GraphedUpdate(sac, buf, k, compile_mode=args.compile_mode if row.compile else None,
                         in_flight=row.in_flight)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    step()  # compile, warm-up and capture happen here
    step()
    sync(device)
    setup_s = time.perf_counter() - t0
    calls, elapsed, cpu_s, out = timed_calls(step, args.seconds, device, 256)
    ups = calls * k / elapsed
    host_cpu = cpu_s / elapsed  # cores the update loop's thread burns
    finite = bool(torch.isfinite(out).all())
    rec = dict(
        row=row.name, batch=batch, amp=row.amp if sac.amp_dtype is not None else "off",
        graph=row.graph and device.type == "cuda", compile=row.compile,
        simultaneous=row.simultaneous, in_flight=row.in_flight, host_cpu=round(host_cpu, 3),
        updates_per_call=k, updates_per_s=round(ups, 1), samples_per_s=round(ups * batch),
        us_per_update=round(1e6 / ups, 1), setup_s=round(setup_s, 2), finite=finite,
        **memory_metrics(device),
    )
    if args.profile and row.graph and row.compile and batch in (256, 4096):
        try:
            rec["profile"] = profile(step, k, device)
        except Exception as e:  # noqa: BLE001 - the figure above stands without its profile
            rec["profile_error"] = f"{type(e).__name__}: {e}"[:300]
    del step, sac, out
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def profile(step, k: int, device: torch.device, replays: int = 20) -> dict:
    """Kernels per update and the longest kernels, from a profiler trace of graph replays."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    sync(device)
    with prof(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for _ in range(replays):
            step()
        sync(device)
    kernels = [e for e in p.key_averages() if e.device_type.name == "CUDA"]
    per_update = replays * k
    total = sum(e.self_device_time_total for e in kernels)
    top = sorted(kernels, key=lambda e: -e.self_device_time_total)[:12]
    return {
        "kernels_per_update": round(sum(e.count for e in kernels) / per_update, 1),
        "kernel_us_per_update": round(total / per_update, 1),
        "top": [
            {"kernel": e.key[:90], "calls_per_update": round(e.count / per_update, 2),
             "us_per_update": round(e.self_device_time_total / per_update, 2)}
            for e in top
        ],
    }


def machine_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, CPU friendly")
    ap.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--rows", default=None, help="comma list of row names to run (default all)")
    ap.add_argument("--seconds", type=float, default=None, help="timed seconds per row")
    ap.add_argument("--updates-per-call", type=int, default=4, help="updates per graph replay")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--capacity", type=int, default=None, help="ring rows (prefilled)")
    ap.add_argument("--no-tf32", dest="tf32", action="store_false")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--nets", default="plain",
                    help="comma list: 'plain' and/or config files whose learner networks to measure")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a learner setting (YAML value) on every row, e.g. compile_options={...}")
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/learner-<gpu>.json)")
    args = ap.parse_args(argv)
    args.sets = learner_sets(args.set)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if args.quick:
        args.obs, args.act, args.hidden = 17, 6, (64, 64)
        args.batches = args.batches or [32, 64]
        args.seconds = args.seconds or 0.2
        args.capacity = args.capacity or 2_000
    else:
        args.obs, args.act, args.hidden = 348, 17, (256, 256)
        args.batches = args.batches or [256, 1024, 4096]
        args.seconds = args.seconds or 1.5
        args.capacity = args.capacity or 1_000_000
    sizes = f"obs {args.obs} act {args.act} mlp {'x'.join(map(str, args.hidden))}"
    env = f"tiny ({sizes})" if args.quick else f"Humanoid-v5 sizes ({sizes})"
    rows = [r for r in ROWS if args.rows is None or r.name in args.rows.split(",")]
    if device.type != "cuda":  # graph, AMP and compile are CUDA features: the CPU row is eager fp32
        rows = [r for r in rows if r.amp == "off" and not r.graph and not r.compile]
    for name in ("cache_size_limit", "recompile_limit"):  # one recompile per SAC instance
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    configure_backends(device, args.tf32)

    console = Console()
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    machine = machine_name(device)
    console.print(f"[bold]{machine}[/]  torch {torch.__version__}  cores {os.cpu_count()}  "
                  f"tf32 {args.tf32}  {env}\n$ {command}")
    slug = re.sub(r"[^a-z0-9]+", "-", machine.lower()).strip("-") or "cpu"
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"learner-{slug}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = ReplayBuffer(args.capacity, (args.obs,), args.act, device)
    prefill(buf)
    records: list[dict] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as bar:
        nets_list = args.nets.split(",")
        task = bar.add_task("learner bench", total=len(rows) * len(args.batches) * len(nets_list))
        for nets_name, batch, row in ((n, b, r) for n in nets_list for b in args.batches for r in rows):
            bar.update(task, description=f"{nets_name}: {row.name} @ {batch}")
            nets = net_settings(nets_name, args.hidden)
            base = dict(date=time.strftime("%Y-%m-%d", time.gmtime()), machine=machine,
                        torch=torch.__version__, env=env, cores=os.cpu_count(),
                        tf32=args.tf32, capacity=args.capacity, command=command, nets=nets_name,
                        **args.sets,
                        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in nets.items()})
            try:
                rec = {**base, **measure(row, batch, buf, args, device, nets)}
                bar.console.print(f"  {nets_name} {row.name:20s} batch {batch:5d}: {rec['updates_per_s']:9.1f} updates/s "
                                  f"{rec['samples_per_s']:10d} samples/s  (setup {rec['setup_s']} s)")
            except Exception as e:  # noqa: BLE001 - one broken row must not cost the table
                rec = {**base, "row": row.name, "batch": batch, "amp": row.amp, "graph": row.graph,
                       "compile": row.compile, "error": f"{type(e).__name__}: {e}"[:500]}
                bar.console.print(f"  [red]{row.name} batch {batch} failed: {rec['error']}[/]")
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            records.append(rec)
            out.write_text(json.dumps(records, indent=1) + "\n")  # survives a killed run
            bar.advance(task)

    table = Table(title=f"SAC updates on {machine} (torch {torch.__version__})")
    for col in ("nets", "row", "batch", "updates/s", "samples/s", "us/update", "host cores", "alloc MB",
                "reserved MB"):
        table.add_column(col, justify="right")
    for r in records:
        if "error" in r:
            table.add_row(r["nets"], r["row"], str(r["batch"]), "error", "", "", "", "", "")
            continue
        table.add_row(r["nets"], r["row"], str(r["batch"]), f"{r['updates_per_s']:,.0f}", f"{r['samples_per_s']:,}",
                      f"{r['us_per_update']}", f"{r['host_cpu']:.2f}", f"{r['mem_allocated'] / 2**20:,.0f}", f"{r['mem_reserved'] / 2**20:,.0f}")
    console.print(table)
    for r in records:
        if "profile" in r:
            p = r["profile"]
            console.print(f"[bold]profile {r['row']} @ {r['batch']}[/]: {p['kernels_per_update']} kernels, "
                          f"{p['kernel_us_per_update']} us of kernel time per update")
            for t in p["top"]:
                console.print(f"   {t['us_per_update']:8.2f} us  x{t['calls_per_update']:<5} {t['kernel']}")
    out.write_text(json.dumps(records, indent=1) + "\n")
    console.print(f"wrote {out}")
    return records


if __name__ == "__main__":
    main()
