"""Stop and resume: `herd submit CONFIG --resume runs/<job>` continues from the checkpoint.

Job A trains and finishes by itself (max_env_steps) with save_replay: true. Job B resumes it:
the learner's counters go on from A's, the replay buffer comes back whole before B's actors add
a row, the policy version keeps rising, and B's evaluations start where A's policy was.
`herd evaluate` rebuilds the policy from A's checkpoint alone.
"""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.jobs import SMALL, controller_up, herd, small_learner, wait_for
from tests.jobs import submit as submit_job

pytestmark = pytest.mark.cluster

CFG = {**SMALL,
       "learner": small_learner(ratio=1.0, min_size=500),
       "run": {**SMALL["run"], "name": "resume", "max_env_steps": 6_000, "save_replay": True,
               "eval_every_s": 3, "eval_episodes": 2}}


def submit(tmp_path, cfg: dict, *extra) -> str:
    return submit_job(cfg, tmp_path, *extra)


def finished(run_dir) -> dict:
    wait_for(lambda: (run_dir / "summary.json").exists(), 300, f"{run_dir.name} to finish", poll=1)
    return json.loads((run_dir / "summary.json").read_text())


def test_resume_continues_counters_buffer_and_policy(ray_cluster, tmp_path):
    import torch

    runs = tmp_path / "runs"
    job_a = submit(tmp_path, CFG)
    a = finished(runs / job_a)
    assert a["stop_reason"] == "max_env_steps"
    la = a["learner"]
    ckpt = runs / job_a / "checkpoint"
    saved = torch.load(ckpt / "model.pt", map_location="cpu", weights_only=True)
    replay = torch.load(ckpt / "replay.pt", mmap=True, weights_only=True)
    assert saved["received"] > 0 and saved["updates"] > 0 and replay["size"] == saved["inserted"]

    # herd evaluate: the checkpoint alone gives a deterministic, repeatable return (the run
    # folder's final checkpoint and the checkpoint folder, side by side: two processes)
    with ThreadPoolExecutor(2) as pool:
        ev1, ev2 = pool.map(lambda args: json.loads(herd("evaluate", *args, "--episodes", "2",
                                                         "--json").stdout),
                            ((str(runs / job_a), "--final"), (str(ckpt),)))
    assert ev1["mean_return"] == ev2["mean_return"] and ev1["policy_version"] == saved["policy_version"]
    # (not compared with A's final_eval: the learner labels the checkpoint with its last
    # *published* version, but saves the networks as they are, up to publish_every_s later)

    # ---- resume: a bigger budget, the same networks ----
    cfg_b = {**CFG, "run": {**CFG["run"], "name": "resumed", "max_env_steps": saved["received"] + 3_000}}
    job_b = submit(tmp_path, cfg_b, "--resume", str(runs / job_a))
    first = wait_for(lambda: controller_up(job_b), 150, "B's controller", poll=1)["learner"]
    # counters and buffer are A's from the first status on (B's one actor adds a few hundred rows)
    assert first["received"] >= saved["received"]
    assert first["replay_size"] >= replay["size"]
    assert first["updates"] >= saved["updates"]
    assert first["policy_version"] > saved["policy_version"]
    b = finished(runs / job_b)
    lb = b["learner"]
    assert b["stop_reason"] == "max_env_steps"
    # the accounting spans both runs: A's rows + what B's actors delivered, nothing else
    assert int(lb["received"]) == saved["received"] + b["actor_acked"]
    assert int(lb["inserted"]) == saved["inserted"] + b["actor_acked"]
    assert b["actor_acked"] == b["actor_steps"]
    # B's actors act by A's restored policy from their first step: no random warm-up again
    assert a["actor_random_steps"] > 0 and b["actor_random_steps"] == 0
    assert int(lb["updates"]) > saved["updates"]
    assert int(lb["policy_version"]) > saved["policy_version"]
    # the evaluation does not collapse: B's first evaluation is of A's policy plus a few updates
    # (a fresh, untrained policy scores ~5 on InvertedPendulum; see the evaluate check above)
    first_eval = b["evaluations"][0]["mean_return"] if b["evaluations"] else b["final_eval"]["mean_return"]
    assert first_eval >= 0.5 * ev1["mean_return"] - 5, (first_eval, ev1, a["final_eval"])
    assert la["learner_id"] != lb["learner_id"]  # a new learner process, A's state
    # B's first metrics row: rates since the resume (one actor: ~1,000 env steps/s here), not
    # A's restored counters over B's first second (they read >= 6,000/s)
    # (B's metrics.csv goes on from A's rows: its own come after them)
    with open(runs / job_a / "metrics.csv") as f:
        rows_a = list(csv.DictReader(f))
    with open(runs / job_b / "metrics.csv") as f:
        rows_b = list(csv.DictReader(f))
    assert rows_b[:len(rows_a)] == rows_a and b["lineage"]["earlier_run"] == str(runs / job_a)
    first_row = rows_b[len(rows_a)]
    assert float(first_row["env_steps_per_s"]) < 3_000, first_row
    assert float(first_row["updates_per_s"]) < 3_000, first_row
    assert b["resumed_from"] and b["reached_target"] is False  # no target_return: nothing claimed
