"""Helpers of the tests that drive real jobs through the `herd` CLI on the test cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

SMALL = {
    "env": {"id": "InvertedPendulum-v5"},
    "learner": {"algorithm": {"hidden_sizes": [32, 32]},
                "replay": {"batch_size": 32, "capacity": 20000, "min_size": 300, "ratio": 0.5,
                           "ratio_tolerance": 200},
                "server": {"publish_every_s": 0.3}, "placement": {"num_cpus": 0.5}},
    "actors": {"num_actors": 1, "num_envs": 2, "steps_per_push": 8, "warmup_steps": 200,
               "num_cpus": 0.5},
    "run": {"name": "itest", "max_env_steps": 10_000_000, "max_seconds": 300,
            "eval_every_s": 5, "eval_episodes": 1, "log_every_s": 1, "checkpoint_every_s": 30},
}


def small_learner(**fields) -> dict:
    """SMALL's learner section with these fields (by name: host=, ratio=) set in their sections."""
    from herd.learner.config import SECTION_OF

    out = {section: dict(part) for section, part in SMALL["learner"].items()}
    for name, value in fields.items():
        out.setdefault(SECTION_OF[name], {})[name] = value
    return out


def herd(*args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=180, env=os.environ.copy(), check=False)
    if check and r.returncode:
        raise AssertionError(f"herd {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def get_json(url: str):
    from herd.local import get

    return json.loads(get(url))


def status(job: str) -> dict:
    return json.loads(herd("status", job, "--json").stdout)


def wait_for(pred, timeout: float, what: str, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def controller_up(job):
    """The job's live status; None while its controller is not up (an ended job's final status too)."""
    s = ended_or_live(job)
    return None if s is None or s.get("ended") else s


def ended_or_live(job) -> dict | None:
    """`herd status --json`: the live status, or an ended job's final one; None while neither."""
    r = herd("status", job, "--json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def status_when(job: str, pred):
    """The job's status once `pred(status)` holds; None before that or while its controller is down."""
    s = controller_up(job)
    return s if s is not None and pred(s) else None


def submit(cfg: dict, tmp_dir: Path, *extra: str) -> str:
    """Write `cfg` as YAML under tmp_dir, submit it with runs in tmp_dir/runs; the job id."""
    path = tmp_dir / f"{cfg['run']['name']}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = herd("submit", str(path), "--runs-dir", str(tmp_dir / "runs"), *extra).stdout
    assert "dashboard:" in out, out
    return next(line.split()[1] for line in out.splitlines() if line.startswith("submitted"))


def interrupted(args: tuple, ready: str | None, wait_s: float = 2) -> subprocess.CompletedProcess:
    """Run `herd ARGS`, press Ctrl-C `wait_s` after its stdout showed `ready` (None: after
    `wait_s` alone; a rich Live view draws nothing on a pipe); the finished process."""
    return Interruptible(args, ready).interrupt(wait_s)


class Interruptible:
    """`interrupted` in two halves, for a test that goes on while `herd ARGS` runs: started
    (and its stdout read up to `ready`) here, Ctrl-C pressed by `interrupt(min_s)`, no sooner
    than `min_s` after `ready` (None: after its start)."""

    def __init__(self, args: tuple, ready: str | None):
        self.args = args
        self.proc = subprocess.Popen([sys.executable, "-m", "herd", *args], cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
        self.seen = ""
        while ready is not None and ready not in self.seen:
            line = self.proc.stdout.readline()
            assert line, f"herd {' '.join(args)} ended before printing {ready!r}: {self.proc.stderr.read()}"
            self.seen += line
        self.ready_at = time.monotonic()

    def interrupt(self, min_s: float = 0) -> subprocess.CompletedProcess:
        time.sleep(max(0.0, self.ready_at + min_s - time.monotonic()))
        assert self.proc.poll() is None, f"herd {' '.join(self.args)} ended by itself: {self.proc.stderr.read()}"
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=60)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, self.seen + out, err)

    def kill(self) -> None:
        """For a test that failed meanwhile."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def stepping(job: str, n: int, after: dict[str, int]):
    """The status once n actors run and each has stepped beyond `after` (its steps so far)."""
    s = status(job)
    acts = s["actors"]
    if len(acts) == n and all(a.get("steps", 0) > after.get(a["actor_id"], 0) for a in acts):
        return s
    return None
