"""A real job scaled up while it runs: does every actor keep stepping?

    python bench/scale.py                          # Hopper-v5, 40 -> 100 -> 150 actors at 0.1 CPU
    python bench/scale.py --counts 4,8 --hold 20   # CPU-sized

Submits one job through the `herd` CLI (Hopper-v5, plain SAC, 2 envs per actor at
`num_cpus: 0.1`, random actions throughout, no replay-ratio limiter: ingest flat out), then
`herd scale`s it to each count in turn. `--hold` seconds after each scale it takes two
`herd status --json` snapshots `--gap` seconds apart and records, per count: actors, how many
step (recent steps/s > 0), env steps/s, updates/s, policy lag, reconnects between the two
snapshots and in all; reconnects_of_running_actors: those, from a snapshot just before the
scale to the second one after it, of the actors that were already running (scaling must not
disturb them; new actors' own count apart), and why connections ended (disconnect_reasons,
"CODE: details" -> times, summed over the actors). One flat record per count to
bench/results/scale-<machine>.json; the last also says whether the job's books came out exact
(books_exact: every actor step acked, received and inserted).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, result_path, save, submitted_job
from herd import local
from herd.config import parse_sets, with_overrides

ROOT = Path(__file__).resolve().parent.parent


def herd(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "herd", *args], check=False, cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"herd {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def status(job: str) -> dict:
    return json.loads(herd("status", job, "--json").splitlines()[-1])


def snapshot(st: dict) -> dict:
    actors = [a for a in st["actors"] if "steps" in a]  # answered (not waiting, not unavailable)
    ls, prog = st["learner"], st.get("progress") or {}
    return {
        "time": st["time"], "actors": len(st["actors"]),
        "stepping": sum(1 for a in actors if a.get("recent_steps_per_s", 0) > 0),
        "not_stepping": sorted(a.get("actor_id", "?") for a in actors if not a.get("recent_steps_per_s", 0) > 0),
        "reconnects": {a["actor_id"]: a.get("reconnects", 0) for a in actors if "actor_id" in a},
        "disconnects": {a["actor_id"]: a.get("disconnects") or {} for a in actors if "actor_id" in a},
        "env_steps_per_s": prog.get("env_steps_per_s"), "updates_per_s": prog.get("updates_per_s"),
        "policy_lag": prog.get("policy_lag"), "received": ls.get("received"), "updates": ls.get("updates"),
        "refused_actors": ls.get("refused_actors"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/humanoid-plain.yaml")
    ap.add_argument("--env", default="Hopper-v5")
    ap.add_argument("--counts", default="40,100,150", help="actor counts, the first at submit")
    ap.add_argument("--cpus-per-actor", type=float, default=0.1)
    ap.add_argument("--envs", type=int, default=2)
    ap.add_argument("--hold", type=float, default=60, help="seconds after each scale before the status")
    ap.add_argument("--gap", type=float, default=10, help="seconds between the two statuses")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--runs-dir", default="runs")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    local.align_auth_mode()
    info = header("Herd: a running job scaled up")
    local.up(num_cpus=os.cpu_count())
    budget = len(counts) * (args.hold + args.gap + 60) + 120
    sets = [f"env.id={args.env}", f"actors.num_actors={counts[0]}", f"actors.num_cpus={args.cpus_per_actor}",
            f"actors.num_envs={args.envs}", "actors.warmup_steps=1000000000", "learner.replay.ratio=null",
            "learner.replay.min_size=1000", f"run.max_seconds={budget}", "run.max_env_steps=10000000000",
            "run.target_return=null", "run.eval_every_s=30", *args.set]
    cfg = with_overrides(yaml.safe_load((ROOT / args.config).read_text()), parse_sets(sets))
    fd, name = tempfile.mkstemp(prefix="herd-scale-", suffix=".yaml")
    os.close(fd)
    Path(name).write_text(yaml.safe_dump(cfg))
    try:
        out = herd("submit", name, "--runs-dir", str(Path(args.runs_dir).resolve()))
    finally:
        Path(name).unlink(missing_ok=True)
    job = submitted_job(out)
    console.print(f"job {job}")
    path = result_path("scale", args.out, quick=False)
    records = []
    try:
        pre = None
        for i, n in enumerate(counts):
            if i:
                pre = snapshot(status(job))  # who runs, and their reconnects, just before
                herd("scale", job, "--actors", str(n))
            t_scale = time.time()
            time.sleep(args.hold)
            a = snapshot(status(job))
            time.sleep(args.gap)
            b = snapshot(status(job))
            new_rc = sum(max(0, b["reconnects"].get(k, 0) - v) for k, v in a["reconnects"].items())
            running = {k: v for k, v in pre["reconnects"].items() if k in b["reconnects"]} if pre else {}
            disturbed = {k: b["reconnects"][k] - v for k, v in running.items() if b["reconnects"][k] > v}
            reasons: dict[str, int] = {}
            for per_actor in b["disconnects"].values():
                for why, times in per_actor.items():
                    reasons[why] = reasons.get(why, 0) + times
            rec = {**info, "env": args.env, "job": job, "target_actors": n, "actors": b["actors"],
                   "stepping": b["stepping"], "not_stepping": b["not_stepping"][:20],
                   "env_steps_per_s": b["env_steps_per_s"], "updates_per_s": b["updates_per_s"],
                   "policy_lag": b["policy_lag"], "reconnects_between_statuses": new_rc,
                   "reconnects_total": sum(b["reconnects"].values()), "refused_actors": b["refused_actors"],
                   "reconnects_of_running_actors": sum(disturbed.values()),
                   "running_actors_reconnected": len(disturbed), "running_actors": len(running),
                   "reconnects_of_new_actors": sum(v for k, v in b["reconnects"].items() if pre and k not in pre["reconnects"]),
                   "disconnect_reasons": reasons,
                   "status_s_after_scale": round(a["time"] - t_scale, 1), "gap_s": round(b["time"] - a["time"], 1),
                   "cpus_per_actor": args.cpus_per_actor, "envs_per_actor": args.envs}
            records.append(rec)
            save(records, path)
            console.print(f"{n:5d} actors: {rec['stepping']} stepping, {rec['env_steps_per_s'] or 0:,.0f} env "
                          f"steps/s, {rec['updates_per_s'] or 0:,.0f} updates/s, lag {rec['policy_lag']}, "
                          f"reconnects {new_rc} between statuses ({rec['reconnects_total']} in all), "
                          f"{rec['reconnects_of_running_actors']} of running actors ({len(disturbed)} of "
                          f"{len(running)} reconnected); why: {reasons or '-'}")
    finally:
        subprocess.run([sys.executable, "-m", "herd", "stop", job], check=False, cwd=ROOT, capture_output=True)
    if records:
        records[-1]["books_exact"] = books_exact(Path(args.runs_dir).resolve() / job / "summary.json")
        save(records, path)
        console.print(f"books exact: {records[-1]['books_exact']}")
    console.print(f"wrote {path}")
    return 0 if records and records[-1]["books_exact"] and all(
        r["stepping"] == r["target_actors"] and r["reconnects_between_statuses"] == 0
        and r["reconnects_of_running_actors"] == 0 for r in records) else 1


def books_exact(summary_path: Path, timeout: float = 240.0) -> bool | None:
    """Once the stopped job has written its summary: actor steps = acked = received = inserted
    (None when no summary came within `timeout`)."""
    deadline = time.monotonic() + timeout
    while not summary_path.exists():
        if time.monotonic() > deadline:
            return None
        time.sleep(2)
    summary = json.loads(summary_path.read_text())
    lr = summary["learner"]
    return (summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"])
            and not int(lr.get("rejected_batches", 0)))


if __name__ == "__main__":
    sys.exit(main())
