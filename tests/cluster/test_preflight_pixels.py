"""The cluster preflight sizes a pixel replay as the learner does (each uint8 frame once, capped
to what the learner's device holds: learner/replay/fit.py), not as two float32 observations a row:
a 1M-transition pixel job is not refused on a CPU-learner cluster; a state ring too large still is.
Ray's view of the cluster is faked (one node of 16 GiB, no GPU): a unit test of the preflight."""

from __future__ import annotations

import pytest

from herd import job_setup
from herd.config import ConfigError, parse_config

NODE = {"Alive": True, "Resources": {"CPU": 2.0, "memory": 16 * 2**30}}


@pytest.fixture
def cpu_cluster(monkeypatch):
    monkeypatch.setattr(job_setup.ray, "nodes", lambda: [NODE])
    monkeypatch.setattr(job_setup.ray, "cluster_resources", lambda: {"CPU": 2.0})


def env(frame_stack: int) -> dict:
    shape = [3, 84, 84] if frame_stack else [348]
    return {"obs_shape": shape, "action_shape": [6], "frame_stack": frame_stack}


def test_a_million_frame_rows_pass_on_a_cpu_cluster(cpu_cluster):
    cfg = parse_config({"env": {"id": "dm_control/walker-walk-v0", "pixels": {"size": 84}},
                        "learner": {"replay": {"capacity": 1_000_000}}})
    assert isinstance(job_setup.check_cluster(cfg, env(3)), list)


def test_a_state_ring_beyond_the_node_is_still_refused(cpu_cluster):
    cfg = parse_config({"env": {"id": "Humanoid-v5"},
                        "learner": {"replay": {"capacity": 10_000_000}}})
    with pytest.raises(ConfigError, match="replay ring needs"):
        job_setup.check_cluster(cfg, env(0))


def test_submit_refuses_a_key_the_pixel_update_ignores_before_ray():
    """`herd submit` of a pixel config with a state-update key set: one line, nothing started
    (the refusal comes before the env is made or Ray is asked)."""
    from herd.submission import submit

    with pytest.raises(ConfigError, match=r"learner\.algorithm\.critic_loss: a pixel job's update "
                                          r"ignores it .*; leave it at its default$") as e:
        submit("configs/invertedpendulum-pixels.yaml", sets=["learner.algorithm.critic_loss=c51"],
               address="http://127.0.0.1:9")
    assert "\n" not in str(e.value)
