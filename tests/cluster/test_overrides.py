"""`herd submit --set/--seed/--name`: validated exactly like the YAML, one line naming the key;
one seed from which the learner's, the actors' and the evaluation's derive."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from herd.config import ConfigError, load_config, parse_config, parse_sets, with_overrides

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "demo.yaml"


def test_sets_seed_and_name_apply_and_derive():
    cfg = load_config(DEMO, ["learner.replay.batch_size=64", "learner.algorithm.hidden_sizes=[32, 32]",
                             "run.target_return=null"], seed=3, name="mine")
    assert cfg.learner.replay.batch_size == 64 and cfg.learner.algorithm.hidden_sizes == (32, 32)
    assert cfg.run.target_return is None and cfg.run.name == "mine"
    assert (cfg.run.seed, cfg.learner.algorithm.seed, cfg.actors.seed, cfg.eval_seed) == (3, 3, 3, 13_000)
    # a dumped config reads back as itself (resume, runs/JOB/config.yaml)
    import yaml

    from herd.config import dump_config

    assert parse_config(yaml.safe_load(dump_config(cfg))) == cfg
    # run.seed in the YAML: the others follow it; a different explicit one is a contradiction
    raw = {"env": {"id": "InvertedPendulum-v5"}, "run": {"seed": 5}}
    assert parse_config(raw).actors.seed == 5
    with pytest.raises(ConfigError, match="contradicts run.seed"):
        parse_config({**raw, "learner": {"algorithm": {"seed": 1}}})
    assert load_config(DEMO).eval_seed == 10_000  # no seed: the evaluations as before


@pytest.mark.parametrize(("sets", "kw", "want"), [
    (["learner.replay.batch_sise=64"], {}, ("--set learner.replay.batch_sise=64: learner.replay.batch_sise: "
                                           "no such key (did you mean learner.replay.batch_size?)")),
    (["learner.batch_sise=64"], {}, ("--set learner.batch_sise=64: learner.batch_sise: no such key "
                                    "(did you mean learner.replay.batch_size?)")),
    (["learner.batch_size=64"], {}, "--set learner.batch_size=64: learner.batch_size: moved to learner.replay.batch_size"),
    (["learner.compile_process=true"], {}, ("--set learner.compile_process=true: learner.compile_process: "
                                           "removed, it measured no gain (docs/tried.md)")),
    (["learner.compute.cuda_early=true"], {}, ("--set learner.compute.cuda_early=true: "
                                             "learner.compute.cuda_early: removed, it measured no gain")),
    (["lerner.batch_size=64"], {}, "--set lerner.batch_size=64: lerner: no such key (did you mean learner?)"),
    (["learner.replay.batch_size=lots"], {},
     "--set learner.replay.batch_size=lots: learner.replay.batch_size: Input should be a valid integer"),
    (["learner.replay.batch_size"], {}, "--set 'learner.replay.batch_size': expected section.key=value"),
    (["env.id.x=1"], {}, "--set env.id.x: env.id is a value, not a section"),
    (["learner.replay.batch_size=[1"], {}, "--set learner.replay.batch_size: '[1' is not a YAML value"),
    (["learner.replay.batch_size=10000000"], {}, ("with --set learner.replay.batch_size=10000000: "
                                                 "learner.replay.batch_size exceeds learner.replay.capacity")),
    ([], {"seed": -1}, "--seed -1: run.seed: Input should be greater than or equal to 0"),
    ([], {"name": "a b"}, "--name a b: run.name: String should match pattern"),
])
def test_a_bad_override_is_one_line_naming_it(sets, kw, want):
    with pytest.raises(ConfigError) as e:
        load_config(DEMO, sets, **kw)
    assert want in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert "Value error" not in str(e.value)  # pydantic's prefix: the validator's own sentence only


def test_one_override_implementation():
    """bench/humanoid.py's --set and herd tune's grid cells apply overrides as herd submit does."""
    from bench.humanoid import apply_overrides
    from herd import tune

    base = {"env": {"id": "X"}, "learner": None}
    sets = ["learner.algorithm.n_step=3"]
    assert apply_overrides(base, sets) == with_overrides(base, parse_sets(sets))
    assert tune.with_overrides is with_overrides


def test_exploration_noise_follows_the_actor_seed():
    from bench.actors import random_policy_weights
    from herd.actors.policy import MLPPolicy

    policy = MLPPolicy(random_policy_weights(4, 1, hidden=(16, 16)), np.array([-3.0]), np.array([3.0]))
    obs = np.zeros((8, 4), np.float32)

    def noisy(seed):
        g = torch.Generator().manual_seed(seed)
        return np.concatenate([policy.act(obs, generator=g) for _ in range(3)])

    assert np.array_equal(noisy(7), noisy(7)) and not np.array_equal(noisy(7), noisy(8))


def test_herd_submit_refuses_a_bad_override_in_one_line_before_any_cluster(capsys, tmp_path):
    from herd.cli import main

    assert main(["submit", str(DEMO), "--set", "learner.replay.batch_sise=64", "--seed", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("herd: --set learner.replay.batch_sise=64: learner.replay.batch_sise: no such key "
                   "(did you mean learner.replay.batch_size?)")
    assert main(["submit", str(DEMO), "--set", "learner.batch_size=64"]) == 2  # the flat layout
    err = capsys.readouterr().err.strip()
    assert err == "herd: --set learner.batch_size=64: learner.batch_size: moved to learner.replay.batch_size"
    assert main(["submit", str(DEMO), "--working-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("herd: --working-dir ") and err.endswith("no such directory")
    # the user's env module is imported as the nodes will: from the --py-modules given
    pkg = tmp_path / "mods" / "herd_no_env_here"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    assert main(["submit", str(DEMO), "--py-modules", str(pkg), "--set", "env.module=herd_no_env_here",
                 "--set", "env.id=HerdNoSuchEnv-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown env id 'HerdNoSuchEnv-v0'" in err and len(err.splitlines()) == 1
    assert "herd_no_env_here" in sys.modules  # it was importable, from the py_module


def test_yaml_and_override_errors_together_each_name_their_key(tmp_path):
    """A typo in the file and a bad --set at once: one line each, the flag's line naming it."""
    path = tmp_path / "c.yaml"
    path.write_text("env: {id: InvertedPendulum-v5}\nlearner: {compute: {amp: bf16, tf23: true}}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path, ["learner.replay.batch_size=lots"])
    lines = str(e.value).splitlines()
    assert lines[0] == f"{path}: invalid configuration"
    assert ("  - learner.compute.tf23: no such key (did you mean learner.compute.tf32?)" in lines
            and "  - --set learner.replay.batch_size=lots: learner.replay.batch_size: Input should be "
                "a valid integer, unable to parse string as an integer" in lines), lines


def test_a_flat_learner_config_is_refused_naming_where_its_keys_went(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("env: {id: InvertedPendulum-v5}\nlearner: {batch_size: 64, device: cpu}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"{path}: learner.batch_size: moved to learner.replay.batch_size "
                            "(and 1 more of the flat layout)")
