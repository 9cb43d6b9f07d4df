"""The flat record of one bench/humanoid.py run (record_of), from its runs/<job>/summary.json and
metrics.csv; eval_record computes the figures of its evaluation series alone, no job needed.

The figures (seconds count from `herd submit`):
    seconds_to_5000/6500/10000/11000  the first evaluation at or above it (null: never)
    best_eval_return, best_eval_at_s  the best evaluation's mean return and when its policy was taken
    best_eval_contact_cost  that evaluation's mean summed contact cost per episode, positive (the
                     env's -reward_contact; Humanoid-v4's returns never charged it); null for an
                     env without one. Every evaluation keeps its own as mean_contact_cost
    final_eval_contact_cost  the same of the final checkpoint's evaluation (final_eval_return's)
    min_eval_after_5000  the lowest evaluation after the first one >= 5,000 (null: never reached,
                     or that one was the last)
    updates_per_s    the job's updates/s once the compiled graph took over: the updates made
                     between consecutive evaluations from the first one taken at or after
                     startup's first_compiled_update_s (first_update_s where there was no compiled
                     graph: the CPU, or a graph given up) to the last periodic one, over the
                     seconds between those two (a learner restart's fall back to its checkpoint's
                     count adds none); null with fewer than two such evaluations
    updates_per_s_wall  all the run's updates over its whole wall clock (summary.json's wall_s:
                     start-up and wind-down included); older records' updates_per_s is this figure
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from pathlib import Path

from bench.common import console


def first_reaching(evals: list[dict], threshold: float) -> dict | None:
    return next((e for e in evals if e["mean_return"] >= threshold), None)


def after_first(evals: list[dict], threshold: float) -> list[dict] | None:
    """The evaluations after the first one >= threshold; None if none reached it."""
    hit = first_reaching(evals, threshold)
    return None if hit is None else evals[evals.index(hit) + 1:]


def lowest_after(evals: list[dict], threshold: float) -> float | None:
    """The lowest evaluation after the first one >= threshold (None if never reached or last)."""
    return min((e["mean_return"] for e in after_first(evals, threshold) or []), default=None)


def compiled_updates_per_s(evals: list[dict], startup: dict | None) -> float | None:
    """The job's updates/s once its compiled graph took over (the module docstring's
    updates_per_s), from its evaluation series."""
    startup = startup or {}
    since = startup.get("first_compiled_update_s")
    if since is None:
        since = startup.get("first_update_s")
    later = [e for e in evals if since is not None and e["seconds"] >= since]
    if len(later) < 2 or later[-1]["seconds"] <= later[0]["seconds"]:
        return None
    made = sum(max(0, b["updates"] - a["updates"]) for a, b in itertools.pairwise(later))
    return made / (later[-1]["seconds"] - later[0]["seconds"])


def dips_after(evals: list[dict], threshold: float = 5000, floor: float = 4000) -> str | None:
    """'k/n': k of the n evaluations after the first one >= threshold fell below `floor` (the
    no-dip target counts k); None if the threshold was never reached."""
    later = after_first(evals, threshold)
    return None if later is None else f"{sum(e['mean_return'] < floor for e in later)}/{len(later)}"


ALGO_KEYS = ("actor_arch", "actor_width", "actor_blocks", "critic_arch", "critic_width", "critic_blocks",
             "critic_loss", "num_atoms", "v_min", "v_max", "obs_norm", "reward_norm", "n_step",
             "batch_size", "replay_ratio", "hidden_sizes", "init_alpha", "amp", "actor_ema",
             "actor_weight_decay", "critic_weight_decay")
"""The learner's algorithm settings a record carries as flat keys."""

EVAL_DETAIL = ("min_return", "max_return", "mean_length", "policy_version", "mean_contact_cost")
"""Kept per evaluation beside its mean: a dip where every episode fell reads apart from one fall;
the contact cost, which the return has paid."""
TRAIN_KEYS = ("train_return", "critic_loss", "actor_loss", "alpha", "entropy", "policy_lag", "updates_per_s")
"""The learner's statistics (metrics.csv) at each evaluation, so a dip's JSON shows what training did."""


def training_rows(path: Path) -> list[dict]:
    """metrics.csv's rows as (time_s, TRAIN_KEYS) floats; none if the job wrote no file."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return [{k: float(r[k]) if r.get(k) not in (None, "") else None for k in ("time_s", *TRAIN_KEYS)}
                for r in csv.DictReader(f)]


def training_at(rows: list[dict], time_s: float) -> dict:
    """TRAIN_KEYS of the last row logged at or before `time_s` (seconds since the job started),
    each as 'train_<key>' (train_return as it is: the actors' episodes); empty when none was."""
    before = [r for r in rows if r["time_s"] is not None and r["time_s"] <= time_s]
    return {k if k.startswith("train_") else f"train_{k}": before[-1][k] for k in TRAIN_KEYS} if before else {}


def record_of(config: str, seed: int, info: dict, job: str, t_submit: float, cfg: dict, cold: bool,
              runs_dir: str) -> dict:
    """One run's flat record, from its runs/<job>/summary.json."""
    summary = json.loads((Path(runs_dir) / job / "summary.json").read_text())
    train = training_rows(Path(runs_dir) / job / "metrics.csv")
    evals = [{"seconds": e["unix_time"] - t_submit, "mean_return": e["mean_return"],
              "env_steps": e["env_steps"], "updates": e["updates"],
              **{k: e.get(k) for k in EVAL_DETAIL}, **training_at(train, e["time_s"])}
             for e in summary["evaluations"]]
    startup = summary.get("startup") or {}
    learner_cfg = cfg["learner"]
    record = {
        **info, "env": cfg["env"]["id"], "job": job, "config_file": config, "config": cfg,
        "seed": seed, "cold": cold,
        # the start-up milestones as flat keys (the whole timeline stays in `startup`)
        **{k: startup.get(k) for k in ("first_update_s", "actors_ready_s", "first_compiled_update_s",
                                       "startup_update_gap_s")},
        **{k: learner_cfg["algorithm"].get(k) for k in ALGO_KEYS},
        "batch": learner_cfg["replay"].get("batch_size"), "actors": cfg["actors"]["num_actors"],
        **eval_record(evals, startup),
        "final_eval_return": summary["final_eval"]["mean_return"],
        "final_eval_contact_cost": summary["final_eval"].get("mean_contact_cost"),
        "env_steps": int(summary["learner"]["received"]), "updates": int(summary["learner"]["updates"]),
        "wall_s": summary["wall_s"], "startup": summary.get("startup"), "evaluations": evals,
    }
    record["env_steps_per_s"] = record["env_steps"] / summary["wall_s"]
    record["updates_per_s_wall"] = record["updates"] / summary["wall_s"]
    record["command"] = "python " + " ".join(sys.argv)
    rate = record["updates_per_s"]
    console.print(f"{config} seed {seed}: 5000 at {record['seconds_to_5000']} s ({record['updates_to_5000']} "
                  f"updates); 10000 at {record['seconds_to_10000']} s; 11000 at {record['seconds_to_11000']} s; "
                  f"lowest after 5000 {record['min_eval_after_5000']}; best {record['best_eval_return']} at "
                  f"{record['best_eval_at_s']} s (contact cost {record['best_eval_contact_cost']}); "
                  f"{record['env_steps_per_s']:.0f} env steps/s, "
                  f"{'-' if rate is None else f'{rate:.0f}'} updates/s compiled "
                  f"({record['updates_per_s_wall']:.0f} over the whole run)")
    return record


def eval_record(evals: list[dict], startup: dict | None) -> dict:
    """A run's figures from its evaluation series (the module docstring says what each is):
    `evals` as record_of makes them (seconds since submit, mean_return, env_steps, updates,
    mean_contact_cost), `startup` summary.json's."""
    # {} where none reached it: its fields read null
    hit5, hit65, hit10, hit11 = (first_reaching(evals, t) or {} for t in (5000, 6500, 10000, 11000))
    best = max(evals, key=lambda e: e["mean_return"], default={})
    return {
        "seconds_to_5000": hit5.get("seconds"), "env_steps_to_5000": hit5.get("env_steps"),
        "updates_to_5000": hit5.get("updates"),
        "seconds_to_6500": hit65.get("seconds"), "env_steps_to_6500": hit65.get("env_steps"),
        "seconds_to_10000": hit10.get("seconds"), "updates_to_10000": hit10.get("updates"),
        "seconds_to_11000": hit11.get("seconds"),
        "min_eval_after_5000": lowest_after(evals, 5000),
        "dips_after_5000": dips_after(evals),
        "best_eval_return": best.get("mean_return"), "best_eval_at_s": best.get("seconds"),
        "best_eval_contact_cost": best.get("mean_contact_cost"),
        # one evaluation is 5 episodes and swings; the last three say where a short run ended
        "last3_eval_return": (sum(e["mean_return"] for e in evals[-3:]) / len(evals[-3:])) if evals else None,
        "updates_per_s": compiled_updates_per_s(evals, startup),
    }
