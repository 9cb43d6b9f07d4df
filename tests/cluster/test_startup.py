"""Start-up shortcuts: actors dial an address known before the learner is up; precompile."""

from __future__ import annotations

import pytest
import torch
import yaml

from herd.config import parse_config
from herd.job_setup import fixed_port, known_address
from tests.jobs import SMALL, herd, small_learner


def cfg_with(**learner):
    raw = {**SMALL, "learner": small_learner(**learner)}
    return fixed_port(parse_config(raw, "test"))


def test_loopback_address_is_known_before_the_learner_starts() -> None:
    cfg = cfg_with()
    assert cfg.learner.server.port > 0
    assert known_address(cfg) == f"127.0.0.1:{cfg.learner.server.port}"
    assert known_address(cfg_with(port=7001, advertise_host="10.0.0.5", host="0.0.0.0")) == "10.0.0.5:7001"


def test_wildcard_host_waits_for_the_learner_node() -> None:
    assert known_address(cfg_with(host="0.0.0.0", port=7002, token="t" * 32)) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU behaviour")
def test_precompile_on_the_cpu_says_there_is_nothing_to_do(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "learner": small_learner(compile=True)}))
    r = herd("precompile", str(path))
    assert "nothing to precompile" in r.stdout


def test_precompile_refuses_a_bad_config(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "env": {"id": "NoSuchEnv-v0"}}))
    r = herd("precompile", str(path), check=False)
    assert r.returncode == 2 and "NoSuchEnv-v0" in r.stderr


def test_precompile_takes_sets_like_submit(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    r = herd("precompile", str(path), "--set", "learner.replay.batch_size=-3", check=False)
    assert r.returncode == 2 and "learner.replay.batch_size" in r.stderr  # the --set was applied, validated
    r = herd("precompile", str(path), "--set", "env.id=NoSuchEnv-v0", check=False)
    assert r.returncode == 2 and "NoSuchEnv-v0" in r.stderr


def test_timeline_marks_every_phase_once(monkeypatch) -> None:
    import time

    from herd.startup import PHASES, SUBMIT_ENV, Timeline

    monkeypatch.setenv(SUBMIT_ENV, repr(time.time() - 5))
    tl = Timeline(time.time() - 3)
    tl.observe({"learner": {"inserted": 0, "updates": 0, "device": "cpu"},
                "actors": [{"actor_id": "actor-0", "error": "unavailable: TimeoutError"}]})
    assert set(tl.marks) == {"driver_process", "driver_exec"}  # no `herd submit`: no submitted
    assert tl.marks["driver_exec"] < tl.marks["driver_process"]  # this process began before
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

    from herd.actors.config import EnvConfig, PixelConfig
    from herd.config import check_env
    from herd.startup import SPEC_ENV, spec_from_env, spec_to_env

    cfg = cfg_with()
    pixel = cfg.model_copy(update={"env": EnvConfig(id="InvertedPendulum-v5", pixels=PixelConfig(size=32))})
    for c in (cfg, pixel):  # a pixel env's frame_stack too: the learner refuses a spec without it
        built = check_env(c)
        monkeypatch.setenv(SPEC_ENV, spec_to_env(c.env.id, built))
        got = spec_from_env(c.env.id)
        assert got.keys() == built.keys()
        for k, v in built.items():
            assert np.array_equal(np.asarray(got[k]), np.asarray(v)) and type(got[k]) is type(v), k
    assert got["frame_stack"] == 3 and got["obs_dtype"] == "uint8"
    assert spec_from_env("Hopper-v5") is None  # another env's spec is never taken
    monkeypatch.delenv(SPEC_ENV)
    assert spec_from_env(cfg.env.id) is None


def test_learner_and_actor_marks_are_their_own_times(monkeypatch) -> None:
    """learner_* and actors_* come from those processes' startup_unix, not the poll's clock;
    the actors' are the last actor's, and only once every actor has them."""
    import time

    from herd.startup import SUBMIT_ENV, Timeline

    t = time.time()
    monkeypatch.setenv(SUBMIT_ENV, repr(t - 10))
    tl = Timeline(t - 9)
    marks = {"process": t - 8, "init": t - 7, "device": t - 6, "buffer": t - 5.5, "sac": t - 5}
    tl.observe({"learner": {"inserted": 0, "updates": 0, "startup_unix": marks},
                "actors": [{"actor_id": "a", "startup_unix": {"process": t - 7, "init": t - 6}},
                           {"actor_id": "b", "error": "unavailable: booting"}]})
    out = tl.seconds()
    assert [out[f"learner_{k}_s"] for k in marks] == [2.0, 3.0, 4.0, 4.5, 5.0]
    assert out["actors_process_s"] is None and out["actors_ready_s"] is None  # b still boots
    tl.observe({"learner": {"inserted": 0, "updates": 0, "startup_unix": {"process": t}},
                "actors": [{"actor_id": "a", "startup_unix": {"process": t - 7, "init": t - 6}},
                           {"actor_id": "b", "startup_unix": {"process": t - 6.5, "init": t - 4}}]})
    out = tl.seconds()
    assert out["learner_process_s"] == 2.0  # the first one wins
    assert out["actors_process_s"] == 3.5 and out["actors_init_s"] == 6.0  # b's, the last
    assert out["actors_ready_s"] >= 10


def test_process_started_is_this_process_start() -> None:
    import subprocess
    import sys
    import time

    from herd.startup import process_started

    before = time.time()
    code = "import time; from herd.startup import process_started as p; print(p(), time.time())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       timeout=60)
    started, then = map(float, r.stdout.split())
    # /proc counts in clock ticks (10 ms): the child began after `before`, within that
    assert before - 0.05 <= started <= then
    assert process_started() < before


def test_the_driver_and_the_actor_classes_import_without_torch() -> None:
    """The driver imports the learner's, the env actors' and the evaluator's classes (Ray
    actors: they import torch and MuJoCo in their own processes): none of it on its path."""
    import subprocess
    import sys

    code = ("import sys, herd.driver, herd.actors.env_actor, herd.controller; "
            "print(sorted(m for m in ('torch', 'mujoco', 'ray.tune') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       timeout=120)
    assert r.stdout.strip() == "[]", r.stdout


def test_the_driver_takes_its_env_from_herd_submits_file(tmp_path, monkeypatch) -> None:
    """herd submit on the cluster's machine hands the driver its variables in a private file
    (read once, deleted), not in the job's runtime_env; an unreadable one is a clear line."""
    import os
    import subprocess
    import sys

    from herd.job_setup import env_from_file
    from herd.submission import write_driver_env

    monkeypatch.setenv("HERD_HOME", str(tmp_path / "herd"))
    monkeypatch.setenv("HERD_SUBMIT_UNIX", "1.0")  # replaced by the file's, restored after
    path = write_driver_env("herd-x-1", {"HERD_CONFIG_JSON": '{"a": 1}', "HERD_SUBMIT_UNIX": "5.0"})
    assert path.startswith(str(tmp_path / "herd")) and os.stat(path).st_mode & 0o777 == 0o600
    monkeypatch.setenv("HERD_CONFIG_JSON", "")
    env_from_file(path)
    assert os.environ["HERD_CONFIG_JSON"] == '{"a": 1}' and os.environ["HERD_SUBMIT_UNIX"] == "5.0"
    assert not os.path.exists(path)  # read once
    r = subprocess.run([sys.executable, "-m", "herd.driver", "--job-id", "x", "--runs-dir",
                        str(tmp_path / "runs"), "--env-file", path], capture_output=True,
                       text=True, check=False, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    line = f"herd: the job's environment file {path} cannot be read (No such file or directory)"
    assert r.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "runs").exists()
