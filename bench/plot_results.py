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
    p.add_argument("--herd", default=None, help="Herd JSON (default: humanoid-long-<machine>.json)")
    args = p.parse_args()
    herd = json.loads(Path(args.herd or RESULTS / f"humanoid-long-{args.machine}.json").read_text())[0]
    rllib = json.loads((RESULTS / f"rllib-{args.machine}.json").read_text())[0]
    out = RESULTS / f"humanoid-vs-rllib-{args.machine}.png"
    plot(herd["evaluations"], out, f"Humanoid-v5 on {herd['machine']}: Herd vs RLlib SAC",
         baseline=rllib["evaluations"])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
