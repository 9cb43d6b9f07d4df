"""`herd`: the command line of a Herd cluster (also `python -m cluster`)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
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

    local.join()
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
    submitted = time.time()  # the job's start-up timeline counts from here (summary.json)
    from actors.envs import EnvError
    from cluster.config import ConfigError, check_env, load_config
    from cluster.evaluate import CheckpointRefused

    try:
        cfg = load_config(args.config)
        check_env(cfg)
    except (ConfigError, EnvError) as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    env_vars = {"HERD_CONFIG_JSON": json.dumps(cfg.model_dump(mode="json")), "PYTHONUNBUFFERED": "1",
                "HERD_SUBMIT_UNIX": repr(submitted)}
    if args.actor_resources:
        from cluster.controller import ACTOR_RESOURCES_ENV

        try:
            res = json.loads(args.actor_resources)
            assert isinstance(res, dict) and all(isinstance(v, (int, float)) for v in res.values())
        except (ValueError, AssertionError):
            print(f"herd: --actor-resources must be a JSON object of numbers, e.g. "
                  f"'{{\"herd_worker\": 1}}', got {args.actor_resources!r}", file=sys.stderr)
            return 2
        env_vars[ACTOR_RESOURCES_ENV] = json.dumps(res)
    resume = None
    if args.resume:
        try:
            resume = check_resume(args.resume, cfg)
        except (FileNotFoundError, ConfigError, CheckpointRefused) as e:
            print(f"herd: {e}", file=sys.stderr)
            return 2
    client = job_client(args)
    if cfg.learner.device == "cuda" and not cluster_has_gpu():
        print("herd: learner.device is 'cuda' but the cluster has no GPU; use device: auto "
              "(falls back to the CPU) or add a GPU node", file=sys.stderr)
        return 2
    # the suffix keeps two jobs of one name submitted in the same second apart
    job_id = f"herd-{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    runs_dir = Path(args.runs_dir).resolve()
    is_local = "127.0.0.1" in dashboard_url(args)
    if cfg.learner.token and is_local:
        # the dashboard shows a job's env vars: hand the token over in a private file instead
        env_vars["HERD_CONFIG_JSON"] = json.dumps(
            cfg.model_copy(update={"learner": cfg.learner.model_copy(update={"token": None})})
            .model_dump(mode="json"))
        env_vars[TOKEN_FILE_ENV] = write_token_file(job_id, cfg.learner.token)
    python = sys.executable if is_local else "python"
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
            "env_vars": env_vars,
        },
    )
    print(f"submitted {job_id}" + (f" (resuming {resume})" if resume else ""))
    print(f"dashboard: {dashboard_url(args)}/#/jobs/{job_id}")
    print(f"results:   {runs_dir / job_id}")
    if args.follow:
        return follow(client, job_id, runs_dir / job_id)
    return 0


def check_resume(path: str, cfg) -> Path:
    """The checkpoint directory of runs/<job> (or the checkpoint dir itself), checked against
    the new config: the networks and the env must match what was saved."""
    from cluster.config import ConfigError, load_config
    from cluster.evaluate import load_checkpoint, resolve_checkpoint

    ckpt = resolve_checkpoint(path).resolve()
    load_checkpoint(ckpt)  # refused here, in one line, rather than in the learner's start-up
    old_file = ckpt.parent / "config.yaml"
    if old_file.is_file():
        old = load_config(old_file)
        for what, a, b in (("env.id", old.env.id, cfg.env.id),
                           ("learner.hidden_sizes", old.learner.hidden_sizes, cfg.learner.hidden_sizes)):
            if a != b:
                raise ConfigError(f"--resume {path}: the checkpoint was trained with {what}={a!r}, "
                                  f"this config has {b!r}")
    if cfg.run.save_replay and not (ckpt / "replay.pt").exists():
        print(f"herd: note: {ckpt} holds no replay.pt (its run had save_replay: false); the buffer "
              "starts empty", file=sys.stderr)
    return ckpt


TOKEN_FILE_ENV = "HERD_TOKEN_FILE"


def write_token_file(job_id: str, token: str) -> str:
    """A 0600 file the job's driver reads once and deletes (local clusters)."""
    folder = Path.home() / ".herd" / "secrets"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / job_id
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return str(path)


def cluster_has_gpu() -> bool:
    import ray

    local.join()
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
    import ray

    from cluster.live import print_status, watch_status

    ctl = controller(args.job)

    def fetch():
        try:
            return ray.get(ctl.status.remote(), timeout=30)
        except Exception:  # noqa: BLE001 -- the job ended and took its controller with it
            return None

    if args.watch and not args.json:
        return watch_status(fetch, args.watch)
    while True:
        st = fetch()
        if st is None:
            print(f"herd: {args.job}: the controller is gone (job ended)", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(st, default=str), flush=True)
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


def cmd_evaluate(args) -> int:
    from cluster.evaluate import CheckpointRefused, RenderUnavailable, evaluate_checkpoint

    try:
        out = evaluate_checkpoint(args.checkpoint, args.episodes, env_id=args.env, video=args.video,
                                  seed=args.seed)
    except (FileNotFoundError, CheckpointRefused) as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    except RenderUnavailable as e:
        print(f"herd: no video: {e}. Evaluating without one.", file=sys.stderr)
        out = evaluate_checkpoint(args.checkpoint, args.episodes, env_id=args.env, seed=args.seed)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{out['env']} policy v{out['policy_version']} from {out['checkpoint']}: "
          f"deterministic return {out['mean_return']:.1f} (min {out['min_return']:.1f}, "
          f"max {out['max_return']:.1f}, mean length {out['mean_length']:.0f}) over "
          f"{out['episodes']} episodes")
    if out.get("video"):
        print(f"video: {out['video']} ({out['frames']} frames)")
    return 0


def cmd_precompile(args) -> int:
    """Compile the config's learner update here once, so jobs start with a warm cache."""
    import numpy as np

    from actors.envs import EnvError
    from cluster.config import ConfigError, check_env, load_config
    from learner.service import pick_device

    try:
        cfg = load_config(args.config)
        d = check_env(cfg)
        device = pick_device(cfg.learner.device)
    except (ConfigError, EnvError, RuntimeError) as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    from learner.precompile import precompile

    seconds = precompile(cfg.learner, int(np.prod(d["obs_shape"])), int(np.prod(d["action_shape"])),
                         d["action_low"], d["action_high"], device)
    if not seconds:
        print("herd: nothing to precompile (the learner compiles only on CUDA with learner.compile: true)")
        return 0
    print(f"compiled and captured the {cfg.env.id} update (batch {cfg.learner.batch_size}, "
          f"amp {cfg.learner.amp}) in {seconds:.1f} s; jobs with these sizes start warm on this machine")
    return 0


def cmd_list(args) -> int:
    for job in job_client(args).list_jobs():
        if job.submission_id and job.submission_id.startswith("herd-"):
            print(f"{job.submission_id}  {job.status}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="herd", description="Distributed SAC on Ray: actors, gRPC, GPU learner")
    p.add_argument("--address", help="Ray dashboard URL (default $HERD_DASHBOARD_URL or "
                   f"{local.DEFAULT_DASHBOARD})")
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
    s.add_argument("--actor-resources", metavar="JSON",
                   help='Ray custom resources every env actor needs, e.g. \'{"herd_worker": 1}\' '
                        "to keep actors on CPU worker nodes started with --resources")
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("status", help="rates, returns, buffer, updates, lag of a running job")
    s.add_argument("job")
    s.add_argument("--json", action="store_true")
    s.add_argument("--watch", type=float, default=0, metavar="SECONDS",
                   help="redraw in place every SECONDS until the job ends (Ctrl-C to leave)")
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
    s = sub.add_parser("precompile", help="compile a config's GPU update once (warm cache for jobs)")
    s.add_argument("config", help="YAML job config")
    s.set_defaults(fn=cmd_precompile)
    s = sub.add_parser("evaluate", help="deterministic episodes from a checkpoint (optionally an mp4)")
    s.add_argument("checkpoint", help="runs/<job> or runs/<job>/checkpoint")
    s.add_argument("--episodes", type=int, default=5)
    s.add_argument("--video", metavar="OUT.mp4",
                   help="record the episodes (needs MUJOCO_GL=egl or osmesa and imageio-ffmpeg)")
    s.add_argument("--env", help="env id (default: the run's config.yaml)")
    s.add_argument("--seed", type=int, default=10_000)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_evaluate)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    local.align_auth_mode()
    return args.fn(args)
