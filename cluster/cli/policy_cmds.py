"""`herd evaluate`, `herd export`, `herd plot`: what a run trained, run, written out or drawn."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from herd.jobs import UserError


def add_commands(sub) -> None:
    """evaluate, export, plot: their parsers, each handled by its cmd_ function."""
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
    s = sub.add_parser("plot", help="the evaluation return of runs against seconds and env steps, "
                       "in one picture; seeds of one config as a band")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (runs/<job>)")
    s.add_argument("-o", "--out", default="curves.png", metavar="FILE.png",
                   help="the picture to write (.png, .svg or .pdf; default curves.png)")
    s.set_defaults(fn=cmd_plot)


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


def cmd_plot(args) -> int:
    from herd.curves import PlotUnavailable, draw

    try:
        out = draw(args.runs, args.out)
    except (FileNotFoundError, PlotUnavailable) as e:
        print(f"herd: no plot: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {len(args.runs)} run(s), evaluation return against seconds and env steps")
    return 0


def run_policy_flags(s: argparse.ArgumentParser) -> None:
    """Which of a run directory's policies `evaluate` and `export` take."""
    g = s.add_mutually_exclusive_group()
    g.add_argument("--final", action="store_true", help="the run's last checkpoint, not its best "
                   "policy (the default: runs/<job>/best_policy.pb, where an evaluation finished)")
    g.add_argument("--best", action="store_true", help="the run's best policy, the default; an "
                   "error where no evaluation finished")
