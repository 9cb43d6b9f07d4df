"""`herd`: the command line of a Herd cluster (also `python -m cluster`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from cluster import local

ROOT = Path(__file__).resolve().parent.parent
EXCLUDES = [".venv", ".git", "runs", ".devwheels", "bench/results", "**/__pycache__", ".pytest_cache"]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def dashboard_url(args) -> str:
    return args.address or os.environ.get("HERD_DASHBOARD_URL", local.DEFAULT_DASHBOARD)


def job_client(args):
    from ray.job_submission import JobSubmissionClient

    url = dashboard_url(args)
    if not local.dashboard_up(url):
        sys.exit(f"herd: no Ray dashboard at {url}; start a cluster with `make cluster-up`")
    return JobSubmissionClient(url)


def controller(job_id: str):
    import ray

    from cluster.controller import NAMESPACE, controller_name

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
                 logging_level="ERROR", log_to_driver=False)
    try:
        return ray.get_actor(controller_name(job_id), namespace=NAMESPACE)
    except ValueError:
        sys.exit(f"herd: job {job_id} has no running controller (finished, or not a Herd job)")


# ---- commands ----
def cmd_up(args) -> int:
    url = local.up(port=args.port, dashboard_port=args.dashboard_port, num_cpus=args.num_cpus)
    print(f"Ray head up; dashboard at {url}")
    return 0


def cmd_down(args) -> int:
    local.down()
    print("Ray stopped")
    return 0


def cmd_submit(args) -> int:
    from cluster.config import ConfigError, check_env, load_config
    from actors.envs import EnvError

    try:
        cfg = load_config(args.config)
        check_env(cfg)
    except (ConfigError, EnvError) as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    resume = None
    if args.resume:
        resume = Path(args.resume).resolve() / "checkpoint"
        if not (resume / "model.pt").exists():
            print(f"herd: {args.resume} holds no checkpoint (checkpoint/model.pt)", file=sys.stderr)
            return 2
    client = job_client(args)
    if cfg.learner.device == "cuda" and not cluster_has_gpu():
        print("herd: learner.device is 'cuda' but the cluster has no GPU; use device: auto "
              "(falls back to the CPU) or add a GPU node", file=sys.stderr)
        return 2
    job_id = f"herd-{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    runs_dir = Path(args.runs_dir).resolve()
    python = sys.executable if "127.0.0.1" in dashboard_url(args) else "python"
    entry = f"{python} -m cluster.driver --job-id {job_id} --runs-dir {runs_dir}"
    if resume:
        entry += f" --resume {resume}"
    submit_with_retry(
        client,
        entrypoint=entry,
        submission_id=job_id,
        runtime_env={
            "working_dir": str(ROOT),
            "excludes": EXCLUDES,
            "env_vars": {"HERD_CONFIG_JSON": json.dumps(cfg.model_dump(mode="json")),
                         "PYTHONUNBUFFERED": "1"},
        },
    )
    print(f"submitted {job_id}")
    print(f"dashboard: {dashboard_url(args)}/#/jobs/{job_id}")
    print(f"results:   {runs_dir / job_id}")
    if args.follow:
        return follow(client, job_id, runs_dir / job_id)
    return 0


def cluster_has_gpu() -> bool:
    import ray

    from cluster.controller import NAMESPACE

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
                 logging_level="ERROR", log_to_driver=False)
    return ray.cluster_resources().get("GPU", 0) >= 1


def submit_with_retry(client, wait_s: float = 90.0, **kwargs) -> None:
    """A fresh head's job agent registers a few seconds after the dashboard answers: wait."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client.submit_job(**kwargs)
            return
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def follow(client, job_id: str, run_dir: Path) -> int:
    from cluster.live import follow_job

    return follow_job(client, job_id, run_dir)


def cmd_status(args) -> int:
    from cluster.live import print_status

    ctl = controller(args.job)
    import ray

    while True:
        st = ray.get(ctl.status.remote())
        if args.json:
            print(json.dumps(st, default=str))
        else:
            print_status(st)
        if not args.watch:
            return 0
        time.sleep(args.watch)


def cmd_scale(args) -> int:
    import ray

    out = ray.get(controller(args.job).scale.remote(args.actors))
    print(f"{args.job}: {out['actors']} actors" + (f" (removed {', '.join(out['removed'])})"
                                                   if out["removed"] else ""))
    return 0


def cmd_stop(args) -> int:
    import ray

    try:
        ray.get(controller(args.job).request_stop.remote())
        print(f"{args.job}: stop requested; the driver saves a final checkpoint and exits")
    except SystemExit:
        job_client(args).stop_job(args.job)
        print(f"{args.job}: no controller; Ray job stopped")
    return 0


def cmd_logs(args) -> int:
    client = job_client(args)
    if not args.follow:
        print(client.get_job_logs(args.job), end="")
        return 0
    import asyncio

    async def tail():
        async for lines in client.tail_job_logs(args.job):
            print(lines, end="", flush=True)

    asyncio.run(tail())
    return 0


def cmd_list(args) -> int:
    for job in job_client(args).list_jobs():
        if job.submission_id and job.submission_id.startswith("herd-"):
            print(f"{job.submission_id}  {job.status}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="herd", description="Distributed SAC on Ray: actors, gRPC, GPU learner")
    p.add_argument("--address", help="Ray dashboard URL (default $HERD_DASHBOARD_URL or %s)"
                   % local.DEFAULT_DASHBOARD)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("up", help="start a local Ray head (dashboard on 127.0.0.1:8265)")
    s.add_argument("--port", type=int, default=6379)
    s.add_argument("--dashboard-port", type=int, default=8265)
    s.add_argument("--num-cpus", type=int, default=None)
    s.set_defaults(fn=cmd_up)
    sub.add_parser("down", help="stop the local Ray cluster").set_defaults(fn=cmd_down)
    s = sub.add_parser("submit", help="submit a training job (a Ray Job)")
    s.add_argument("config")
    s.add_argument("--follow", action="store_true", help="show live progress until it ends")
    s.add_argument("--resume", help="runs/<job> directory whose checkpoint to continue from")
    s.add_argument("--runs-dir", default="runs")
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("status", help="rates, returns, buffer, updates, lag of a running job")
    s.add_argument("job")
    s.add_argument("--json", action="store_true")
    s.add_argument("--watch", type=float, default=0, metavar="SECONDS")
    s.set_defaults(fn=cmd_status)
    s = sub.add_parser("scale", help="change the number of env actors of a running job")
    s.add_argument("job")
    s.add_argument("--actors", type=int, required=True)
    s.set_defaults(fn=cmd_scale)
    s = sub.add_parser("stop", help="stop a job (final checkpoint and summary are written)")
    s.add_argument("job")
    s.set_defaults(fn=cmd_stop)
    s = sub.add_parser("logs", help="a job's driver log")
    s.add_argument("job")
    s.add_argument("--follow", action="store_true")
    s.set_defaults(fn=cmd_logs)
    sub.add_parser("list", help="Herd jobs on the cluster").set_defaults(fn=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    local.align_auth_mode()
    return args.fn(args)
