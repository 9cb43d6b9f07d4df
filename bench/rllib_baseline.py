"""RLlib's own SAC on the same env and box, under the same wall-clock budget, as the baseline.

    python bench/rllib_baseline.py [--env Humanoid-v5] [--seconds 240] [--env-runners 15]

Runs RLlib 2.60's SAC (new API stack, GPU learner when there is one) and records its
deterministic evaluation return against seconds since the algorithm was built. Writes
bench/results/rllib-<machine>.json (and is plotted beside Herd's curve by bench/humanoid.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, private_ray_auth, result_path, save


def find(result: dict, *path, default=None):
    node = result
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="Humanoid-v5")
    p.add_argument("--seconds", type=float, default=240)
    p.add_argument("--env-runners", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--out", default=None)
    args = p.parse_args()
    private_ray_auth()  # before anything of Ray reads the auth settings
    info = header(f"RLlib SAC baseline on {args.env}")
    import ray
    import torch
    from ray.rllib.algorithms.sac import SACConfig

    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    gpus = 1 if torch.cuda.is_available() else 0
    config = (
        SACConfig()
        .environment(args.env)
        .env_runners(num_env_runners=args.env_runners, num_envs_per_env_runner=1)
        .learners(num_learners=0, num_gpus_per_learner=gpus)
        .training(train_batch_size_per_learner=256, num_steps_sampled_before_learning_starts=10_000)
        .evaluation(evaluation_interval=5, evaluation_duration=2, evaluation_duration_unit="episodes",
                    evaluation_num_env_runners=0, evaluation_config={"explore": False})
    )
    t0 = time.time()
    algo = config.build_algo()
    evals, it = [], 0
    while time.time() - t0 < args.seconds:
        result = algo.train()
        it += 1
        steps = find(result, "num_env_steps_sampled_lifetime", default=0)
        ev = find(result, "evaluation", "env_runners", "episode_return_mean")
        train = find(result, "env_runners", "episode_return_mean")
        if ev is not None and not math.isnan(ev):  # RLlib reports NaN before the first finished episode
            evals.append({"seconds": time.time() - t0, "mean_return": float(ev), "env_steps": steps})
        console.print(f"{time.time() - t0:6.1f}s iter {it} env steps {steps} train return {train} "
                      f"eval return {ev}", markup=False)
    wall = time.time() - t0
    steps = find(result, "num_env_steps_sampled_lifetime", default=0)
    record = {**info, "env": args.env, "framework": "rllib-2.60 SAC", "actors": args.env_runners,
              "wall_s": wall, "env_steps": steps, "env_steps_per_s": steps / wall,
              "best_eval_return": max((e["mean_return"] for e in evals), default=None),
              "seconds_to_5000": next((e["seconds"] for e in evals if e["mean_return"] >= 5000), None),
              "evaluations": evals}
    path = result_path("rllib", args.out, quick=False)
    save([record], path)
    console.print(f"RLlib: {steps} env steps in {wall:.0f}s ({record['env_steps_per_s']:.0f}/s); "
                  f"best eval {record['best_eval_return']}; wrote {path}")
    algo.stop()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
