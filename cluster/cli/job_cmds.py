"""`herd submit`, `status`, `scale`, `stop`, `logs`, `list`: a job's life on the cluster. Each
handler parses its flags and calls herd.submission / herd.jobs, as the Python API does."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from herd import jobs
from herd.cli.policy_cmds import first_line_with_hint
from herd.jobs import NotRunning, UserError, dashboard_url

JOB_HELP = "the job's id, herd-<name>-<time>-<hex> (`herd list` names them)"


def add_commands(sub) -> None:
    """submit, status, scale, stop, logs, list: their parsers, each handled by its cmd_ function."""
    s = sub.add_parser("submit", help="submit a training job (a Ray Job)")
    s.add_argument("config", help="YAML job config (configs/*.yaml, examples/*/*.yaml or your own); a "
                   "relative path not found here is looked for in Herd's source tree")
    s.add_argument("--follow", action="store_true", help="show live progress until it ends")
    s.add_argument("--resume", help="runs/<job> directory whose checkpoint to continue from")
    s.add_argument("--runs-dir", default="runs", help="the folder that gets the job's <job>/ (checkpoints, "
                   "best policy, summary.json, metrics); its absolute path here is where the driver "
                   "writes on the cluster's head (default: ./runs)")
    s.add_argument("--actor-resources", metavar="JSON",
                   help='Ray custom resources every env actor needs, e.g. \'{"herd_worker": 1}\' '
                        "to keep actors on CPU worker nodes started with --resources")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, validated like the YAML (repeatable), "
                        "e.g. --set learner.replay.batch_size=64")
    s.add_argument("--seed", type=int, default=None,
                   help="the job's one seed (run.seed): learner, actors and evaluations derive theirs")
    s.add_argument("--name", default=None, help="the job's name (run.name): herd-<name>-<time>")
    s.add_argument("--working-dir", default=None, metavar="DIR",
                   help="your code, sent to every node and the job's working directory (Ray runtime_env)")
    s.add_argument("--py-modules", action="append", default=[], metavar="PATH",
                   help="a package directory or wheel of yours, importable on every node (repeatable)")
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("status", help="rates, returns, buffer, updates, lag of a running job; an "
                       "ended job's final status (a failed one's reason: exit 3)")
    s.add_argument("job", help=JOB_HELP)
    s.add_argument("--json", action="store_true", help="the whole status as one JSON object (every "
                   "field: docs/status.md)")
    s.add_argument("--watch", type=float, default=0, metavar="SECONDS",
                   help="redraw in place every SECONDS until the job ends (Ctrl-C to leave); "
                   "piped, a block per refresh")
    s.set_defaults(fn=cmd_status)
    s = sub.add_parser("scale", help="change the number of env actors of a running job")
    s.add_argument("job", help=JOB_HELP)
    s.add_argument("--actors", type=int, required=True, metavar="N", help="the env actors the job "
                   "is to have: 1 or more (0 where the config sets run.start_without_actors)")
    s.set_defaults(fn=cmd_scale)
    s = sub.add_parser("stop", help="stop a job (final checkpoint and summary are written)")
    s.add_argument("job", help=JOB_HELP)
    s.set_defaults(fn=cmd_stop)
    s = sub.add_parser("logs", help="a job's driver log")
    s.add_argument("job", help=JOB_HELP)
    s.add_argument("--follow", action="store_true", help="keep printing new lines until the job ends")
    s.set_defaults(fn=cmd_logs)
    sub.add_parser("list", help="Herd jobs on the cluster").set_defaults(fn=cmd_list)




def cmd_submit(args) -> int:
    from herd.actors.envs import EnvError
    from herd.config import ConfigError
    from herd.evaluation import CheckpointRefused
    from herd.submission import stop_rule, submit

    try:
        job = submit(args.config, sets=args.set, seed=args.seed, name=args.name, address=args.address,
                     runs_dir=args.runs_dir, working_dir=args.working_dir, py_modules=args.py_modules,
                     resume=args.resume, actor_resources=actor_resources(args.actor_resources),
                     warn=lambda line: print(f"herd: {line}", file=sys.stderr))
    except (ConfigError, EnvError, FileNotFoundError, CheckpointRefused) as e:
        print(f"herd: {first_line_with_hint(e) if isinstance(e, EnvError) else e}", file=sys.stderr)
        return 2
    print(f"submitted {job.job_id}" + (f" (resuming {job.resume})" if job.resume else ""))
    print(f"dashboard: {dashboard_url(args.address)}/#/jobs/{job.job_id}")
    print(f"results:   {job.run_dir}")
    print(f"ends:      {stop_rule(job.cfg)}")
    if args.follow:
        return follow(job.client, job.job_id, job.run_dir)
    return 0


def actor_resources(text: str | None) -> dict | None:
    """--actor-resources' JSON object of numbers."""
    if text is None:
        return None
    try:
        res = json.loads(text)
        assert isinstance(res, dict) and all(isinstance(v, (int, float)) for v in res.values())
    except (ValueError, AssertionError):
        raise UserError(f"--actor-resources must be a JSON object of numbers, e.g. "
                        f"'{{\"herd_worker\": 1}}', got {text!r}") from None
    return res


def follow(client, job_id: str, run_dir: Path) -> int:
    global _following
    from herd.live import follow_job

    _following = job_id
    return follow_job(client, job_id, run_dir)


def cmd_status(args) -> int:
    from herd.live import print_ended, print_status, watch_status

    try:
        fetch = jobs.status_fetch(args.job, args.address)
    except NotRunning:
        final = jobs.ended_status(args.job, args.address)
        if final is None or final["state"] == "FAILED":  # starting; or failed: why, in one line (exit 3)
            raise
        if args.json:
            print(json.dumps(final, default=str))
        else:
            print_ended(final)
        return 0
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
    out = jobs.scale(args.job, args.actors, address=args.address)
    line = f"{args.job}: {out['actors']} actors" + scaled_down(out)
    if out.get("waiting"):
        line += "; " + waiting_words(len(out["waiting"]), out["cpus_per_actor"], out["cpus_free"])
    print(line)
    return 0


def waiting_words(n: int, need: float, free: float) -> str:
    """Why n actors of a scale have not started, in words that add up: Ray's count of free CPUs
    is taken as it places the actors this scale started, before they hold theirs."""
    if free >= need:
        return (f"{n} waiting for CPUs (each needs {need:g}; {free:g} free before the actors this "
                "scale started took theirs): they start when CPUs free up or nodes join")
    return (f"{n} waiting for CPUs (each needs {need:g}, {free:g} free): they start when CPUs "
            "free up or nodes join")


def scaled_down(out: dict) -> str:
    """What a scale-down removed, in a few words: counts, never one name per actor."""
    stopped, cancelled = out.get("removed") or 0, out.get("cancelled") or 0
    if isinstance(stopped, list):  # a controller of an older Herd: the removed actors' names
        stopped = len(stopped)
    parts = [f"{stopped} stopped, their steps delivered"] * bool(stopped)
    parts += [f"{cancelled} cancelled before they started"] * bool(cancelled)
    return f" ({'; '.join(parts)})" if parts else ""


def cmd_stop(args) -> int:
    why = jobs.stop(args.job, address=args.address)
    if why is None:
        print(f"{args.job}: stop requested; the driver saves a final checkpoint and exits")
    else:  # nothing has trained yet: no checkpoint to write
        print(f"{args.job}: stopped before its controller was up ({why})")
    return 0


ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]"  # colour and cursor codes (Ray's worker prefixes)


def cmd_logs(args) -> int:
    import re

    client, _ = jobs.job_info(args.job, args.address)
    plain = (lambda text: re.sub(ANSI, "", text)) if not sys.stdout.isatty() else (lambda text: text)
    if not args.follow:
        print(plain(client.get_job_logs(args.job)), end="")
        return 0
    import asyncio

    async def tail():
        async for lines in client.tail_job_logs(args.job):
            print(plain(lines), end="", flush=True)

    asyncio.run(tail())
    return 0


def cmd_list(args) -> int:
    listed = jobs.list_jobs(args.address)
    for job in listed:
        print(f"{job['submission_id']}  {job['status']}")
    if not listed:
        print(f"no Herd jobs on the cluster at {dashboard_url(args.address)} yet "
              "(`herd submit CONFIG` starts one)")
    return 0


_following: str | None = None
"""The job `herd submit --follow` shows, once it was submitted."""


def leave(signum, frame) -> None:
    """Ctrl-C in --watch / --follow leaves at once (the job goes on, and a followed one says so).
    A hard exit: a KeyboardInterrupt raised inside Ray's or gRPC's calls was swallowed there or
    surfaced as another error (seen in CI: a watch that never ended, a follow that exited 1)."""
    sys.stdout.flush()
    print(file=sys.stderr, flush=True)
    if _following:
        print(f"Stopped following; job {_following} keeps running: `herd stop {_following}` stops "
              f"it, `herd logs {_following} --follow` watches again", file=sys.stderr, flush=True)
    os._exit(130)
