"""env.randomize in a job config: bad ranges refused with one line naming the key."""

from __future__ import annotations

import pytest

from herd.config import ConfigError, parse_config

BASE = {"env": {"id": "InvertedPendulum-v5"}}


def refusal(randomize: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config({**BASE, "env": {**BASE["env"], "randomize": randomize}}, "job.yaml")
    return str(e.value)


@pytest.mark.parametrize("randomize, says", [
    ({"mass": [1.2, 0.8]}, "job.yaml: env.randomize: mass: [1.2, 0.8] is not a range (low above high)"),
    ({"friction": [0, 1.5]}, ("job.yaml: env.randomize: friction: [0, 1.5] scales the model's value: "
                             "both ends must be above 0")),
    ({"seed": 3, "heldout_seed": 3}, ("job.yaml: env.randomize: heldout_seed equals seed (3): held-out "
                                     "draws must differ from training's")),
    ({"gravity": [1.0]}, "job.yaml: env.randomize.gravity: "),
    ({"masses": [0.8, 1.2]}, "job.yaml: env.randomize.masses: no such key (did you mean env.randomize.mass?)"),
])
def test_a_bad_range_is_refused_in_one_line(randomize, says):
    line = refusal(randomize)
    assert "\n" not in line and line.startswith(says), line


def test_defaults_nulls_and_offsets_below_zero_are_taken():
    cfg = parse_config({**BASE, "env": {**BASE["env"], "randomize": {"geom_rgb": [-0.3, 0.1], "mass": None}}})
    r = cfg.env.randomize
    assert r.geom_rgb == (-0.3, 0.1) and r.mass is None and r.friction == (0.7, 1.3)
    assert parse_config(BASE).env.randomize is None  # off unless asked for


def test_the_example_trains_the_arm_randomized_from_its_camera():
    from herd.config import load_config
    from tests.conftest import ROOT

    cfg = load_config(ROOT / "examples" / "myrobot" / "myrobot-pixels.yaml")
    assert cfg.env.pixels.camera == "top" and cfg.env.randomize is not None
    assert cfg.env.randomize.mass == (0.8, 1.2)  # the defaults: `randomize: {}`
    assert cfg.learner.encoder.privileged_critic  # the critics read the state and the physics
