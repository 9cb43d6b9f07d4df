"""Shared fixtures: a real MuJoCo env spec, an in-process learner, a real local Ray cluster."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from herd.actors.config import EnvConfig
from herd.actors.envs import describe, make_env
from herd.proto import codec

ENV_ID = "InvertedPendulum-v5"

# Ray token auth on, as `herd up` runs it, with a token of the suite's own: nothing here may
# read or create the user's ~/.ray/auth_token (Ray's ray.init(address="local") creates one
# when RAY_AUTH_MODE is unset, which turns token auth on for the user's later clusters) or
# write to ~/.herd. Set before any test imports Ray; subprocesses and the test clusters inherit it.
_SUITE_HOME = Path(tempfile.mkdtemp(prefix="herd-tests-"))
os.environ["HERD_HOME"] = str(_SUITE_HOME / "herd")
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN_PATH"] = str(_SUITE_HOME / "ray_auth_token")
os.environ.pop("RAY_AUTH_TOKEN", None)
# the suite's clusters listen on loopback only, and its processes dial them there (cluster/local.py)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
(_SUITE_HOME / "ray_auth_token").write_text(secrets.token_hex(32))
USER_RAY_TOKEN = Path.home() / ".ray" / "auth_token"
_USER_TOKEN_BEFORE = USER_RAY_TOKEN.exists()


def pytest_collection_modifyitems(config, items):
    """Tests marked `cuda` skip where torch sees no GPU (`pytest -m cuda` selects them all)."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs CUDA"))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SUITE_HOME, ignore_errors=True)
    if USER_RAY_TOKEN.exists() and not _USER_TOKEN_BEFORE:
        print(f"\nFAILED: the suite created {USER_RAY_TOKEN}: every Ray cluster this user starts "
              "from now on runs with token auth", file=sys.stderr)
        session.exitstatus = 1


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
    from herd.learner.config import LearnerConfig
    from herd.learner.learner import Learner

    made = []

    def make(**overrides):
        cfg = LearnerConfig.flat(**{"capacity": 5_000, "min_size": 1_000, "batch_size": 64,
                                    "hidden_sizes": (64, 64), **overrides})
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
    """A real local Ray head with dashboard and job server, on ports of its own, with token auth
    (the suite's token) and every port on loopback, as `herd up` starts it."""
    from herd.local import CLUSTER_MARKER_ENV, dashboard_up, stop_processes_marked

    ray_bin = str(Path(sys.executable).with_name("ray"))
    gcs, dash, metrics = _free_port(), _free_port(), _free_port()
    marker = f"tests-{secrets.token_hex(6)}"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", CLUSTER_MARKER_ENV: marker}
    temp_dir = tmp_path_factory.mktemp("ray", numbered=True)
    subprocess.run([ray_bin, "start", "--head", f"--port={gcs}", "--node-ip-address=127.0.0.1",
                    f"--temp-dir={temp_dir}",
                    "--num-cpus=4", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                    f"--dashboard-port={dash}", f"--metrics-export-port={metrics}",
                    # own agent and client ports too: a `make cluster-up` head may hold the defaults
                    f"--dashboard-agent-listen-port={_free_port()}",
                    f"--ray-client-server-port={_free_port()}",
                    "--disable-usage-stats"], check=True, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{dash}"
    deadline = time.monotonic() + 120
    while not dashboard_up(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the test cluster's dashboard never answered at {url}")
        time.sleep(1)
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{gcs}"
    os.environ["HERD_DASHBOARD_URL"] = url
    yield {"gcs": f"127.0.0.1:{gcs}", "dashboard": url, "temp_dir": str(temp_dir),
           "metrics": f"http://127.0.0.1:{metrics}/metrics", "marker": marker}
    # this cluster's processes only (`ray stop` would stop every Ray cluster on the machine).
    # A short grace: on SIGTERM the GCS, raylet and autoscaler monitor outlive the default 15 s
    # before the SIGKILL, and nothing of a test cluster needs a graceful end
    stop_processes_marked(marker, timeout=2)
