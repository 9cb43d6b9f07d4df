"""bench/actors.py's pure parts: set-up variants and the stepping-time split."""

import argparse

import pytest

from bench.actors import parse_variant, time_split


def _args():
    return argparse.Namespace(envs=8, steps_per_push=32)


def test_variants_change_only_what_they_name():
    assert parse_variant("base", _args()) == {"name": "base", "envs": 8, "steps_per_push": 32, "pin": False}
    v = parse_variant("pin+spp=8+envs=16", _args())
    assert (v["pin"], v["steps_per_push"], v["envs"]) == (True, 8, 16)
    with pytest.raises(SystemExit, match="unknown variant part 'threads=2'"):
        parse_variant("threads=2", _args())


def test_time_split_is_per_env_step_over_all_actors():
    def stats(steps, policy, env, push, wall, cpu):
        return {"time_s": {"policy": policy, "env": env, "push": push, "wall": wall, "cpu": cpu, "steps": steps}}

    before = [stats(100, 1.0, 10.0, 0.1, 12.0, 11.0), stats(0, 0.0, 0.0, 0.0, 0.0, 0.0)]
    after = [stats(1100, 1.03, 10.4, 0.101, 12.5, 11.45), stats(1000, 0.03, 0.4, 0.001, 0.5, 0.45)]
    split = time_split(before, after)
    assert split["policy_us_per_step"] == pytest.approx(30.0)
    assert split["env_us_per_step"] == pytest.approx(400.0)
    assert split["push_us_per_step"] == pytest.approx(1.0)
    assert split["step_thread_cpu_share"] == pytest.approx(0.9)
