"""A pixel run saved when its update read learner.encoder.pixel_* resumes under a config of the
keys it reads now (learner.algorithm's, learner.replay's): `herd submit --resume` checks the
saved networks against the new config's (cluster/submission.py check_resume), and the Learner
loads the saved update into one built from the new config. Its evaluation and export:
tests/learner/test_frame_state.py."""

from __future__ import annotations

import pytest
import torch
import yaml

from herd.config import load_config
from herd.learner.build import build_update
from herd.learner.config import LearnerConfig
from herd.proto import codec
from tests.conftest import ROOT

CONFIG = ROOT / "configs" / "invertedpendulum-pixels.yaml"
SPEC = codec.spec_to_proto("InvertedPendulum-v5", (3, 32, 32), "uint8", (1,), [-3.0], [3.0],
                           frame_stack=3)


def old_run(tmp_path, hidden: list[int]):
    """runs/<job>/ as a pixel job wrote it with the old keys: config.yaml and checkpoint/."""
    cfg = load_config(CONFIG)
    dumped = cfg.model_dump(mode="json")
    dumped["learner"]["algorithm"] = LearnerConfig().algorithm.model_dump(mode="json")
    dumped["learner"]["encoder"].update(pixel_hidden_sizes=hidden, pixel_lr=1e-3, pixel_batch_size=64,
                                        pixel_tau=0.01, pixel_init_alpha=0.01)
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(dumped))
    saved = LearnerConfig.from_saved(dumped["learner"], pixels=True, device="cpu")
    sac = build_update(saved, SPEC, "cpu")
    torch.save({"sac": sac.state_dict(), "config": dumped["learner"], "updates": 0, "received": 0,
                "inserted": 0, "policy_version": 1}, run / "checkpoint" / "model.pt")
    return cfg, run, sac


def test_an_old_pixel_run_resumes_under_the_new_keys(tmp_path):
    from herd.config import ConfigError
    from herd.submission import check_resume

    cfg, run, sac = old_run(tmp_path, [128, 128])
    ckpt, _ = check_resume(str(run), cfg)
    assert ckpt == (run / "checkpoint").resolve()
    resumed = build_update(cfg.learner, SPEC, "cpu")  # what the Learner's restore loads into
    resumed.load_state_dict(torch.load(ckpt / "model.pt", weights_only=True)["sac"])
    assert [t.data for t in resumed.policy_weights(1).tensors] == \
        [t.data for t in sac.policy_weights(1).tensors]
    _, other, _ = old_run(tmp_path / "b", [64, 64])  # other networks: still refused
    with pytest.raises(ConfigError, match="hidden_sizes"):
        check_resume(str(other), cfg)
