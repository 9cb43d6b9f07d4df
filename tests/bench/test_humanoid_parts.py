"""bench/humanoid.py's pure parts: ablation variants that parse as job configs, eval bookkeeping."""

import json

import pytest
import yaml

from bench.humanoid import ABLATIONS, ROOT, apply_overrides, first_reaching, lowest_after, variants
from herd.config import parse_config


def test_every_ablation_switches_its_piece_off_in_a_valid_config():
    base = yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text())
    full = parse_config(base).learner
    assert (full.critic_arch, full.critic_loss, full.obs_norm, full.reward_norm, full.n_step) == (
        "residual", "c51", True, True, 3)  # the family is what the pieces are taken out of
    seen = {}
    for name, overrides in variants("all")[1:]:
        cfg = parse_config(apply_overrides(yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text()),
                                           [f"{k}={json.dumps(v)}" for k, v in overrides.items()])).learner
        seen[name] = cfg
    assert seen["-residual"].critic_arch == seen["-residual"].actor_arch == "mlp"
    assert seen["-c51"].critic_loss == "mse" and not seen["-obs_norm"].obs_norm
    assert not seen["-reward_norm"].reward_norm and seen["-reward_norm"].v_max > 1000
    assert seen["-n_step"].n_step == 1 and set(ABLATIONS) == {n[1:] for n in seen}
    with pytest.raises(SystemExit, match="unknown piece"):
        variants("c51,wings")


def test_first_reaching_and_the_lowest_evaluation_after_it():
    evals = [{"mean_return": r} for r in (100, 5200, 3900, 6000, 4100)]
    assert first_reaching(evals, 5000)["mean_return"] == 5200
    assert lowest_after(evals, 5000) == 3900
    assert lowest_after(evals, 7000) is None and lowest_after([{"mean_return": 5001}], 5000) is None
