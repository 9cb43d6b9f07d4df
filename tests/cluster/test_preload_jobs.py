"""`herd up --preload`, then jobs one after another: every job's learner starts in a spare
worker that has imported torch & co. (herd/pool.py, herd/preload.py), the first job's in one
`herd up` started, the second's in one the first job started again once it had taken them; and
`herd up` leaves no job of its own in the dashboard's list (its spares come from the raylet,
not from a throwaway driver)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from herd import pool
from tests.cluster.test_local_up import free_port, marked_pids, private_home
from tests.jobs import SMALL, wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
SPARES = 3


def test_every_job_starts_in_a_warm_spare_and_up_lists_no_job(ray_cluster, tmp_path):
    home, env, dash = private_home(tmp_path)

    def herd(*args, check=True):
        r = subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=180, check=False)
        assert not check or r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def jobs() -> list[dict]:
        token = (home / ".herd" / "ray_auth_token").read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{dash}/api/jobs/",
                                     headers={"Authorization": f"Bearer {token}"})
        return json.loads(urllib.request.urlopen(req, timeout=10).read())

    def learner(job: str):
        r = herd("status", job, "--json", check=False)
        s = json.loads(r.stdout) if r.returncode == 0 else {}
        return s.get("learner") if s.get("learner", {}).get("updates", 0) > 0 else None

    herd("up", "--port", str(free_port()), "--dashboard-port", str(dash), "--num-cpus", str(SPARES),
         "--metrics-port", str(free_port()), "--client-port", str(free_port()),
         "--agent-port", str(free_port()), "--preload")
    marker = json.loads((home / ".herd" / "cluster.json").read_text())["marker"]
    marks = home / ".herd" / "preload" / marker

    def warm(pid: int) -> bool:
        return (marks / f"{pid}.start").exists() and (marks / f"{pid}.done").exists()

    def warm_spares():
        pids = pool.spares(marker)
        return pids if len(pids) == SPARES and all(warm(p) for p in pids) else None

    cfg = {**SMALL, "run": {**SMALL["run"], "name": "pool"}}
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(cfg))
    try:
        assert jobs() == []  # nothing of `herd up` itself is listed
        spares = set(wait_for(warm_spares, 60, f"{SPARES} warm spares"))
        first_submit_ms = time.time() * 1000
        for i in range(2):
            out = herd("submit", str(path), "--runs-dir", str(tmp_path / "runs")).stdout
            job = next(ln.split()[1] for ln in out.splitlines() if ln.startswith("submitted"))
            ls = wait_for(lambda job=job: learner(job), 240, f"job {i + 1}'s first update", poll=2)
            # its learner took a spare that had imported torch & co. before the job came
            assert ls["pid"] in spares and warm(ls["pid"]), (i, ls["pid"], spares)
            # what the job took, its controller started again once its start was over
            again = set(wait_for(warm_spares, 120, "the spares started again", poll=2))
            assert again - spares, (again, spares)
            spares = again
            herd("stop", job)
            wait_for(lambda job=job: next((j["status"] for j in jobs() if j.get("submission_id") == job
                                           and j["status"] in ("SUCCEEDED", "STOPPED", "FAILED")), None),
                     180, f"job {i + 1}'s end", poll=2)
        # the two jobs (and at most a driver entry of each); nothing from before them
        listed = jobs()
        assert sum(j["type"] == "SUBMISSION" for j in listed) == 2, listed
        assert all(j["type"] in ("SUBMISSION", "DRIVER") for j in listed) and len(listed) <= 4, listed
        assert all(j["start_time"] >= first_submit_ms for j in listed), listed
    finally:
        herd("down", check=False)
    assert not marked_pids(marker)
