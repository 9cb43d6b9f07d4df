"""Summary: what the job did, written to runs/<job>/summary.json (every field: docs/status.md),
with the metrics' last row, the run's curve.png and the driver's last lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

from herd.config import JobConfig
from herd.curves import CURVE, write_curve
from herd.job.launch import Launched
from herd.job.supervise import Supervised
from herd.job.wind_down import Ended
from herd.lineage import Lineage
from herd.periodic_eval import BEST_CHECKPOINT, BEST_POLICY
from herd.ray_errors import one_line
from herd.startup import GRAPH_KEYS, Timeline


def write_summary(cfg: JobConfig, job: Launched, sup: Supervised, ended: Ended, lineage: Lineage,
                  timeline: Timeline) -> dict:
    """summary.json, after the metrics are closed and the curve drawn (a job whose summary is
    there has its picture too); the summary as a dict."""
    summary = summarize(cfg, job, sup, ended, lineage, timeline)
    final = ended.final_eval["mean_return"]
    sup.metrics.close({"final_eval_return": final, "stop_reason": sup.reason,
                       "best_eval_return": (summary["best_eval"] or {}).get("mean_return")})
    try:
        write_curve(job.run_dir, lineage.evaluations(sup.periodic.evals))
    except Exception as e:  # noqa: BLE001 -- no evaluation, no matplotlib: a picture is no result
        print(f"[herd] no {CURVE}: {one_line(e)}", flush=True)
    (job.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print("[herd] start-up, s since " + summary["startup"]["since"] + ": " + ", ".join(
        f"{k[:-2]} {v}" for k, v in summary["startup"].items() if k.endswith("_s")), flush=True)
    print(f"[herd] done ({sup.reason}): final deterministic eval return "
          f"{'-' if final is None else f'{final:.1f}'} over {ended.final_eval['episodes']} episodes; "
          f"results in {job.run_dir}", flush=True)
    return summary


def summarize(cfg: JobConfig, job: Launched, sup: Supervised, ended: Ended, lineage: Lineage,
              timeline: Timeline) -> dict:
    run_dir, periodic, final_eval, target = job.run_dir, sup.periodic, ended.final_eval, cfg.run.target_return
    final_learner, actors_final, books = ended.final_learner, ended.books["actors"], ended.books
    acked = int(sum(a.get("acked", 0) for a in actors_final))
    has_checkpoint = (Path(job.ckpt_dir) / "model.pt").exists()
    return {
        "job_id": job.job_id,
        "env": cfg.env.id,
        "stop_reason": sup.reason,
        "wall_s": time.monotonic() - job.start,
        "final_eval": final_eval,
        "target_return": target,
        # SAC keeps learning after the evaluation that reached the target: the final
        # checkpoint's policy can score lower, so both are reported
        "best_eval": periodic.best(),
        "best_policy": str(run_dir / BEST_POLICY) if periodic.evals else None,
        # the full state (networks, optimizers, counters) of best_policy.pb's evaluation:
        # `herd submit --resume` takes it
        "best_checkpoint": (str(run_dir / BEST_CHECKPOINT)
                            if (run_dir / BEST_CHECKPOINT / "model.pt").exists() else None),
        # of the final policy (the checkpoint's); a resumed run's early evaluations are of the
        # restored policy, which the run may since have lost
        "reached_target": (target is not None and final_eval["mean_return"] is not None
                           and final_eval["mean_return"] >= target),
        # of best_policy.pb, the best periodic evaluation of this run
        "best_reached_target": (target is not None and bool(periodic.evals)
                                and periodic.best()["mean_return"] >= target),
        "resumed_from": job.resume,
        "lineage": lineage.record(),  # the run resumed, and how this one's budgets count
        "evaluations": periodic.evals,
        "learner": {k: v for k, v in final_learner.items() if k != "losses"},
        "actor_steps": int(sum(a.get("steps", 0) for a in actors_final)),
        "actor_acked": acked,
        # of them, steps with random warm-up actions (a resumed job takes none)
        "actor_random_steps": int(sum(a.get("random_steps", 0) for a in actors_final)),
        "relays": ended.relays,  # by node id, with actors.weights_relay: their final stats
        "faults": {**faults_summary(job.watch.restarts, acked, final_learner, actors_final),
                   "controller_lost": job.link.lost, "killed_actor_processes": books["killed"],
                   "killed_steps_lost_at_least": books["lost_at_least"],
                   "nodes_lost": books["nodes_lost"]},
        "checkpoint": job.ckpt_dir if has_checkpoint else None,
        "checkpoint_errors": sup.checkpoint_errors,
        "wind_down": sup.grace.record(),  # `herd down`'s grace and what did not fit in it
        "startup": timeline.seconds(**{k: final_learner.get(k) for k in GRAPH_KEYS}),
        # the resolved config, seeds, package versions and git commits (herd.tracking)
        "provenance": sup.record,
    }


def faults_summary(restarts: list[dict], acked: int, final: dict, actors: list[dict]) -> dict:
    """What crashes cost. Learner restarts lose what came after the checkpoint they restore;
    actors ack only what a learner accepted, so acked - received counts exactly the
    transitions a dead learner had accepted after its last checkpoint (exact while no env
    actor died; a dead actor process counts with its last polled figures, a lower bound)."""
    return {
        "learner_restarts": len(restarts),
        "restarts": restarts,
        "updates_lost": sum(r["updates_lost"] for r in restarts),
        "transitions_lost_at_least": sum(r["transitions_lost"] for r in restarts),
        "transitions_lost": max(0, acked - int(final["received"])),
        "env_errors": int(sum(a.get("env_errors", 0) for a in actors)),
        "actor_reconnects": int(sum(a.get("reconnects", 0) for a in actors)),
        "rejected_batches": int(final.get("rejected_batches", 0)),
        "duplicate_batches": int(final.get("duplicate_batches", 0)),
        "unknown_session_batches": int(final.get("unknown_session_batches", 0)),
    }
