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
