"""Shared fixtures: a real MuJoCo env spec, an in-process learner, a real local Ray cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.config import EnvConfig
from actors.envs import describe, make_env
from proto import codec

ENV_ID = "InvertedPendulum-v5"


@pytest.fixture(scope="session")
def env_cfg() -> EnvConfig:
    return EnvConfig(id=ENV_ID)


@pytest.fixture(scope="session")
def spec(env_cfg):
    d = describe(make_env(env_cfg))
    return codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])


@pytest.fixture
def make_learner(spec):
    """In-process Learner (real gRPC server on loopback) with small sizes; stopped afterwards."""
    from learner.config import LearnerConfig
    from learner.service import Learner

    made = []

    def make(**overrides):
        cfg = LearnerConfig(**{"buffer_capacity": 5_000, "min_replay_size": 1_000,
                               "batch_size": 64, "hidden_sizes": (64, 64), **overrides})
        learner = Learner(cfg, spec)
        made.append(learner)
        return learner

    yield make
    for learner in made:
        learner.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """A real local Ray head with dashboard and job server, on ports of its own."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    gcs, dash, metrics = _free_port(), _free_port(), _free_port()
    # Independent of whatever token this machine's ~/.ray holds: tests run without Ray auth.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    temp_dir = tmp_path_factory.mktemp("ray", numbered=True)
    subprocess.run([ray_bin, "start", "--head", f"--port={gcs}", "--node-ip-address=127.0.0.1",
                    f"--temp-dir={temp_dir}",
                    "--num-cpus=4", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                    f"--dashboard-port={dash}", f"--metrics-export-port={metrics}",
                    # own agent and client ports too: a `make cluster-up` head may hold the defaults
                    f"--dashboard-agent-listen-port={_free_port()}",
                    f"--ray-client-server-port={_free_port()}",
                    "--disable-usage-stats"], check=True, env=env, stdout=subprocess.DEVNULL)
    from cluster.local import dashboard_up

    url = f"http://127.0.0.1:{dash}"
    deadline = time.monotonic() + 120
    while not dashboard_up(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the test cluster's dashboard never answered at {url}")
        time.sleep(1)
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{gcs}"
    os.environ["HERD_DASHBOARD_URL"] = url
    yield {"gcs": f"127.0.0.1:{gcs}", "dashboard": url, "temp_dir": str(temp_dir),
           "metrics": f"http://127.0.0.1:{metrics}/metrics"}
    stop_processes_mentioning(str(temp_dir))


def stop_processes_mentioning(marker: str, timeout: float = 15.0) -> None:
    """Stop this test cluster's processes and their children (agents, workers) only:
    `ray stop` would stop every Ray cluster on the machine."""
    import signal

    def tree():
        parent, marked = {}, set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                if marker.encode() in (entry / "cmdline").read_bytes():
                    marked.add(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
        grew = True
        while grew:
            more = {p for p, pp in parent.items() if pp in marked} - marked
            grew = bool(more)
            marked |= more
        return marked

    victims = tree()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while any(Path(f"/proc/{p}").exists() for p in victims) and time.monotonic() < deadline:
            time.sleep(0.2)
