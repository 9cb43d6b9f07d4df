"""The job driver (a Ray Job's entrypoint): wires learner, controller and actors in one place.

    python -m cluster.driver --job-id ID --runs-dir DIR   (config in $HERD_CONFIG_JSON)

Writes runs/<job>/: config.yaml (resolved), metrics.csv, tb/, checkpoints/, summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import ray

from cluster.config import JobConfig, dump_config, parse_config
from cluster.controller import NAMESPACE, Controller, controller_name
from cluster.evaluate import evaluate
from cluster.metrics import MetricsWriter
from learner.service import Learner
from proto import codec


def learner_gpus(cfg: JobConfig) -> float:
    """GPUs to ask Ray for; a 'cuda' learner on a cluster without GPUs is refused up front."""
    have = ray.cluster_resources().get("GPU", 0)
    if cfg.learner.device == "cuda" and have < 1:
        raise SystemExit("learner.device is 'cuda' but this Ray cluster has no GPU; "
                         "use device: auto (falls back to the CPU) or add a GPU node")
    return 1 if cfg.learner.device != "cpu" and have >= 1 else 0


def run(cfg: JobConfig, job_id: str, run_dir: Path, resume: str | None = None) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(dump_config(cfg))
    start = time.monotonic()
    # ---- the env spec every component agrees on ----
    from cluster.config import check_env

    d = check_env(cfg)
    spec = codec.spec_to_proto(cfg.env.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])
    # ---- learner (GPU) -> controller -> env actors (CPU) ----
    learner = ray.remote(Learner).options(
        name=f"{job_id}-learner", namespace=NAMESPACE, num_gpus=learner_gpus(cfg),
        num_cpus=cfg.learner.num_cpus, max_concurrency=16,
    ).remote(cfg.learner, spec, resume)
    address = ray.get(learner.address.remote())
    controller = ray.remote(Controller).options(
        name=controller_name(job_id), namespace=NAMESPACE, num_cpus=0, max_concurrency=16,
    ).remote(job_id, cfg.env, cfg.actors, learner, address, cfg.learner.token)
    ray.get(controller.scale.remote(cfg.actors.num_actors))
    print(f"[herd] job {job_id}: learner at {address}, {cfg.actors.num_actors} actors, "
          f"results in {run_dir}", flush=True)

    metrics = MetricsWriter(run_dir)
    evaluator = ray.remote(num_cpus=0)(evaluate)
    pending_eval, last_eval, evals = None, time.monotonic(), []
    last_ckpt, reason = time.monotonic(), "max_seconds"
    prev = (time.monotonic(), 0, 0)
    while True:
        time.sleep(cfg.run.log_every_s)
        st = ray.get(controller.status.remote())
        ls, now = st["learner"], time.monotonic()
        if "error" in ls:
            raise RuntimeError(ls["error"])
        if pending_eval is not None and ray.wait([pending_eval], timeout=0)[0]:
            evals.append({**ray.get(pending_eval), "time_s": now - start,
                          "env_steps": ls["received"], "updates": ls["updates"]})
            pending_eval = None
        if pending_eval is None and now - last_eval >= cfg.run.eval_every_s and ls["updates"]:
            weights = ray.get(learner.weights.remote())
            pending_eval = evaluator.remote(cfg.env, weights, cfg.run.eval_episodes)
            last_eval = now
        row = progress_row(st, evals, now - start, prev)
        prev = (now, ls["received"], ls["updates"])
        metrics.write(row)
        ray.get(controller.set_progress.remote({**row, "max_env_steps": cfg.run.max_env_steps,
                                                "max_seconds": cfg.run.max_seconds}))
        print(format_row(row), flush=True)
        if now - last_ckpt >= cfg.run.checkpoint_every_s:
            ray.get(learner.save.remote(str(run_dir / "checkpoint"), cfg.run.save_replay))
            last_ckpt = now
        target = cfg.run.target_return
        if cfg.run.stop_at_target and target is not None and evals and evals[-1]["mean_return"] >= target:
            reason = "target_return"
            break
        if ls["received"] >= cfg.run.max_env_steps:
            reason = "max_env_steps"
            break
        if now - start >= cfg.run.max_seconds:
            break
        if st["stop_requested"]:
            reason = "stopped by user"
            break

    # ---- wind down: actors deliver what they stepped, then the learner saves and stops ----
    ray.get(controller.scale.remote(0))
    ray.get(learner.save.remote(str(run_dir / "checkpoint"), cfg.run.save_replay))
    weights = ray.get(learner.weights.remote())
    final_learner = ray.get(learner.stop.remote())
    final_eval = ray.get(evaluator.remote(cfg.env, weights, cfg.run.eval_episodes))
    metrics.close()
    actors_final = ray.get(controller.status.remote())["retired"]
    summary = {
        "job_id": job_id,
        "env": cfg.env.id,
        "stop_reason": reason,
        "wall_s": time.monotonic() - start,
        "final_eval": final_eval,
        "target_return": cfg.run.target_return,
        "reached_target": (cfg.run.target_return is not None
                           and final_eval["mean_return"] >= cfg.run.target_return),
        "evaluations": evals,
        "learner": {k: v for k, v in final_learner.items() if k != "losses"},
        "actor_steps": int(sum(a.get("steps", 0) for a in actors_final)),
        "actor_acked": int(sum(a.get("acked", 0) for a in actors_final)),
        "checkpoint": str(run_dir / "checkpoint"),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"[herd] done ({reason}): final deterministic eval return "
          f"{final_eval['mean_return']:.1f} over {final_eval['episodes']} episodes; "
          f"results in {run_dir}", flush=True)
    ray.kill(controller)
    ray.kill(learner)
    return summary


def progress_row(st: dict, evals: list, elapsed: float, prev: tuple) -> dict:
    ls, actors = st["learner"], st["actors"]
    dt = max(time.monotonic() - prev[0], 1e-9)
    returns = [a["mean_return"] for a in actors if a.get("mean_return") is not None]
    losses = ls.get("losses", {})
    return {
        "time_s": round(elapsed, 2),
        "env_steps": ls["received"],
        "env_steps_per_s": (ls["received"] - prev[1]) / dt,
        "updates": ls["updates"],
        "updates_per_s": (ls["updates"] - prev[2]) / dt,
        "received": ls["received"],
        "inserted": ls["inserted"],
        "replay_size": ls["replay_size"],
        "policy_version": ls["policy_version"],
        "policy_lag": ls["mean_policy_lag"],
        "actors": len(actors),
        "train_return": float(np.mean(returns)) if returns else None,
        "eval_return": evals[-1]["mean_return"] if evals else None,
        "critic_loss": losses.get("critic_loss"),
        "actor_loss": losses.get("actor_loss"),
        "alpha": losses.get("alpha"),
        "entropy": losses.get("entropy"),
        "rejected_batches": ls["rejected_batches"],
        "gpu_mem_allocated": ls["gpu_mem_allocated"],
        "gpu_mem_reserved": ls["gpu_mem_reserved"],
    }


def format_row(r: dict) -> str:
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    return (f"[herd] t={r['time_s']:.0f}s steps={r['env_steps']} ({r['env_steps_per_s']:.0f}/s) "
            f"updates={r['updates']} ({r['updates_per_s']:.0f}/s) buffer={r['replay_size']} "
            f"actors={r['actors']} lag={r['policy_lag']:.1f} train_return={fmt(r['train_return'])} "
            f"eval_return={fmt(r['eval_return'])}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cluster.driver")
    p.add_argument("--job-id", required=True)
    p.add_argument("--runs-dir", required=True)
    p.add_argument("--resume", default=None, help="checkpoint directory to continue from")
    args = p.parse_args(argv)
    cfg = parse_config(json.loads(os.environ["HERD_CONFIG_JSON"]), "HERD_CONFIG_JSON")
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
             log_to_driver=True)
    run(cfg, args.job_id, Path(args.runs_dir) / args.job_id, args.resume)
    return 0


if __name__ == "__main__":
    sys.exit(main())
