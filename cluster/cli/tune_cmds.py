"""`herd tune` (a grid of jobs on Ray Tune) and `herd precompile` (a config's GPU update
compiled once on this machine, so that its jobs start warm)."""

from __future__ import annotations

import os
import sys

from herd import local
from herd.jobs import dashboard_url, no_cluster


def add_commands(sub) -> None:
    """tune, precompile: their parsers, each handled by its cmd_ function."""
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
    s = sub.add_parser("precompile", help="compile a config's GPU update once (warm cache for jobs)")
    s.add_argument("config", help="YAML job config")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override the config as `herd submit --set` does, e.g. --set learner.replay.batch_size=512")
    s.set_defaults(fn=cmd_precompile)


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
