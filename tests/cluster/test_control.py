"""The controller's CLI endpoint (cluster/control.py) without Ray: a stand-in controller behind
a real ControlServer, the real `herd` CLI in a subprocess finding it through HERD_HOME."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from herd import control

ROOT = Path(__file__).resolve().parents[2]


class FakeController:
    def __init__(self, job_id: str):
        self.job_id, self.n, self.stopped = job_id, 1, False

    def status(self) -> dict:
        return {"job_id": self.job_id, "time": 1.5, "learner": {"error": "learner unavailable: x"},
                "actors": [], "target_actors": self.n, "waiting_actors": 0, "cpus_free": 2.0,
                "retired": [], "dead_incarnations": [], "progress": {}, "relays": {},
                "stop_requested": self.stopped}

    def latest_progress(self) -> dict:
        return {"env_steps": 7}

    def scale(self, n: int) -> dict:
        if n == 13:
            raise ValueError("unlucky")
        self.n = n
        return {"actors": n, "removed": 0, "cancelled": 0, "waiting": [], "cpus_free": 2.0,
                "cpus_per_actor": 0.5}

    def request_stop(self, why: str | None = None, grace_s: float | None = None) -> bool:
        self.stopped = True
        return True


@pytest.fixture
def served():
    job = f"herd-fake-{os.getpid()}-{id(object()):x}"
    fake = FakeController(job)
    server = control.ControlServer(fake, job)
    yield job, fake, server
    server.close()


def herd(*args, **env):
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env}, check=False)


def test_requests_without_the_token_are_refused(served):
    _, fake, server = served
    url = f"http://{server.address}"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": server.token}):
        for method in ("GET", "POST"):
            path = "/status" if method == "GET" else "/stop"
            req = urllib.request.Request(url + path, method=method, headers=headers,
                                         data=b"{}" if method == "POST" else None)
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            assert e.value.code == 401
    assert not fake.stopped


def test_loopback_record_private_and_the_same_answers(served):
    job, fake, server = served
    assert server.address.startswith("127.0.0.1:")
    rec = control.record_path(job)
    assert stat.S_IMODE(rec.stat().st_mode) == 0o600
    assert stat.S_IMODE(rec.parent.stat().st_mode) == 0o700
    ep = control.find(job)
    assert ep.status() == fake.status() and ep.progress() == {"env_steps": 7}
    with pytest.raises(RuntimeError, match="unlucky"):
        ep.scale(13)
    # the CLI, in a process of its own, finds the record and prints what `herd status` did
    r = herd("status", job, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(fake.status(), default=str))
    r = herd("scale", job, "--actors", "3")
    assert r.returncode == 0 and r.stdout.strip() == f"{job}: 3 actors" and fake.n == 3
    r = herd("scale", job, "--actors", "13")
    assert r.returncode == 2 and "ValueError: unlucky" in r.stderr and "Traceback" not in r.stderr
    r = herd("status", job)
    assert r.returncode == 0 and "3 starting" in r.stdout  # the rich view: 0 of 3 actors up
    r = herd("stop", job)
    assert r.returncode == 0 and "stop requested" in r.stdout and fake.stopped
    server.close()
    assert not rec.exists()


def test_the_status_path_imports_neither_ray_nor_torch(served):
    job, _, _ = served
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "herd", "status", job, "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    modules = {ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time")}
    assert "herd.control" in modules and not modules & {"ray", "torch", "grpc", "numpy"}


def test_the_python_api_takes_the_endpoint_too(served, tmp_path):
    """herd.Job.status() / stop() answer as `herd status --json` / `herd stop` do, and without a
    Ray driver (no ray import) where this machine holds the endpoint's record."""
    job, fake, _ = served
    cli = json.loads(herd("status", job, "--json").stdout)
    code = ("import json, sys, herd; job = herd.Job(sys.argv[1], sys.argv[2], client=None); "
            "print(json.dumps(job.status(), default=str)); job.stop(); "
            "print(json.dumps(sorted(m for m in ('ray', 'torch', 'grpc') if m in sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code, job, str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    status, imported = (json.loads(ln) for ln in r.stdout.splitlines())
    assert status == cli
    assert fake.stopped and imported == []


def test_a_stale_record_sends_the_cli_to_ray(tmp_path):
    """A record an ended job left (nothing listens there any more): the Ray path answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = "herd-stale-20261201-000000-0000"
    control.write_record(job, {"job_id": job, "address": f"127.0.0.1:{port}", "token": "t"})
    try:
        with pytest.raises(control.Unreachable):
            control.find(job).status()
        env = {"RAY_ADDRESS": f"127.0.0.1:{port}", "HERD_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
        r = herd("status", job, **env)
        assert r.returncode == 2 and f"no Ray cluster answers at 127.0.0.1:{port}" in r.stderr
    finally:
        control.remove_record(job)


def test_another_jobs_endpoint_is_not_taken_for_this_one(served):
    _, _, server = served
    other = "herd-other-20261201-000000-0000"
    control.write_record(other, {"job_id": other, "address": server.address, "token": server.token})
    try:
        with pytest.raises(control.Unreachable, match="another job"):
            control.find(other).status()
    finally:
        control.remove_record(other)
