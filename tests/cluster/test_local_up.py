"""`herd up` / `herd down` as a user runs them, on one cluster of the test's own (private HOME,
loopback, token auth), each phase a function below:

- up: token auth on with Herd's own token (never the user's ~/.ray/auth_token), every port Ray
  opens on loopback, --preload's spare workers warm when it returns, no job of its own in the
  dashboard's list, a second `up` finding it;
- jobs one after another: every job's learner starts in a spare worker that has imported torch
  & co. (herd/pool.py, herd/preload.py), the first job's in one `herd up` started, the second's in
  one the first job started again once it had taken them;
- down while the second job trains: the job is wound down first (summary.json, final
  checkpoint, books with steps = acked = received = inserted), one line per job, then that
  cluster stops, and that cluster only (the suite's cluster keeps answering);
- a run that kept only checkpoint-best/ (a cluster stopped with --force) resumes from it on the
  suite's cluster, named, and its metrics.csv and curve.png go on from that run's.

Real parts: the real learner over gRPC, real MuJoCo actors, real Ray clusters."""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from herd import pool
from herd.local import CLUSTER_MARKER_ENV, dashboard_up
from tests.jobs import SMALL, controller_up, herd, small_learner, wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_pids(marker: str) -> list[int]:
    needle = f"{CLUSTER_MARKER_ENV}={marker}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                out.append(int(entry.name))
        except OSError:
            pass
    return out


def listening(pids: list[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on (/proc/net/tcp{,6})."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                addr, port = f[1].split(":")
                raw = bytes.fromhex(addr)
                # /proc prints each 32-bit word little-endian
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                ip = socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, raw)
                found.append(f"{ip}:{int(port, 16)}")
    return found


def loopback(addr: str) -> bool:
    ip = addr.rsplit(":", 1)[0]
    return ip.startswith(("127.", "::ffff:127.")) or ip == "::1"


def private_home(tmp_path: Path) -> tuple[Path, dict, int]:
    """A HOME of the test's own (its ~/.herd, never the user's ~/.ray), the environment that
    `herd` runs in there, and the dashboard port it is to use."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERD_HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
                        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    dash = free_port()
    # Ray's default temp dir (its "newest cluster" pointer) a short private one too: never /tmp/ray
    tmp = Path(tempfile.mkdtemp(prefix="hu", dir="/tmp"))
    env.update(HOME=str(home), HERD_DASHBOARD_URL=f"http://127.0.0.1:{dash}", TMPDIR=str(tmp))
    return home, env, dash


SPARES = 3
DOWNED = {**SMALL, "learner": small_learner(min_size=300),
          "run": {**SMALL["run"], "name": "downed", "save_replay": True, "eval_every_s": 2,
                  "checkpoint_every_s": 600}}


class Own:
    """`herd` in the private HOME of `private_home`, and what its cluster answers."""

    def __init__(self, tmp_path: Path):
        self.home, self.env, self.dash = private_home(tmp_path)
        self.marker = ""

    def __call__(self, *args, timeout=240) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def ok(self, *args) -> subprocess.CompletedProcess:
        r = self(*args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def jobs(self) -> list[dict]:
        token = (self.home / ".herd" / "ray_auth_token").read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{self.dash}/api/jobs/",
                                     headers={"Authorization": f"Bearer {token}"})
        return json.loads(urllib.request.urlopen(req, timeout=10).read())

    def learner(self, job: str):
        r = self("status", job, "--json")
        s = json.loads(r.stdout) if r.returncode == 0 else {}
        return s.get("learner") if s.get("learner", {}).get("updates", 0) > 0 else None

    def warm(self, pid: int) -> bool:
        marks = self.home / ".herd" / "preload" / self.marker
        return (marks / f"{pid}.start").exists() and (marks / f"{pid}.done").exists()

    def warm_spares(self):
        pids = pool.spares(self.marker)
        return pids if len(pids) == SPARES and all(self.warm(p) for p in pids) else None

    def submit(self, cfg: dict, tmp_path: Path) -> str:
        path = tmp_path / f"{cfg['run']['name']}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        out = self.ok("submit", str(path), "--runs-dir", str(tmp_path / "runs")).stdout
        return next(ln.split()[1] for ln in out.splitlines() if ln.startswith("submitted"))


def check_up(own: Own, r: subprocess.CompletedProcess) -> None:
    """`herd up --preload` just returned `r`."""
    home, record = own.home, own.home / ".herd" / "cluster.json"
    assert r.returncode == 0, r.stderr
    # --preload: it returned once its spare workers had imported torch & co.
    marks = [p.name for p in (home / ".herd" / "preload").glob("*/*")]
    started = sorted(n.split(".")[0] for n in marks if n.endswith(".start"))
    assert started and started == sorted(n.split(".")[0] for n in marks if n.endswith(".done")), marks
    token = home / ".herd" / "ray_auth_token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and "token auth on" in r.stdout
    assert not (home / ".ray").exists()  # the user's Ray token is neither read nor made
    own.marker = json.loads(record.read_text())["marker"]
    # GCS, raylet, dashboard, client server, agent, metrics...: on a loaded box the last
    # of them may still be binding when `herd up` returns
    def all_listening():
        ports = listening(marked_pids(own.marker))
        return ports if len(ports) >= 5 else None

    ports = wait_for(all_listening, 30, "5 or more of Ray's ports listening")
    assert all(loopback(a) for a in ports), ports
    # no token, no answer; herd's CLI finds the token by itself
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{own.dash}/api/version", timeout=10)
    assert e.value.code == 401
    # the dashboard lists no job: the spares came from the raylet, not from a driver
    assert own.jobs() == []
    r = own("list")
    assert r.returncode == 0 and "no Herd jobs on the cluster" in r.stdout, r.stderr
    # a second `up` finds it and says so: no second start, no false auth warning
    r = own("up", "--dashboard-port", str(own.dash))
    assert r.returncode == 0 and "already up" in r.stdout and not r.stderr, (r.stdout, r.stderr)
    assert json.loads(record.read_text())["marker"] == own.marker


def jobs_in_warm_spares(own: Own, tmp_path: Path) -> tuple[str, Path]:
    """Two jobs, each learner in a warm spare; the first stopped, the second (DOWNED) left
    training with an evaluation kept as checkpoint-best/: its id and run folder."""
    spares = set(wait_for(own.warm_spares, 60, f"{SPARES} warm spares"))
    # another Ray cluster started on this machine since, and gone: Ray's pointer to the newest
    # cluster names a dead GCS; the jobs' drivers still join the cluster `herd up` recorded
    (Path(own.env["TMPDIR"]) / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
    first_submit_ms = time.time() * 1000
    for i, cfg in enumerate(({**SMALL, "run": {**SMALL["run"], "name": "pool"}}, DOWNED)):
        job = own.submit(cfg, tmp_path)
        ls = wait_for(lambda job=job: own.learner(job), 240, f"job {i + 1}'s first update", poll=2)
        # its learner took a spare that had imported torch & co. before the job came
        assert ls["pid"] in spares and own.warm(ls["pid"]), (i, ls["pid"], spares)
        # what the job took, its controller started again once its start was over
        again = set(wait_for(own.warm_spares, 120, "the spares started again", poll=2))
        assert again - spares, (again, spares)
        spares = again
        if i == 0:
            own.ok("stop", job)
            wait_for(lambda job=job: next((j["status"] for j in own.jobs() if j.get("submission_id") == job
                                           and j["status"] in ("SUCCEEDED", "STOPPED", "FAILED")), None),
                     180, "job 1's end", poll=2)
    # the two jobs (and at most a driver entry of each); nothing from before them
    listed = own.jobs()
    assert sum(j["type"] == "SUBMISSION" for j in listed) == 2, listed
    assert all(j["type"] in ("SUBMISSION", "DRIVER") for j in listed) and len(listed) <= 4, listed
    assert all(j["start_time"] >= first_submit_ms for j in listed), listed
    run = tmp_path / "runs" / job
    # training, and an evaluation kept as checkpoint-best/; no final checkpoint yet
    wait_for(lambda: (run / "checkpoint-best" / "model.pt").exists(), 240, "a best checkpoint")
    assert not (run / "checkpoint").exists() and not (run / "summary.json").exists()
    return job, run


def check_wound_down(r: subprocess.CompletedProcess, job: str, run: Path) -> None:
    """`herd down --grace 90` returned `r` while `job` trained."""
    assert r.returncode == 0, r.stderr
    said = r.stdout.split(f"{job}: ", 1)[1].splitlines()
    assert said[0] == "wound down: summary.json, checkpoint/", r.stdout
    assert said[1].startswith("  books exact: steps ") and said[2] == f"  results: {run}", r.stdout
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines() if "results:" not in ln), r.stdout
    assert "Ray stopped" in r.stdout and "stopped" in r.stdout, r.stdout
    s = json.loads((run / "summary.json").read_text())
    assert s["stop_reason"] == "cluster going down (herd down)"
    assert (run / "checkpoint" / "model.pt").exists() and s["checkpoint"]
    ls = s["learner"]
    assert s["actor_steps"] == s["actor_acked"] == ls["received"] == ls["inserted"] > 0, s
    assert s["wind_down"]["grace_s"] == 90 and s["wind_down"]["replay_left_out"] is None
    assert (run / "checkpoint" / "replay.pt").exists()
    assert s["final_eval"]["mean_return"] is not None
    assert (run / "curve.png").read_bytes()[:4] == b"\x89PNG"  # its picture, written as it ended


def best_only_run_resumes(run: Path, tmp_path: Path) -> None:
    """A copy of `run` with only checkpoint-best/ (as --force leaves one) resumes from it, named,
    on the suite's cluster."""
    job = run.name
    bare = tmp_path / "bare"
    shutil.copytree(run, bare / job)
    for gone in ("checkpoint", "checkpoints", "summary.json"):
        shutil.rmtree(bare / job / gone, ignore_errors=True)
        (bare / job / gone).unlink(missing_ok=True)
    # herd plot: the run and its copy (metrics.csv alone: no summary) are one config, one band
    r = herd("plot", str(run), str(bare / job), "-o", str(tmp_path / "both.png"))
    assert "wrote" in r.stdout and (tmp_path / "both.png").stat().st_size > 1000
    cfg = {**DOWNED, "run": {**DOWNED["run"], "name": "again"}}
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(cfg))
    runs2, before = tmp_path / "runs2", rows_of(bare / job)
    r = herd("submit", str(tmp_path / "again.yaml"), "--runs-dir", str(runs2),
             "--resume", str(bare / job))
    again = next(ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("submitted"))
    try:
        assert f"(resuming {bare / job}/checkpoint-best: the newest checkpoint there" in r.stdout, r.stdout
        first = wait_for(lambda: controller_up(again), 150, "the resumed job's controller")
        assert first["learner"]["restored"]["path"].endswith("checkpoint-best")
        assert first["learner"]["updates"] > 0
        # its metrics.csv goes on from the earlier run's rows, then rows of its own
        wait_for(lambda: len(rows_of(runs2 / again)) > len(before), 60, "a row of its own")
    finally:
        herd("stop", again, check=False)
    wait_for(lambda: (runs2 / again / "summary.json").exists(), 120, "its summary")
    resumed = json.loads((runs2 / again / "summary.json").read_text())
    assert resumed["resumed_from"].endswith(f"{job}/checkpoint-best")
    assert resumed["lineage"]["earlier_run"] == str(bare / job)
    assert "max_env_steps counts the env steps of the run resumed" in resumed["lineage"]["budgets"]
    after = rows_of(runs2 / again)
    assert after[:len(before)] == before
    assert float(after[len(before)]["time_s"]) > float(before[-1]["time_s"])
    # env steps go on from the checkpoint's (checkpoint-best/ is older than the run's last row)
    assert int(after[len(before)]["env_steps"]) >= first["learner"]["restored"]["received"]
    assert (runs2 / again / "curve.png").exists()  # the earlier run's evaluations at least


def rows_of(run: Path) -> list[dict]:
    try:
        with open(run / "metrics.csv", newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def test_up_jobs_in_warm_spares_down_winds_the_job_down_and_stops_only_it(ray_cluster, tmp_path):
    own = Own(tmp_path)
    record = own.home / ".herd" / "cluster.json"
    r = own("up", "--port", str(free_port()), "--dashboard-port", str(own.dash), "--num-cpus", str(SPARES),
            "--metrics-port", str(free_port()), "--client-port", str(free_port()),
            "--agent-port", str(free_port()), "--preload")
    try:
        check_up(own, r)
        job, run = jobs_in_warm_spares(own, tmp_path)
        r = own("down", "--grace", "90")
    finally:
        down = own("down", "--force")  # a failed check must not leave that cluster running
    check_wound_down(r, job, run)
    assert down.returncode == 0 and "nothing stopped" in down.stderr  # the first `down` had stopped it
    assert not marked_pids(own.marker) and not record.exists()
    assert not (own.home / ".herd" / "preload" / own.marker).exists()
    assert dashboard_up(ray_cluster["dashboard"])  # the suite's cluster was not touched
    best_only_run_resumes(run, tmp_path)


def test_the_token_hand_off_follows_the_address_not_its_spelling():
    """`herd submit` hands learner.server.token over in a private file when the dashboard is on this
    machine, however the URL spells it (http://localhost:8265 used to put it in the job's env
    vars, which the dashboard shows, because the test was '127.0.0.1' in the URL)."""
    from herd.local import is_this_machine

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # UDP: picks the outgoing interface, sends nothing
        own = s.getsockname()[0]
    for host in ("localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]", own):
        assert is_this_machine(host), host
    for host in ("198.51.100.7", "127.0.0.1.example.invalid", ""):
        assert not is_this_machine(host), host
