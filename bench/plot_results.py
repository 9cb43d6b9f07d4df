"""Herd's Humanoid curves (the committed config's cold runs, humanoid-final-fast-s*-<machine>.json)
and RLlib's on one plot.

    python bench/plot_results.py [--machine nvidia-h200] [--runs 'humanoid-final-fast-s*']
    python bench/plot_results.py --family   # the learner family's seeds beside plain SAC's run
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.humanoid import plot

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = "humanoid-final-fast-s*"


def label(record: dict) -> str:
    """Herd's curve label: whether its job compiled the update itself (from its start-up)."""
    capture = (record.get("startup") or {}).get("capture_s")
    if capture is None:  # runs from before the start-up timeline existed
        return f"Herd, first evaluation at {record['evaluations'][0]['seconds']:.0f} s"
    return f"Herd, {'warm compile cache' if capture < 10 else 'compiled in the job'} (capture {capture:.0f} s)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--machine", default="nvidia-h200")
    p.add_argument("--runs", default=RUNS, help="which bench/results files to plot (a glob, less "
                   "the -<machine>.json tail)")
    p.add_argument("--family", action="store_true",
                   help="humanoid-family-s*-<machine>.json beside plain SAC's humanoid-<machine>.json")
    args = p.parse_args()
    if args.family:
        return plot_family(args.machine)
    curves = []
    for path in sorted(RESULTS.glob(f"{args.runs}-{args.machine}.json")):
        record = json.loads(path.read_text())[0]
        curves.append((f"seed {record['seed']}: {label(record)}", record["evaluations"]))
    if not curves:
        print(f"no {args.runs}-{args.machine}.json in {RESULTS}: nothing to plot")
        return 1
    title = f"Humanoid-v5 on {record['machine']}: Herd"
    rllib_path = RESULTS / f"rllib-{args.machine}.json"
    if rllib_path.exists():  # `make bench-rllib` writes it
        rllib = json.loads(rllib_path.read_text())[0]
        curves.append((f"{rllib.get('framework', 'RLlib SAC')}, {rllib['wall_s']:.0f} s budget",
                       rllib["evaluations"]))
        title += " vs RLlib SAC"
    out = RESULTS / f"humanoid-vs-rllib-{args.machine}.png"
    plot(curves, out, title)
    print(f"wrote {out}")
    return 0


def plot_family(machine: str) -> int:
    """Every seed of the learner family (configs/humanoid.yaml) and the plain-SAC run, one plot."""
    curves = []
    for path in sorted(RESULTS.glob(f"humanoid-family-s*-{machine}.json")):
        for record in json.loads(path.read_text()):
            curves.append((f"family, seed {record['seed']}", record["evaluations"]))
    plain = RESULTS / f"humanoid-{machine}.json"
    if plain.exists():
        curves.append(("plain SAC (configs/humanoid-plain.yaml settings, cold)",
                       json.loads(plain.read_text())[0]["evaluations"]))
    if not curves:
        print(f"no humanoid-family-s*-{machine}.json in {RESULTS}: nothing to plot")
        return 1
    out = RESULTS / f"humanoid-family-vs-plain-{machine}.png"
    plot(curves, out, f"Humanoid-v5 on {machine}: the learner family vs plain SAC")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
