"""Live views in the terminal: `herd submit --follow` and `herd status`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def _fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def _progress_of(job_id: str) -> dict | None:
    """The driver's latest progress row, read from the job's controller (None if not up yet)."""
    import ray

    from cluster.controller import NAMESPACE, controller_name

    try:
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
                     logging_level="ERROR", log_to_driver=False)
        ctl = ray.get_actor(controller_name(job_id), namespace=NAMESPACE)
        return ray.get(ctl.status.remote(), timeout=15)["progress"]
    except Exception:
        return None


def follow_job(client, job_id: str, run_dir: Path) -> int:
    """Progress bar until the job ends; then the final evaluation and where results are."""
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task("starting", total=None, info="")
        while True:
            status = str(client.get_job_status(job_id)).split(".")[-1]
            if status in TERMINAL:
                break
            p = _progress_of(job_id) if status == "RUNNING" else None
            if p:
                frac = max(p["env_steps"] / p["max_env_steps"], p["time_s"] / p["max_seconds"])
                bar.update(task, total=1.0, completed=min(frac, 1.0), description="training",
                           info=(f"steps {p['env_steps']} ({p['env_steps_per_s']:.0f}/s)  updates "
                                 f"{p['updates']} ({p['updates_per_s']:.0f}/s)  actors {p['actors']}  "
                                 f"return {_fmt(p['train_return'])}  eval {_fmt(p['eval_return'])}"))
            else:
                bar.update(task, description=status.lower())
            time.sleep(2)
    summary = run_dir / "summary.json"
    if status == "SUCCEEDED" and summary.exists():
        s = json.loads(summary.read_text())
        ev = s["final_eval"]
        verdict = ""
        if s.get("target_return") is not None:
            verdict = " (target %.0f %s)" % (s["target_return"], "reached" if s["reached_target"] else "NOT reached")
        console.print(f"[bold green]{job_id} finished[/] in {s['wall_s']:.0f}s ({s['stop_reason']}): "
                      f"final deterministic eval return {ev['mean_return']:.1f}{verdict}")
        console.print(f"results: {run_dir}  (summary.json, metrics.csv, tb/, checkpoint/)")
        return 0
    console.print(f"[bold red]{job_id} ended {status}[/]; last log lines:")
    console.print("\n".join(client.get_job_logs(job_id).splitlines()[-40:]), markup=False)
    return 1


def print_status(st: dict) -> None:
    ls = st["learner"]
    if "error" in ls:
        console.print(f"[red]{ls['error']}[/]")
    else:
        console.print(
            f"[bold]{st['job_id']}[/]  learner {ls['device']}  updates {ls['updates']} "
            f"({ls['updates_per_s']:.0f}/s)  received {ls['received']}  inserted {ls['inserted']} "
            f"({ls['inserts_per_s']:.0f}/s)  buffer {ls['replay_size']}/{ls['replay_capacity']}  "
            f"policy v{ls['policy_version']}  lag {ls['mean_policy_lag']:.1f}  "
            f"rejected {ls['rejected_batches']}  gpu mem {ls['gpu_mem_allocated'] / 2**20:.0f} MiB")
    p = st.get("progress") or {}
    if p:
        console.print(f"eval return {_fmt(p.get('eval_return'))}  train return "
                      f"{_fmt(p.get('train_return'))}  t={p.get('time_s', 0):.0f}s")
    t = Table("actor", "pid", "steps", "steps/s", "acked", "return", "policy v", "push ms", "reconnects")
    for a in st["actors"]:
        if "error" in a and "steps" not in a:
            t.add_row(a["actor_id"], "-", "-", "-", "-", "-", "-", "-", a["error"])
            continue
        t.add_row(a["actor_id"], str(a["pid"]), str(a["steps"]), f"{a['steps_per_s']:.0f}",
                  str(a["acked"]), _fmt(a["mean_return"]), str(a["policy_version"]),
                  f"{a['push_latency_ms']:.1f}", str(a["reconnects"]))
    console.print(t)
