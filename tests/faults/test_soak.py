"""Bounded soak (`make soak`, ~5 min on 2 cores): a real job under periodic env-actor kills
and live scale changes. Every process of the job keeps a flat memory (RSS growth within
RSS_BOUND_MB between the first and the last samples of its life), and after `herd stop`
no process, Ray actor or port of the job is left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import time
from pathlib import Path

import pytest

from tests.jobs import SMALL, controller_up, herd, status, submit, wait_for

pytestmark = [pytest.mark.soak, pytest.mark.cluster]
SOAK_S = float(os.environ.get("HERD_SOAK_S", "210"))  # fault phase, after a 45 s warm-up
EVERY_S = 15
RSS_BOUND_MB = 40.0
CFG = {**SMALL,
       "actors": {**SMALL["actors"], "num_actors": 2, "window": 3},
       "run": {**SMALL["run"], "name": "soak", "max_seconds": 900, "checkpoint_every_s": 30,
               "eval_every_s": 60}}


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def driver_pid(job: str) -> int | None:
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if b"herd.driver" in cmd and job.encode() in cmd:
                return int(p.name)
    return None


def test_soak_kills_and_scaling_memory_flat_nothing_leaked(ray_cluster, tmp_path):
    import ray
    from ray.util.state import list_actors

    job = submit(CFG, tmp_path)
    runs = tmp_path / "runs"
    wait_for(lambda: controller_up(job), 150, "the controller")
    wait_for(lambda: status(job)["learner"].get("updates", 0) > 0, 150, "learning")
    ray.init(address=ray_cluster["gcs"], namespace="herd", logging_level="ERROR")
    port = ray.get(ray.get_actor(f"{job}-learner").__ray_call__.remote(lambda self: self.port))
    ctl_pid = next(a.pid for a in list_actors(filters=[("name", "=", f"herd-controller-{job}")]))

    series: dict[str, list[tuple[float, float]]] = {}  # process label -> (t, RSS MB)
    pids: set[int] = {ctl_pid}
    t0 = time.monotonic()

    def sample():
        st = status(job)
        procs = {"driver": driver_pid(job), "controller": ctl_pid,
                 "learner": st["learner"].get("pid")}
        for a in st["actors"]:
            if "pid" in a:
                procs[f"{a['actor_id']}@{a['pid']}"] = a["pid"]
        for label, pid in procs.items():
            if pid and (mb := rss_mb(pid)) is not None:
                pids.add(pid)
                series.setdefault(label, []).append((time.monotonic() - t0, mb))
        return st

    while time.monotonic() - t0 < 45:  # warm-up: allocators and caches settle
        sample()
        time.sleep(5)
    for label in list(series):  # flatness is judged from here on
        series[label] = []
    kills = scales = 0
    sizes = [3, 2, 1, 2]
    last_event, k = time.monotonic(), 0
    learner_id = status(job)["learner"]["learner_id"]
    while time.monotonic() - t0 < 45 + SOAK_S:
        st = sample()
        if time.monotonic() - last_event >= EVERY_S:
            if k % 2 == 0:
                victims = [a for a in st["actors"] if "pid" in a]
                if victims:
                    os.kill(victims[(k // 2) % len(victims)]["pid"], signal.SIGKILL)
                    kills += 1
            else:
                herd("scale", job, "--actors", str(sizes[(k // 2) % len(sizes)]))
                scales += 1
            k += 1
            last_event = time.monotonic()
        time.sleep(3)
    final = status(job)
    assert final["learner"]["learner_id"] == learner_id  # the learner never stopped

    growth = {}
    for label, pts in series.items():
        if len(pts) < 6 or pts[-1][0] - pts[0][0] < 45:
            continue  # too short-lived to judge (an incarnation killed soon after start)
        first = statistics.median(mb for _, mb in pts[:3])
        last = statistics.median(mb for _, mb in pts[-3:])
        growth[label] = round(last - first, 1)
    herd("stop", job)
    run_dir = runs / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 240, "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())

    # ---- nothing left behind: processes, Ray actors, the learner's port ----
    def leftovers():
        alive = [a.name for a in list_actors(filters=[("state", "=", "ALIVE")])
                 if a.name and job in a.name]
        procs = [p for p in pids if Path(f"/proc/{p}").exists()
                 and b"ray::IDLE" not in Path(f"/proc/{p}/cmdline").read_bytes()]
        with socket.socket() as s:
            port_open = s.connect_ex(("127.0.0.1", port)) == 0
        return alive, procs, port_open

    deadline = time.monotonic() + 60
    while any(leftovers()) and time.monotonic() < deadline:
        time.sleep(2)
    alive, procs, port_open = leftovers()
    ray.shutdown()
    report = {"soak_s": SOAK_S, "actor_kills": kills, "scale_changes": scales,
              "rss_growth_mb": growth, "bound_mb": RSS_BOUND_MB,
              "received": summary["learner"]["received"], "updates": summary["learner"]["updates"],
              "rejected_batches": summary["faults"]["rejected_batches"],
              "learner_restarts": summary["faults"]["learner_restarts"],
              "leftover_actors": alive, "leftover_pids": procs, "port_open": port_open}
    print("\n[soak] " + json.dumps(report))
    out = Path(os.environ.get("HERD_SOAK_REPORT", tmp_path / "soak_report.json"))
    out.write_text(json.dumps(report, indent=2))
    assert kills >= 4 and scales >= 4
    assert {"learner", "controller", "driver"} <= set(growth), growth
    assert all(g <= RSS_BOUND_MB for g in growth.values()), growth
    assert summary["faults"]["learner_restarts"] == 0 and summary["faults"]["rejected_batches"] == 0
    assert summary["learner"]["inserted"] == summary["learner"]["received"]
    assert not alive and not procs and not port_open, (alive, procs, port_open)
    assert driver_pid(job) is None
