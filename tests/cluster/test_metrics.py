"""Herd's figures reach Ray's Prometheus endpoint; the dashboard's REST API lists the job and its
actors; `herd status` shows a row per actor (once, and live with --watch).

One real job on the session's Ray cluster serves every test of this module.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.jobs import SMALL, get_json, herd, status, status_when, submit, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def job(ray_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metrics")
    cfg = {**SMALL, "run": {**SMALL["run"], "name": "metrics"}}
    job_id = submit(cfg, tmp)
    wait_for(lambda: status_when(job_id, lambda s: s["learner"].get("updates", 0) > 0), 150,
             "the job's first updates", poll=2)
    yield job_id
    herd("stop", job_id, check=False)
    wait_for(lambda: (tmp / "runs" / job_id / "summary.json").exists(), 180, "summary.json", poll=2)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def series(text: str, name: str, **labels) -> list[float]:
    """Values of the samples of metric `name` whose labels include `labels`."""
    out = []
    for line in text.splitlines():
        m = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(2)))
    return out


def test_prometheus_endpoint_exports_herd_metrics(ray_cluster, job):
    """Ray's metrics agent serves the controller's gauges, tagged with the job and the actor."""
    from herd.prom import ALL_NAMES

    def ready():
        text = scrape(ray_cluster["metrics"])
        steps = series(text, "ray_herd_env_steps", job=job)
        actor = series(text, "ray_herd_actor_steps", job=job, actor="actor-0")
        return text if steps and steps[0] > 0 and actor and actor[0] > 0 else None

    text = wait_for(ready, 90, "ray_herd_* samples for the job on the metrics port", poll=3)
    for name in ("ray_herd_updates", "ray_herd_replay_size", "ray_herd_policy_lag",
                 "ray_herd_actors", "ray_herd_rejected_batches", "ray_herd_gpu_mem_allocated_bytes",
                 "ray_herd_bytes_received", "ray_herd_actor_bytes_sent", "ray_herd_actor_push_latency_ms",
                 "ray_herd_actor_steps_per_s", "ray_herd_actor_env_us_per_step"):
        assert series(text, name, job=job), f"{name} missing for {job}"
    exported = {n for n in ALL_NAMES if f"ray_{n}{{" in text}
    # eval/train return, losses appear once the job has evaluated / finished episodes
    assert len(exported) >= len(ALL_NAMES) - 6, sorted(set(ALL_NAMES) - exported)
    assert series(text, "ray_herd_actors", job=job) == [1.0]
    assert series(text, "ray_herd_updates", job=job)[0] > 0


def test_dashboard_rest_api_lists_job_and_actors(ray_cluster, job):
    url = ray_cluster["dashboard"]
    jobs = get_json(f"{url}/api/jobs/")
    mine = [j for j in jobs if j.get("submission_id") == job]
    assert mine and mine[0]["status"] == "RUNNING"
    assert "herd.driver" in mine[0]["entrypoint"]
    actors = get_json(f"{url}/api/v0/actors?limit=1000&detail=true")["data"]["result"]["result"]
    alive = {a["name"]: a for a in actors if a["state"] == "ALIVE" and a.get("name")}
    assert alive[f"{job}-learner"]["class_name"] == "Learner"
    assert alive[f"{job}-actor-0"]["class_name"] == "EnvActor"
    assert alive[f"herd-controller-{job}"]["class_name"] == "Controller"
    # every actor of the job belongs to the job's Ray job id
    ray_job = alive[f"{job}-learner"]["job_id"]
    assert alive[f"{job}-actor-0"]["job_id"] == ray_job == mine[0]["job_id"]
    # and the nodes endpoint knows the node they run on
    nodes = get_json(f"{url}/api/v0/nodes")["data"]["result"]["result"]
    assert alive[f"{job}-actor-0"]["node_id"] in {n["node_id"] for n in nodes}


def test_status_shows_a_row_per_actor(ray_cluster, job):
    out = herd("status", job).stdout
    assert job in out and "actor-0" in out and "steps/s" in out and "buffer" in out
    st = status(job)
    assert st["actors"][0]["actor_id"] == "actor-0" and st["progress"]["env_steps"] > 0


def test_status_watch_redraws_live(monkeypatch):
    """--watch: a rich Live view redrawn in place with every poll, until the job is gone."""
    from rich.console import Console

    from herd import live

    frames = []

    def fake(i):
        return {"job_id": "herd-x", "learner": {"device": "cpu", "learner_id": "abc", "updates": 10 * i,
                "updates_per_s": 5.0, "received": 100 * i, "inserted": 100 * i, "inserts_per_s": 50.0,
                "replay_size": 100 * i, "replay_capacity": 1000, "policy_version": i,
                "mean_policy_lag": 0.5, "rejected_batches": 0, "gpu_mem_allocated": 0,
                "gpu_mem_reserved": 0},
                "actors": [{"actor_id": f"actor-{k}", "pid": 1, "steps": 7 * i, "steps_per_s": 3.0,
                            "recent_steps_per_s": 3.0, "acked": 5, "bytes_sent": 10, "mean_return": 1.0,
                            "policy_version": i, "push_latency_ms": 1.0, "in_flight": 0, "reconnects": 0}
                           for k in range(i)],
                "target_actors": 3, "retired": [], "progress": {}, "stop_requested": False}

    def fetch():
        frames.append(len(frames))
        return fake(len(frames)) if len(frames) <= 3 else None

    con = Console(record=True, force_terminal=True, width=160)
    monkeypatch.setattr(live, "console", con)
    t0 = time.monotonic()
    assert live.watch_status(fetch, 0.05) == 0
    assert time.monotonic() - t0 < 10 and len(frames) == 4
    text = con.export_text()
    assert "actor-2" in text and "controller is gone" in text
    # actors asked for but not up yet are counted in the title, until they are all up
    assert "1 env actors (0 retired, 2 starting)" in text and "3 env actors (0 retired)" in text
