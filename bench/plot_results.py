"""Herd's Humanoid curves and RLlib's on one plot, from the JSON the benches wrote.

    python bench/plot_results.py [--machine nvidia-h200]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.humanoid import plot  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--machine", default="nvidia-h200")
    args = p.parse_args()
    curves = []
    for name, label in ((f"humanoid-warm-{args.machine}.json", "Herd, warm compile cache"),
                        (f"humanoid-{args.machine}.json", "Herd, cold start (compiles in the job)")):
        if (RESULTS / name).exists():
            curves.append((label, json.loads((RESULTS / name).read_text())[0]["evaluations"]))
    rllib = json.loads((RESULTS / f"rllib-{args.machine}.json").read_text())[0]
    curves.append(("RLlib 2.60 SAC", rllib["evaluations"]))
    out = RESULTS / f"humanoid-vs-rllib-{args.machine}.png"
    plot(curves, out, f"Humanoid-v5 on {rllib['machine']}: Herd vs RLlib SAC (same session)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
