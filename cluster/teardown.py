"""`herd down`'s first half: every Herd job still running on the cluster is wound down (its
summary.json, final checkpoint and books, as `herd stop` gives) within a grace time, one line per
job saying what it kept; with `force`, nothing is wound down and each job's line says what is
lost. herd.local.down() then stops the cluster's processes. `herd.down()` is the Python twin.

Reads the dashboard's REST API and the controllers' loopback endpoints: no Ray driver unless a
job's endpoint is not on this machine.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from herd import local

DEFAULT_GRACE_S = 120.0
"""How long `herd down` waits for its jobs' wind-down: their final checkpoint (the networks
first, the replay buffer in what is left), final evaluation and summary."""
LIVE = ("PENDING", "RUNNING")
WHY = "cluster going down (herd down)"


def down_cluster(grace_s: float = DEFAULT_GRACE_S, force: bool = False,
                 say: Callable[[str], None] = print) -> list[dict] | None:
    """Wind down the jobs of the cluster `herd up` started (wind_down), then stop it
    (herd.local.down). One record per job; None when no such cluster is on record."""
    if grace_s < 0:
        raise ValueError(f"the grace must be 0 s or more, got {grace_s:g}")
    record = local.cluster_record()
    url = record.get("dashboard")
    if not url:
        return None
    if record.get("gcs"):  # a controller reached through Ray: this cluster's, not another's
        os.environ["RAY_ADDRESS"] = record["gcs"]
    jobs = wind_down(url, grace_s, force, say) if local.dashboard_up(url) else []
    local.down()
    return jobs


def live_jobs(url: str) -> list[dict]:
    """Ray's records of the Herd jobs on the cluster at `url` that have not ended."""
    return [j for j in json.loads(local.get(f"{url}/api/jobs/"))
            if (j.get("submission_id") or "").startswith("herd-") and j.get("status") in LIVE]


def job_state(url: str, job_id: str) -> str:
    """Ray's state of the job; "?" when the dashboard does not answer in time."""
    from herd.jobs_rest import RestJobClient

    try:
        return RestJobClient(url, timeout=10.0).get_job_status(job_id)
    except (OSError, RuntimeError):
        return "?"


def wind_down(url: str, grace_s: float = DEFAULT_GRACE_S, force: bool = False,
              say: Callable[[str], None] = print) -> list[dict]:
    """Wind down every live Herd job on the cluster at `url` within `grace_s` seconds (with
    `force`: none); one record per job ({job_id, run_dir, wound_down, line}), each line said
    as it is known."""
    from herd.runs import run_dir_of

    jobs = [(j["submission_id"], run_dir_of(j)) for j in live_jobs(url)]
    if force:
        out = [{"job_id": job, "run_dir": run_dir, "wound_down": False,
                "line": f"{job}: not wound down (--force); {lost(run_dir)}"} for job, run_dir in jobs]
    else:
        asked = {job: ask_stop(url, job, grace_s) for job, _ in jobs}
        deadline = time.monotonic() + grace_s
        waiting = {job for job, _ in jobs if asked[job]}
        while waiting and time.monotonic() < deadline:
            waiting = {job for job in waiting if job_state(url, job) in LIVE}
            if waiting:
                time.sleep(0.5)
        out = []
        for job, run_dir in jobs:
            rec = {"job_id": job, "run_dir": run_dir, "wound_down": job not in waiting and asked[job]}
            rec["line"] = kept(job, run_dir, grace_s) if rec["wound_down"] else (
                f"{job}: " + ("not wound down within the "
                              f"{grace_s:g} s grace" if asked[job] else "its controller did not answer")
                + f"; {lost(run_dir)}")
            out.append(rec)
    for rec in out:
        say(rec["line"])
    return out


def ask_stop(url: str, job_id: str, grace_s: float) -> bool:
    """Ask the job's controller to wind down within `grace_s` (its loopback endpoint, else Ray).
    A job without a controller yet (its driver still starting) is stopped through Ray's job API:
    it has trained nothing. False when neither answered."""
    from herd.control import NAMESPACE, Unreachable, controller_name, find

    ep = find(job_id)
    if ep is not None:
        try:
            return bool(ep.stop(WHY, grace_s))
        except (Unreachable, RuntimeError):
            pass
    import ray

    try:
        local.join()
        ctl = ray.get_actor(controller_name(job_id), namespace=NAMESPACE)
    except (ValueError, ConnectionError):  # no controller (starting, or dead): Ray's job stop
        ctl = None
    if ctl is not None:
        try:
            return bool(ray.get(ctl.request_stop.remote(WHY, grace_s), timeout=15))
        except Exception:  # noqa: BLE001,S110 -- it died meanwhile: Ray's job stop below
            pass
    try:
        from herd.jobs_rest import RestJobClient

        RestJobClient(url, timeout=10.0).stop_job(job_id)
        return True
    except Exception:  # noqa: BLE001 -- said in the job's line
        return False


def kept(job_id: str, run_dir: Path | None, grace_s: float) -> str:
    """A wound-down job's lines (each but the folder's within 80 columns): what it wrote, its
    books, its run folder."""
    try:
        s = json.loads((run_dir / "summary.json").read_text())
    except (OSError, TypeError, ValueError):
        return f"{job_id}: ended before it trained (no summary.json: nothing to keep)"
    ls = s.get("learner") or {}
    books = [s.get("actor_steps"), s.get("actor_acked"), ls.get("received"), ls.get("inserted")]
    restored = ls.get("restored") or {}
    if restored:  # a resumed run's learner counts from its checkpoint's figures
        books[2:] = [int(books[2] or 0) - int(restored.get("received", 0)),
                     int(books[3] or 0) - int(restored.get("inserted", restored.get("received", 0)))]
    wd = s.get("wind_down") or {}
    lines = [f"{job_id}: wound down: summary.json, "
             + ("checkpoint/" if s.get("checkpoint") else "no checkpoint")]
    if s.get("checkpoint") and wd.get("replay_left_out"):
        lines.append(f"  replay buffer left out of checkpoint/: {wd['replay_left_out']}")
    if len({int(b or 0) for b in books}) == 1:
        figures = f"books exact: steps {int(books[0] or 0):,} = acked = received = inserted"
    else:
        figures = ("books NOT equal: " + ", ".join(
            f"{name} {int(b or 0):,}" for name, b in zip(("steps", "acked", "received", "inserted"), books)))
    return "\n".join([*lines, f"  {figures}", f"  results: {run_dir}"])


def lost(run_dir: Path | None) -> str:
    """What a job stopped without a wind-down loses, and what its run folder keeps."""
    if run_dir is None or not run_dir.is_dir():
        return "lost: all of it (no run folder on this machine)"
    kept_parts = []
    now = time.time()
    for name in ("checkpoint", "checkpoint-best"):
        model = run_dir / name / "model.pt"
        if model.is_file():
            kept_parts.append(f"{name}/ ({now - model.stat().st_mtime:.0f} s old)")
    if (run_dir / "metrics.csv").is_file():
        kept_parts.append("metrics.csv")
    keeps = ", ".join(kept_parts) or "nothing"
    return (f"lost: summary.json, the final checkpoint and books, every step since its newest "
            f"checkpoint; {run_dir} keeps {keeps}")
