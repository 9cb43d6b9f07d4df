"""Bad configurations the cluster can never run: refused by the driver with a clear message
before any learner or actor process starts, leaving no run directory and nothing running.
(tests/cluster/test_config.py covers what is refused before Ray is even contacted.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from herd.actors.envs import EnvError
from herd.config import ConfigError, parse_config

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
BASE = {"env": {"id": "InvertedPendulum-v5"},
        "learner": {"replay": {"capacity": 2_000, "min_size": 100, "batch_size": 32}}}


def _cfg(**sections):
    return parse_config({k: {**BASE.get(k, {}), **sections.get(k, {})}
                         for k in {*BASE, *sections}})


CASES = {
    "unknown_env": ({"env": {"id": "Humanoid-v99"}}, EnvError, "unknown env id"),
    "actor_cpus_beyond_any_node": ({"actors": {"num_cpus": 64}}, ConfigError,
                                   "actors.num_cpus=64 .* could never be scheduled"),
    "learner_cpus_beyond_any_node": ({"learner": {"placement": {"num_cpus": 64}}}, ConfigError,
                                     "learner.placement.num_cpus"),
    "gpu_asked_none_present": ({"learner": {"compute": {"device": "cuda"}}}, SystemExit, "no GPU"),
    "batch_beyond_message_limit": ({"learner": {"server": {"max_message_mb": 1, "max_batch": 40_000}},
                                        "actors": {"num_envs": 100, "steps_per_push": 300}},
                                   ConfigError, "max_message_mb"),
    "ring_beyond_node_memory": ({"learner": {"replay": {"capacity": 10_000_000_000}}}, ConfigError,
                                "replay ring needs"),
    "tls_files_missing": ({"learner": {"server": {"tls_cert": "/nope/c.pem", "tls_key": "/nope/k.pem"}}},
                          ConfigError, "no such file"),
}


@pytest.fixture(scope="module")
def ray_client(ray_cluster):
    import ray

    ray.init(address=ray_cluster["gcs"], namespace="herd", logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("case", CASES)
def test_driver_refuses_before_starting_anything(ray_client, tmp_path, case):
    import torch
    from ray.util.state import list_actors

    from herd.driver import run

    sections, error, match = CASES[case]
    if case == "gpu_asked_none_present" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    job = f"herd-bad-{case}"
    with pytest.raises(error, match=match):
        run(_cfg(**sections), job, tmp_path / job)
    assert not (tmp_path / job).exists()  # not even a run directory
    alive = [a.name for a in list_actors(filters=[("state", "=", "ALIVE")])]
    assert not [n for n in alive if n and n.startswith(job)], alive


def test_driver_entrypoint_exits_2_with_the_message(tmp_path):
    """The Ray job's entrypoint itself: a clear line on stderr and exit status 2."""
    for cfg, match in (({"env": {"id": "NoSuchEnv-v0"}}, "unknown env id 'NoSuchEnv-v0'"),
                       ({"env": {"id": "Hopper-v5"}, "learner": {"algorithm": {"gamma": 7}}},
                        "learner.algorithm.gamma"),
                       ("{not json", "Expecting")):
        env = {**os.environ, "HERD_CONFIG_JSON": cfg if isinstance(cfg, str) else json.dumps(cfg),
               "RAY_ADDRESS": "127.0.0.1:9"}  # nothing there: must fail before Ray matters
        r = subprocess.run([sys.executable, "-m", "herd.driver", "--job-id", "x", "--runs-dir",
                            str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                           timeout=120)
        assert r.returncode == 2, r.stderr[-2000:]
        assert match in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("text, match", [
    ("env: {id: InvertedPendulum-v5}\nlearner: {server: {tls_cert: /x.pem}}\n", "tls_key"),
    (("env: {id: InvertedPendulum-v5}\n"
     "learner: {replay: {capacity: 1000, min_size: 100, batch_size: 5000}}\n"), "batch_size"),
    ("env: {id: InvertedPendulum-v5}\nlearner: {batch_size: 64}\n",
     "learner.batch_size: moved to learner.replay.batch_size"),
    ("env: {id: InvertedPendulum-v5\n", "not valid YAML"),
    ("env: {id: InvertedPendulum-v5}\nactors: {num_actors: -2}\n", "actors.num_actors"),
])
def test_submit_refuses_before_contacting_ray(tmp_path, text, match):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "herd", "--address", "http://127.0.0.1:9",
                        "submit", str(p)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 2 and match in r.stderr, r.stderr
