"""Start-up shortcuts: actors dial an address known before the learner is up; precompile."""

from __future__ import annotations

import pytest
import torch
import yaml

from herd.config import parse_config
from herd.driver import fixed_port, known_address
from tests.jobs import SMALL, herd


def cfg_with(**learner):
    raw = {**SMALL, "learner": {**SMALL["learner"], **learner}}
    return fixed_port(parse_config(raw, "test"))


def test_loopback_address_is_known_before_the_learner_starts() -> None:
    cfg = cfg_with()
    assert cfg.learner.port > 0
    assert known_address(cfg) == f"127.0.0.1:{cfg.learner.port}"
    assert known_address(cfg_with(port=7001, advertise_host="10.0.0.5", host="0.0.0.0")) == "10.0.0.5:7001"


def test_wildcard_host_waits_for_the_learner_node() -> None:
    assert known_address(cfg_with(host="0.0.0.0", port=7002, token="t" * 32)) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU behaviour")
def test_precompile_on_the_cpu_says_there_is_nothing_to_do(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "learner": {**SMALL["learner"], "compile": True}}))
    r = herd("precompile", str(path))
    assert "nothing to precompile" in r.stdout


def test_precompile_refuses_a_bad_config(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "env": {"id": "NoSuchEnv-v0"}}))
    r = herd("precompile", str(path), check=False)
    assert r.returncode == 2 and "NoSuchEnv-v0" in r.stderr


def test_timeline_marks_every_phase_once(monkeypatch) -> None:
    import time

    from herd.startup import PHASES, SUBMIT_ENV, Timeline

    monkeypatch.setenv(SUBMIT_ENV, repr(time.time() - 5))
    tl = Timeline(time.time() - 3)
    tl.observe({"learner": {"inserted": 0, "updates": 0, "device": "cpu"},
                "actors": [{"actor_id": "actor-0", "error": "unavailable: TimeoutError"}]})
    assert set(tl.marks) == {"driver_process"}
    tl.observe({"learner": {"inserted": 64, "updates": 0, "device": "cpu"}, "actors": [{"actor_id": "a"}]})
    first_rows = tl.marks["first_rows"]
    tl.observe({"learner": {"inserted": 128, "updates": 4, "device": "cpu"}, "actors": []})
    tl.observe({"learner": {"inserted": 256, "updates": 9, "device": "cpu"}, "actors": []})
    assert tl.marks["first_rows"] == first_rows  # the first time wins
    out = tl.seconds(capture_s=0.0)
    assert [k for k in out if k.endswith("_s") and k != "capture_s"] == [f"{p}_s" for p in PHASES]
    assert out["since"] == "herd submit" and 1.9 < out["driver_process_s"] < 2.5
    assert out["first_update_s"] >= out["first_rows_s"] >= out["actors_ready_s"]
    assert out["first_compiled_update_s"] is None and out["first_eval_s"] is None  # CPU; no eval yet
    gpu = Timeline(time.time())
    gpu.compiled = True
    gpu.observe({"learner": {"inserted": 1, "updates": 1, "device": "cuda:0"}, "actors": []})
    assert gpu.marks["first_compiled_update"] == gpu.marks["first_update"]


def test_the_env_spec_travels_from_submit_to_the_driver(monkeypatch) -> None:
    import numpy as np

    from herd.config import check_env
    from herd.startup import SPEC_ENV, spec_from_env, spec_to_env

    cfg = cfg_with()
    built = check_env(cfg)
    monkeypatch.setenv(SPEC_ENV, spec_to_env(cfg.env.id, built))
    got = spec_from_env(cfg.env.id)
    assert got.keys() == built.keys()
    for k, v in built.items():
        assert np.array_equal(np.asarray(got[k]), np.asarray(v)) and type(got[k]) is type(v), k
    assert spec_from_env("Hopper-v5") is None  # another env's spec is never taken
    monkeypatch.delenv(SPEC_ENV)
    assert spec_from_env(cfg.env.id) is None
