"""The job's progress rows, one each log interval: the learner's and the actors' figures with
their rates since the window's oldest sample (a metrics.csv row), each actor's env steps/s over
the same window, and the row's one `[herd]` line in the driver log.
"""

from __future__ import annotations

import time

RATE_WINDOW_S = 10.0
"""The rows' rates are over at least this many seconds (the job's first ones, over all of it so
far): over one log interval, a job whose replay ratio paces its actors' pushes reads 0/s and
twice its mean by turns."""


def progress_row(st: dict, eval_return: float | None, elapsed: float, prev: tuple) -> dict:
    """One metrics row (cluster/metrics.py's COLUMNS) from the controller's status `st`, the
    last evaluation's return and the seconds since the start; rates are since `prev`, the oldest
    sample of the rate window: (time, received, updates, [inserted,] actors' steps)."""
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
        # rows go into the ring in blocks: over one second the learner's own rate reads 0 by turns
        "inserts_per_s": (ls["inserted"] - prev[3]) / dt if len(prev) > 4 else None,
        "replay_size": ls["replay_size"],
        "policy_version": ls["policy_version"],
        "policy_lag": ls["mean_policy_lag"],
        "actors": len(actors),
        "train_return": sum(map(float, returns)) / len(returns) if returns else None,
        "eval_return": eval_return,
        "critic_loss": losses.get("critic_loss"),
        "actor_loss": losses.get("actor_loss"),
        "alpha": losses.get("alpha"),
        "entropy": losses.get("entropy"),
        "rejected_batches": ls["rejected_batches"],
        "gpu_mem_allocated": ls["gpu_mem_allocated"],
        "gpu_mem_reserved": ls["gpu_mem_reserved"],
        "frames_received": ls.get("frames_received", 0),
        "rows_unresolved": ls.get("rows_unresolved", 0),
    }


def actor_steps(actors: list[dict]) -> dict[str, int]:
    """Env steps so far by actor_id, of the actors that report them."""
    return {a["actor_id"]: a["steps"] for a in actors if "steps" in a}


def actor_rates(steps: dict[str, int], now: float, window: list[tuple]) -> dict[str, float]:
    """Each actor's env steps/s over the window of the row's own rates (`window`: its samples,
    oldest first, each with the actors' steps last), so that the actors' rates add up to the
    job's; an actor that came (or came back, counting from 0) within it, since its first sample."""
    out = {}
    for a, n in steps.items():
        since = None
        for t, *_, seen in reversed(window):
            if a not in seen or seen[a] > (since[1] if since else n):
                break
            since = (t, seen[a])
        if since is not None and now > since[0]:
            out[a] = (n - since[1]) / (now - since[0])
    return out


def format_row(r: dict) -> str:
    """A metrics row as the one line the driver's log prints per log tick."""
    fmt = lambda v: "-" if v is None else f"{v:.1f}"
    return (f"[herd] t={r['time_s']:.0f}s steps={r['env_steps']} ({r['env_steps_per_s']:.0f}/s) "
            f"updates={r['updates']} ({r['updates_per_s']:.0f}/s) buffer={r['replay_size']} "
            f"actors={r['actors']} lag={r['policy_lag']:.1f} train_return={fmt(r['train_return'])} "
            f"eval_return={fmt(r['eval_return'])}")


def window_rates(learner: dict, progress: dict) -> dict:
    """The learner's status with its updates/s and inserts/s over the driver's rate window (the
    last progress row's) where there is one: the learner's own are over its last second, and
    rows go into the ring in blocks, so its inserts/s reads 0 between two of them."""
    if "error" in learner:
        return learner
    if progress.get("inserts_per_s") is None:  # no row yet: the learner's own, over a second
        return {**learner, "rates_over_s": 1.0}
    return {**learner, "updates_per_s": progress["updates_per_s"],
            "inserts_per_s": progress["inserts_per_s"], "rates_over_s": RATE_WINDOW_S}
