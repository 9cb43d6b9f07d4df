"""Bad configurations are refused with a message a user understands, before anything starts."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from herd.actors.config import EnvConfig
from herd.actors.envs import EnvError, make_env
from herd.config import ConfigError, check_env, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_shipped_configs_load():
    shipped = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert {"demo.yaml", "humanoid.yaml", "hopper.yaml", "walker2d.yaml"} <= set(shipped)
    for name in shipped:
        cfg = load_config(ROOT / "configs" / name)
        task = cfg.env.id.removeprefix("dm_control/")
        assert task.endswith("-v0" if task != cfg.env.id else "-v5"), name
        # a variant's suffix after the task's: -privileged, a pixel job whose critics read state
        variant = name.removesuffix(".yaml").removesuffix("-privileged")
        assert variant.endswith("-pixels") or variant == name.removesuffix(".yaml"), name
        assert name.endswith("-privileged.yaml") == cfg.learner.encoder.privileged_critic, name
        stem = variant.removesuffix("-plain").removesuffix("-pixels")
        assert task.lower().startswith(stem) or name == "demo.yaml", name  # named for its task
        assert variant.endswith("-pixels") == (cfg.env.pixels is not None), name


def test_malformed_yaml_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "env: {id: [unclosed\n"))


def test_unknown_key_and_bad_value_are_listed(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(_write(tmp_path, "env: {id: Hopper-v5}\n"
                                     "learner: {replay: {batch_sise: 3}, algorithm: {gamma: 7}}\n"))
    msg = str(e.value)
    assert ("learner.replay.batch_sise: no such key (did you mean learner.replay.batch_size?)"
            in msg and "learner.algorithm.gamma" in msg)


def test_impossible_sizes(tmp_path):
    with pytest.raises(ConfigError, match="min_size"):
        parse_config({"env": {"id": "Hopper-v5"},
                      "learner": {"replay": {"capacity": 1000, "min_size": 5000}}})
    with pytest.raises(ConfigError, match="max_batch"):
        parse_config({"env": {"id": "Hopper-v5"}, "learner": {"server": {"max_batch": 16}},
                      "actors": {"num_envs": 8, "steps_per_push": 4}})


@pytest.mark.parametrize(("section", "values", "match"), [
    ("learner", {"ratio_tolerance": 0}, "ratio_tolerance is 0 with a replay ratio"),
    ("actors", {"num_actors": 0}, "num_actors is 0: the job would idle"),
    ("learner", {"min_size": 5_000}, r"exceeds run.max_env_steps \(1000\)"),
])
def test_traps_that_would_hang_or_idle_are_refused(section, values, match):
    raw = {"env": {"id": "InvertedPendulum-v5"}, "run": {"max_env_steps": 1_000},
           "learner": {"replay": {"min_size": 100}}}
    if section == "learner":
        raw["learner"] = {"replay": {**raw["learner"]["replay"], **values}}
    else:
        raw[section] = {**raw.get(section, {}), **values}
    with pytest.raises(ConfigError, match=match):
        parse_config(raw)


def test_no_actors_when_asked_for_explicitly_and_no_limiter_without_tolerance():
    cfg = parse_config({"env": {"id": "InvertedPendulum-v5"}, "actors": {"num_actors": 0},
                        "run": {"start_without_actors": True}})
    assert cfg.actors.num_actors == 0
    assert parse_config({"env": {"id": "InvertedPendulum-v5"},
                         "learner": {"replay": {"ratio": None, "ratio_tolerance": 0}}})


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="no such config"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(_write(tmp_path, "- just\n- a list\n"))


def test_unknown_env_id():
    cfg = parse_config({"env": {"id": "Humanoid-v99"}})
    with pytest.raises(EnvError, match="unknown env id 'Humanoid-v99'"):
        check_env(cfg)


def test_discrete_env_is_refused():
    with pytest.raises(EnvError, match="continuous"):
        make_env(EnvConfig(id="CartPole-v1"))


def test_ray_registered_env_by_name():
    """An env creator registered with ray.tune.register_env works like a gymnasium id."""
    import gymnasium as gym
    import ray
    from ray.tune.registry import register_env

    ray.init(num_cpus=1, include_dashboard=False, address="local")
    try:
        register_env("my-pendulum", lambda cfg: gym.make("InvertedPendulum-v5", **cfg))
        env = make_env(EnvConfig(id="my-pendulum", kwargs={"reset_noise_scale": 0.02}))
        assert env.observation_space.shape == (4,)
    finally:
        ray.shutdown()


def test_submit_refuses_bad_config_before_contacting_ray(tmp_path):
    bad = _write(tmp_path, "env: {id: NoSuchEnv-v0}\n")
    r = subprocess.run([sys.executable, "-m", "herd", "--address", "http://127.0.0.1:9",
                        "submit", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 2
    assert "unknown env id 'NoSuchEnv-v0'" in r.stderr


def test_actors_take_n_step_and_gamma_from_the_learner_and_a_dump_reads_back():
    from herd.config import dump_config

    cfg = parse_config({"env": {"id": "Hopper-v5"},
                        "learner": {"algorithm": {"n_step": 3, "gamma": 0.97}}})
    assert (cfg.actors.n_step, cfg.actors.gamma) == (3, 0.97)
    assert parse_config(yaml.safe_load(dump_config(cfg))) == cfg  # the driver re-reads the dump
    with pytest.raises(ConfigError, match="set learner.algorithm.n_step"):
        parse_config({"env": {"id": "Hopper-v5"}, "actors": {"n_step": 2}})


def test_a_bare_yaml_on_off_is_the_word_it_was():
    for word in ("on", "off"):
        cfg = parse_config(yaml.safe_load(
            f"env: {{id: Hopper-v5}}\nlearner: {{server: {{ingest_process: {word}}}}}"))
        assert cfg.learner.server.ingest_process == word
    cfg = parse_config(yaml.safe_load("env: {id: Hopper-v5}\nlearner: {compute: {amp: off}}"))
    assert cfg.learner.compute.amp == "off"
