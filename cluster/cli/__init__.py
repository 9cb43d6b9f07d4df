"""`herd`: the command line of a Herd cluster (also `python -m herd`). Each command parses its
flags and calls the job functions (herd.jobs, herd.submission) that the Python API calls."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from herd import jobs, local
from herd.jobs import NotRunning, UserError, dashboard_url, no_cluster
from herd.teardown import DEFAULT_GRACE_S


# ---- commands ----
def cmd_up(args) -> int:
    running = f"http://127.0.0.1:{args.dashboard_port}"
    if local.dashboard_up(running):  # up() would return at once: say so, not what a start did
        print(f"Ray head already up; dashboard at {running} (`herd down` stops it)")
        return 0
    preload = local.preload_default() if args.preload is None else args.preload
    try:
        url = local.up(port=args.port, dashboard_port=args.dashboard_port, num_cpus=args.num_cpus,
                       metrics_port=args.metrics_port, client_port=args.client_port,
                       agent_port=args.agent_port, preload=preload)
    except RuntimeError as e:
        print(f"herd: {e}", file=sys.stderr)
        return 1
    print(f"Ray head up; dashboard at {url} (everything Ray serves listens on 127.0.0.1)")
    if preload:
        print("its prestarted workers have imported torch & co.")
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        print(f"token auth on: the token is in {os.environ.get('RAY_AUTH_TOKEN_PATH')} (herd uses "
              "it by itself; curl: -H \"Authorization: Bearer $(cat THAT_FILE)\")")
        print("the dashboard asks for that token once per browser: `herd dashboard` says how")
    else:
        print("herd: warning: RAY_AUTH_MODE=disabled: any local user can run code on this cluster",
              file=sys.stderr)
    return 0


def cmd_dashboard(args) -> int:
    from herd import dashboard

    return dashboard.main(args.address, open_browser=args.open, token=args.token, env=args.env)


def cmd_down(args) -> int:
    from herd.teardown import down_cluster

    if args.grace < 0:
        raise UserError(f"--grace must be 0 or more seconds, got {args.grace:g}")
    jobs = down_cluster(args.grace, args.force, say=lambda line: print(line, flush=True))
    if jobs is None:
        print(f"herd: no cluster started by `herd up` on record ({local.cluster_file()}); "
              "nothing stopped (`ray stop` would stop every Ray cluster of this user)",
              file=sys.stderr)
        return 0
    print("Ray stopped (the cluster `herd up` started" + (f"; {len(jobs)} job(s) above)" if jobs else
                                                          "; no job was running)"))
    return 0


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


def cmd_evaluate(args) -> int:
    from herd.evaluation import CheckpointRefused, RenderUnavailable, evaluate_checkpoint

    if args.episodes < 1:
        raise UserError(f"--episodes must be 1 or more, got {args.episodes}")
    working_dir = existing_dir("--working-dir", args.working_dir)
    one_file_no_choice(args.checkpoint, args)
    if args.video:
        check_video_path(args.video)
    try:
        out = evaluate_checkpoint(args.checkpoint, args.episodes, env_id=args.env, video=args.video,
                                  seed=args.seed, working_dir=working_dir, best=which_policy(args))
    except (FileNotFoundError, ValueError, CheckpointRefused) as e:
        print(f"herd: {first_line_with_hint(e)}", file=sys.stderr)
        return 2
    except RenderUnavailable as e:  # asked for a video: none is a failure, not a quiet fallback
        print(f"herd: no video: {str(e).strip().splitlines()[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
        return 0
    if out["which"] == "final" and which_policy(args) is None and not args.env:
        print(f"herd: note: {args.checkpoint} has no best_policy.pb (no periodic evaluation "
              "finished): evaluating its final checkpoint", file=sys.stderr)
    print(f"{out['env']} policy v{out['policy_version']} from {out['checkpoint']}"
          f"{took(out['which'], Path(args.checkpoint).is_file())}: "
          f"deterministic return {out['mean_return']:.1f} (min {out['min_return']:.1f}, "
          f"max {out['max_return']:.1f}, mean length {out['mean_length']:.0f}) over "
          f"{out['episodes']} episodes")
    if out.get("heldout_mean_return") is not None:  # env.randomize: the nominal model's, then these
        print(f"held-out randomizations (env.randomize.heldout_seed): return "
              f"{out['heldout_mean_return']:.1f} (min {out['heldout_min_return']:.1f}, max "
              f"{out['heldout_max_return']:.1f}) over {out['heldout_episodes']} episodes")
    if out.get("mean_contact_cost") is not None:  # v5's contact penalty, which v4's returns lack
        print(f"contact cost {out['mean_contact_cost']:.1f} per episode (summed -reward_contact; "
              f"return without it {out['mean_return'] + out['mean_contact_cost']:.1f})")
    if out.get("video"):
        print(f"video: {out['video']} ({out['frames']} frames, MUJOCO_GL={os.environ.get('MUJOCO_GL')})")
    return 0


def cmd_export(args) -> int:
    from herd.evaluation import CheckpointRefused
    from herd.export import ExportUnavailable, export_policy, sidecar

    one_file_no_choice(args.path, args)
    try:
        out = export_policy(args.path, args.format, args.out, best=which_policy(args),
                            working_dir=existing_dir("--working-dir", args.working_dir))
    except (FileNotFoundError, ValueError, CheckpointRefused, ExportUnavailable) as e:
        print(f"herd: {first_line_with_hint(e)}", file=sys.stderr)
        return 2
    meta = json.loads(sidecar(out).read_text())
    print(f"wrote {out} and {sidecar(out)}: policy v{meta['version']} from {meta['source']}"
          f"{took(meta.get('which'), Path(args.path).is_file())}")
    print(f"`herd evaluate {out}` runs it; herd.load_policy loads it")
    return 0


def which_policy(args) -> bool | None:
    """A run's policy as --best / --final ask: True, False, or None (the best where one was kept)."""
    return False if args.final else (True if args.best else None)


def took(which: str | None, one_file: bool = False) -> str:
    """Which of a run's policies was taken, for a line that names its file; of one policy file
    (an export, best_policy.pb, model.pt), which policy it was made from."""
    if one_file:
        return {"best": " (made from the run's best policy)",
                "final": " (made from the run's final checkpoint)"}.get(which, "")
    return {"best": " (the run's best policy; --final for its last checkpoint)",
            "final": " (the run's final checkpoint)"}.get(which, "")


def one_file_no_choice(path: str, args) -> None:
    """--final / --best choose among a run folder's policies: of one file they mean nothing."""
    if (args.final or args.best) and Path(path).is_file():
        flag = "--final" if args.final else "--best"
        raise UserError(f"{flag} chooses among a run folder's policies; {path} is one policy file "
                        f"(give the run folder, runs/<job>, with {flag})")


def check_video_path(video: str) -> None:
    """--video's file must be writable as asked: not a folder, under folders (made if missing)
    rather than under a file. Checked before any episode runs."""
    p = Path(video).expanduser()
    if p.is_dir():
        raise UserError(f"--video {video}: that is a folder; name the file, e.g. {p / 'episodes.mp4'}")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"--video {video}: {parent} is a file, not a folder")
            return


def existing_dir(flag: str, path: str | None) -> str | None:
    if path and not Path(path).expanduser().is_dir():
        raise UserError(f"{flag} {path}: no such directory")
    return path


def first_line_with_hint(e: Exception) -> str:
    """An error's first line; an env package that cannot be imported says how to name it."""
    line = str(e).strip().splitlines()[0]
    if "env.module" in line and "cannot be imported" in line:
        line += ": pass --working-dir DIR, the folder that holds that package"
    return line


def cmd_precompile(args) -> int:
    """Compile the config's learner update here once, so jobs start with a warm cache."""
    from herd.actors.envs import EnvError
    from herd.config import ConfigError, check_env, load_config
    from herd.learner.build import pick_device

    try:
        cfg = load_config(args.config, args.set or ())
        d = check_env(cfg)
        device = pick_device(cfg.learner.compute.device)
    except (ConfigError, EnvError, RuntimeError) as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    from herd.learner.build import precompile
    from herd.proto import codec

    seconds = precompile(cfg.learner, codec.spec_to_proto(cfg.env.id, **d), device)
    if not seconds:
        print("herd: nothing to precompile (the learner compiles only on CUDA with learner.compute.compile: true)")
        return 0
    print(f"compiled and captured the {cfg.env.id} update (batch {cfg.learner.replay.batch_size}, "
          f"amp {cfg.learner.compute.amp}) in {seconds:.1f} s; jobs with these sizes start warm on this machine")
    return 0


def cmd_list(args) -> int:
    listed = jobs.list_jobs(args.address)
    for job in listed:
        print(f"{job['submission_id']}  {job['status']}")
    if not listed:
        print(f"no Herd jobs on the cluster at {dashboard_url(args.address)} yet "
              "(`herd submit CONFIG` starts one)")
    return 0


def cmd_plot(args) -> int:
    from herd.curves import PlotUnavailable, draw

    try:
        out = draw(args.runs, args.out)
    except (FileNotFoundError, PlotUnavailable) as e:
        print(f"herd: no plot: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {len(args.runs)} run(s), evaluation return against seconds and env steps")
    return 0


def cmd_tune(args) -> int:
    from herd import tune
    from herd.config import ConfigError

    if not os.environ.get("RAY_ADDRESS") and not local.dashboard_up(dashboard_url(args.address)):
        raise no_cluster(dashboard_url(args.address))  # Ray's "auto" would take any cluster it finds
    try:
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        records = tune.run(args.config, args.grid, seeds, args.seconds, args.concurrent, args.name,
                           args.runs_dir, args.out, command="herd " + " ".join(sys.argv[1:]),
                           append=args.append, sets=args.set)
    except ConfigError as e:
        print(f"herd: {e}", file=sys.stderr)
        return 2
    return 1 if any("error" in rec for rec in records) else 0


JOB_HELP = "the job's id, herd-<name>-<time>-<hex> (`herd list` names them)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="herd", description="Distributed SAC on Ray: actors, gRPC, GPU learner")
    p.add_argument("--address", help="Ray dashboard URL (default $HERD_DASHBOARD_URL, else the "
                   f"one `herd up` started, else {local.DEFAULT_DASHBOARD})")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("up", help="start a local Ray head (dashboard on 127.0.0.1:8265)")
    s.add_argument("--port", type=int, default=6379, help="the GCS port: the cluster's address "
                   "is 127.0.0.1:PORT (default 6379)")
    s.add_argument("--dashboard-port", type=int, default=8265,
                   help="the Ray dashboard's port (default 8265); later commands find it by themselves")
    s.add_argument("--num-cpus", type=int, default=None, help="CPUs the cluster offers to jobs "
                   "(default: every core of this machine)")
    s.add_argument("--metrics-port", type=int, default=8080,
                   help="the port of Ray's Prometheus metrics (default 8080)")
    s.add_argument("--client-port", type=int, default=10001, help="Ray client server port")
    s.add_argument("--agent-port", type=int, default=52365, help="Ray dashboard agent's HTTP port")
    s.add_argument("--preload", action=argparse.BooleanOptionalAction, default=None,
                   help="the workers Ray prestarts import torch & co. as they start, and `up` "
                   "returns once they are done (herd/preload.py); default: on where a GPU is")
    s.set_defaults(fn=cmd_up)
    s = sub.add_parser("down", help="wind down its running jobs (summary, final checkpoint, books), "
                       "then stop the Ray cluster `herd up` started (no other)")
    s.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="SECONDS",
                   help="how long the jobs' wind-down may take before the cluster goes (default "
                   f"{DEFAULT_GRACE_S:g}); a replay buffer that cannot be saved in it is left out")
    s.add_argument("--force", action="store_true", help="stop at once, without winding jobs down "
                   "(each job's line says what it loses)")
    s.set_defaults(fn=cmd_down)
    s = sub.add_parser("dashboard", help="the Ray dashboard's URL and how to log into it")
    s.add_argument("--open", action="store_true", help="also open it in this machine's web browser")
    s.add_argument("--token", action="store_true", help="print only the cluster's token (to paste)")
    s.add_argument("--env", action="store_true", help="print the shell line that makes Ray's CLI "
                   "(`ray job list`, ...) use the token and this dashboard: eval \"$(herd dashboard --env)\"")
    s.set_defaults(fn=cmd_dashboard)
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
    s = sub.add_parser("plot", help="the evaluation return of runs against seconds and env steps, "
                       "in one picture; seeds of one config as a band")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (runs/<job>)")
    s.add_argument("-o", "--out", default="curves.png", metavar="FILE.png",
                   help="the picture to write (.png, .svg or .pdf; default curves.png)")
    s.set_defaults(fn=cmd_plot)
    s = sub.add_parser("precompile", help="compile a config's GPU update once (warm cache for jobs)")
    s.add_argument("config", help="YAML job config")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override the config as `herd submit --set` does, e.g. --set learner.replay.batch_size=512")
    s.set_defaults(fn=cmd_precompile)
    s = sub.add_parser("tune", help="a grid of jobs on Ray Tune (each trial one job, fixed budget)")
    s.add_argument("config", help="YAML job config the grid varies")
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...", required=True,
                   help="repeatable, e.g. learner.replay.batch_size=512,2048")
    s.add_argument("--seeds", type=int, default=1, help="trials per grid point (seeds 1..N)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override the config for every trial, e.g. --set actors.num_actors=4")
    s.add_argument("--first-seed", type=int, default=1, help="seeds K..K+N-1 instead (a sweep split over calls)")
    s.add_argument("--append", action="store_true",
                   help="keep the trials already in --out (other seeds or cells of the same sweep): "
                        "the table and heatmap cover them all")
    s.add_argument("--seconds", type=float, default=120, help="wall-clock budget per trial")
    s.add_argument("--concurrent", type=int, default=1, help="trials at once (a GPU is shared 1/N)")
    s.add_argument("--name", default="sweep", help="runs/tune-<name>/")
    s.add_argument("--runs-dir", default="runs", help="the folder of the trials' run folders (default ./runs)")
    s.add_argument("--out", default=None, help="JSON path (default runs/tune-<name>/results.json)")
    s.set_defaults(fn=cmd_tune)
    s = sub.add_parser("evaluate", help="deterministic episodes from a checkpoint (optionally an mp4)")
    s.add_argument("checkpoint", help="runs/<job>, its checkpoint/ or model.pt, best_policy.pb, or a "
                   "`herd export` file (.onnx, .torchscript.pt, .safetensors)")
    s.add_argument("--episodes", type=int, default=5, help="deterministic episodes to run (default 5)")
    s.add_argument("--video", metavar="OUT.mp4",
                   help="record the episodes, a pixel env's as its camera sees them (needs "
                   "imageio-ffmpeg; rendered offscreen with MUJOCO_GL, else EGL, else OSMesa); "
                   "no video is an error")
    s.add_argument("--env", help="env id (default: the run's config.yaml)")
    s.add_argument("--working-dir", metavar="DIR", help="the folder holding the env's own package "
                   "(env.module); default: the one the job was submitted with (runs/<job>/code.json)")
    s.add_argument("--seed", type=int, default=10_000, help="the first episode's env seed, the next "
                   "ones count up (default 10000)")
    s.add_argument("--json", action="store_true", help="the result as one JSON object")
    run_policy_flags(s)
    s.set_defaults(fn=cmd_evaluate)
    s = sub.add_parser("export", help="write a run's policy as ONNX, TorchScript or safetensors (+ JSON)")
    s.add_argument("path", help="runs/<job>, its checkpoint/ or model.pt, or best_policy.pb")
    s.add_argument("--format", required=True, choices=["onnx", "torchscript", "safetensors"],
                   help="the file's kind: onnx, torchscript or safetensors")
    run_policy_flags(s)
    s.add_argument("--out", default=None, help="file to write (default runs/<job>/export/policy.EXT, "
                   "with --final policy-final.EXT)")
    s.add_argument("--working-dir", metavar="DIR", help="the folder holding the env's own package "
                   "(env.module); default: the one the job was submitted with (runs/<job>/code.json)")
    s.set_defaults(fn=cmd_export)
    return p


def run_policy_flags(s: argparse.ArgumentParser) -> None:
    """Which of a run directory's policies `evaluate` and `export` take."""
    g = s.add_mutually_exclusive_group()
    g.add_argument("--final", action="store_true", help="the run's last checkpoint, not its best "
                   "policy (the default: runs/<job>/best_policy.pb, where an evaluation finished)")
    g.add_argument("--best", action="store_true", help="the run's best policy, the default; an "
                   "error where no evaluation finished")


_following: str | None = None
"""The job `herd submit --follow` shows, once it was submitted."""


def _leave(signum, frame) -> None:
    """Ctrl-C in --watch / --follow leaves at once (the job goes on, and a followed one says so).
    A hard exit: a KeyboardInterrupt raised inside Ray's or gRPC's calls was swallowed there or
    surfaced as another error (seen in CI: a watch that never ended, a follow that exited 1)."""
    sys.stdout.flush()
    print(file=sys.stderr, flush=True)
    if _following:
        print(f"Stopped following; job {_following} keeps running: `herd stop {_following}` stops "
              f"it, `herd logs {_following} --follow` watches again", file=sys.stderr, flush=True)
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    local.align_auth_mode()
    local.align_loopback()
    if getattr(args, "follow", False) or getattr(args, "watch", 0):
        signal.signal(signal.SIGINT, _leave)
    try:
        return args.fn(args)
    except KeyboardInterrupt:  # Ctrl-C in --watch / --follow: leave quietly (the job goes on)
        print(file=sys.stderr)
        return 130
    except NotRunning as e:
        print(f"herd: {e}", file=sys.stderr)
        return 3
    except (UserError, local.NotAuthorized, ConnectionError) as e:
        print(f"herd: {str(e).strip().splitlines()[0]}", file=sys.stderr)
        return 2
