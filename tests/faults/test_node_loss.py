"""A worker node lost mid-job: the job goes on with the actors on the nodes left, `herd status`
names the lost node, and the job still ends with its summary, a final checkpoint and books
whose steps the dead node's actor never delivered are counted apart (acked = received =
inserted; killed_steps_lost_at_least).

Real parts: a Ray head and two worker nodes of this test's own, each on a loopback address of
its own (127.0.0.2, .3, .4: Ray rewrites 127.0.0.1 to the machine's external address for any
node joining, so the suite's head cannot take nodes), token auth, the workers each offering
herd_worker: 1 so each holds one env actor; one worker is killed outright (its raylet and
workers: SIGTERM, then SIGKILL), as a lost machine or container is.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from herd.local import CLUSTER_MARKER_ENV, dashboard_up, stop_processes_marked
from tests.cluster.test_local_up import free_port, marked_pids
from tests.jobs import SMALL, herd, status, status_when, submit, wait_for

pytestmark = pytest.mark.cluster

CFG = {**SMALL, "actors": {**SMALL["actors"], "num_actors": 2},
       "run": {**SMALL["run"], "name": "nodeloss", "checkpoint_every_s": 600}}
RAY = str(Path(sys.executable).with_name("ray"))
PRIVATE_TMP = tempfile.mkdtemp(prefix="hn", dir="/tmp")  # Ray's default temp dir for these nodes


def ray_node(ip: str, *args: str) -> str:
    """`ray start` of one node on loopback address `ip`; its processes carry the marker returned."""
    marker = f"tests-node-{secrets.token_hex(4)}"
    env = {**os.environ, CLUSTER_MARKER_ENV: marker, "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "TMPDIR": PRIVATE_TMP}  # not /tmp/ray
    subprocess.run([RAY, "start", f"--node-ip-address={ip}", f"--metrics-export-port={free_port()}",
                    f"--dashboard-agent-listen-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
                    "--disable-usage-stats", *args], check=True, env=env, stdout=subprocess.DEVNULL,
                   timeout=120)
    return marker


@pytest.fixture
def three_nodes(tmp_path_factory, monkeypatch):
    """A head (127.0.0.2: learner, controller, driver) and two workers (127.0.0.3, .4)."""
    gcs, dash = free_port(), free_port()
    markers = [ray_node("127.0.0.2", "--head", f"--port={gcs}", "--num-cpus=2",
                        f"--temp-dir={tmp_path_factory.mktemp('rn')}", "--include-dashboard=true",
                        "--dashboard-host=127.0.0.2", f"--dashboard-port={dash}",
                        f"--ray-client-server-port={free_port()}")]
    try:
        url = f"http://127.0.0.2:{dash}"
        wait_for(lambda: dashboard_up(url), 120, "the dashboard")
        for ip in ("127.0.0.3", "127.0.0.4"):  # one after the other
            markers.append(ray_node(ip, f"--address=127.0.0.2:{gcs}", "--num-cpus=1",
                                    '--resources={"herd_worker": 1}'))
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.2:{gcs}")
        monkeypatch.setenv("HERD_DASHBOARD_URL", url)
        monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1")
        yield markers
    finally:  # the three nodes side by side: each waits out its own signals' grace
        with ThreadPoolExecutor(len(markers)) as pool:
            list(pool.map(lambda marker: stop_processes_marked(marker, timeout=2), markers))


def test_a_lost_worker_node_leaves_the_job_running_and_its_books_whole(three_nodes, tmp_path):
    job = submit(CFG, tmp_path, "--actor-resources", '{"herd_worker": 1}')
    run = tmp_path / "runs" / job
    try:
        s = wait_for(lambda: status_when(job, lambda st: sum(a.get("steps", 0) > 200 for a in st["actors"]) == 2),
                     180, "both actors stepping on the worker nodes", poll=2)
        # the node of actor-1 goes, its raylet and its processes with it
        pid = {a["actor_id"]: a["pid"] for a in s["actors"]}["actor-1"]
        doomed = next(m for m in three_nodes[1:] if pid in marked_pids(m))
        t0 = time.monotonic()
        stop_processes_marked(doomed, timeout=2)
        lost = wait_for(lambda: (st := status(job))["nodes_lost"] and st, 120, "the node's loss in the status",
                        poll=2)
        print(f"node loss seen in the status after {time.monotonic() - t0:.1f} s")
        assert len(lost["nodes_lost"]) == 1 and lost["nodes_lost"][0]["address"].startswith("127.0.0.")
        text = " ".join(herd("status", job).stdout.split())
        assert "1 node lost: 127.0.0." in text, text
        # the job goes on with the actor on the node left
        steps0 = {a["actor_id"]: a.get("steps", 0) for a in lost["actors"]}.get("actor-0", 0)
        wait_for(lambda: next((a.get("steps", 0) for a in status(job)["actors"] if a["actor_id"] == "actor-0"),
                              0) > steps0 + 100, 60, "actor-0 to go on stepping", poll=2)
        herd("stop", job)
        wait_for(lambda: (run / "summary.json").exists(), 180, "summary.json")
    finally:
        if not (run / "summary.json").exists():
            herd("stop", job, check=False)
    summary = json.loads((run / "summary.json").read_text())
    faults, ls = summary["faults"], summary["learner"]
    assert summary["stop_reason"] == "stopped by user" and summary["checkpoint"]
    assert len(faults["nodes_lost"]) == 1 and faults["killed_actor_processes"] >= 1
    # what the learner took is exact; what the dead node's actor stepped and never delivered
    # is counted apart
    assert summary["actor_acked"] == summary["actor_steps"] == ls["received"] == ls["inserted"], summary
    assert faults["killed_steps_lost_at_least"] is not None and faults["killed_steps_lost_at_least"] >= 0
