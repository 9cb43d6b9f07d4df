"""What a new user meets first, each part that once went wrong: `import herd` beside the clone's
folder, relative config paths in the Python API, the target a job stops at, the progress bar,
`herd status` on the CPU and past the CPUs, `herd scale --actors 0`, the start-up line."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "demo.yaml"


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_a_script_beside_a_folder_named_herd_imports_herd(tmp_path):
    (tmp_path / "herd" / "configs").mkdir(parents=True)  # a clone, as git names it
    (tmp_path / "train.py").write_text("import herd\nprint(herd.__file__)\nprint(herd.submit.__module__)\n")
    r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, f"{r.stderr}\n(an editable install needs `python -m herd.editable`: make setup)"
    assert r.stdout.split()[1] == "herd.api" and not r.stdout.startswith(str(tmp_path))


def test_relative_config_paths_resolve_from_here_then_the_source_tree(tmp_path, monkeypatch):
    import herd
    from herd.submission import find_config

    monkeypatch.chdir(tmp_path)
    assert find_config("configs/demo.yaml") == DEMO
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "demo.yaml").write_text(DEMO.read_text())
    assert find_config("configs/demo.yaml") == Path("configs/demo.yaml")  # here wins
    with pytest.raises(herd.ConfigError) as e:
        herd.submit("configs/nope.yaml")  # refused before any cluster is asked
    assert str(e.value) == (f"configs/nope.yaml: no such config file (looked for {tmp_path}/configs/nope.yaml "
                            f"and {ROOT}/configs/nope.yaml)")


def test_the_target_in_force_is_said_and_one_from_another_env_is_warned_of(tmp_path):
    from herd.config import load_config, parse_config
    from herd.submission import stop_rule, target_from_elsewhere

    fresh = parse_config({"env": {"id": "Hopper-v5"}}).run
    assert fresh.target_return is None and not fresh.stop_at_target  # no target unless one is set
    demo = load_config(DEMO)
    assert stop_rule(demo) == ("at eval return ≥ 900 (run.target_return), else at run.max_seconds 540 s "
                               "or run.max_env_steps 200,000")
    assert stop_rule(load_config(DEMO, ["run.target_return=null"])).endswith("(no run.target_return)")
    assert "run.stop_at_target is off" in stop_rule(load_config(DEMO, ["run.stop_at_target=false"]))
    assert target_from_elsewhere(demo, str(DEMO), []) is None
    sets = ["env.id=Hopper-v5"]
    warning = target_from_elsewhere(load_config(DEMO, sets), str(DEMO), sets)
    assert warning == (f"warning: run.target_return 900 comes from {DEMO}, written for InvertedPendulum-v5; "
                       "this job trains Hopper-v5 and stops at that return: set --set run.target_return=R "
                       "for it (or =null for none)")
    sets.append("run.target_return=3000")
    assert target_from_elsewhere(load_config(DEMO, sets), str(DEMO), sets) is None
    # the CLI says it before it needs a cluster
    port = dead_port()
    env = {**os.environ, "HERD_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
    r = subprocess.run([sys.executable, "-m", "herd", "submit", "configs/demo.yaml", "--set", "env.id=Hopper-v5"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 2 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("herd: warning: run.target_return 900 comes from") and "Hopper-v5" in lines[0]
    assert lines[1].startswith("herd: no Herd cluster running")


def test_the_bar_measures_whichever_budget_ends_the_job(tmp_path, monkeypatch):
    from herd import live

    run = tmp_path / "run"
    row = {"time_s": 30.0, "max_seconds": 600.0, "env_steps": 10_000, "max_env_steps": 200_000,
           "eval_return": 20.0, "env_steps_per_s": 340.0, "updates": 9_000, "updates_per_s": 330.0,
           "actors": 1, "train_return": 30.0}
    budget = live.Budget(run)
    assert budget.fraction(row) == pytest.approx(0.05)  # config.yaml not written yet: steps, time
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"target_return": 65, "stop_at_target": True}}))
    assert budget.fraction(row) == pytest.approx(20 / 65)
    assert budget.fraction({**row, "eval_return": 66.0}) == 1.0
    other = live.Budget(run)
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"target_return": -200, "stop_at_target": True}}))
    assert other.fraction({**row, "eval_return": -1000.0}) == pytest.approx(0.05)  # from the first eval
    assert other.fraction({**row, "eval_return": -600.0}) == pytest.approx(0.5)

    # a job that ends at its target leaves the bar full
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"target_return": 65, "stop_at_target": True}}))
    (run / "summary.json").write_text(json.dumps({
        "wall_s": 31, "stop_reason": "target_return", "target_return": 65, "reached_target": True,
        "final_eval": {"mean_return": 70.0, "policy_version": 9}, "best_eval": None}))
    shown = []

    class Bar:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def add_task(self, *a, **k):
            return 0

        def update(self, task, **k):
            shown.append(k)

    class Client:
        states = iter(["RUNNING", "SUCCEEDED"])

        def get_job_status(self, job_id):
            return next(self.states)

    monkeypatch.setattr(live, "Progress", Bar)
    monkeypatch.setattr(live, "_progress_of", lambda job_id: {**row, "eval_return": 40.0})
    monkeypatch.setattr(live.time, "sleep", lambda s: None)
    monkeypatch.setattr(live, "console", Console(file=io.StringIO()))
    assert live.follow_job(Client(), "herd-x", run) == 0
    assert shown[0]["completed"] == pytest.approx(40 / 65) and shown[-1]["completed"] == 1.0


def status(**learner) -> dict:
    actor = {"actor_id": "actor-0", "pid": 1, "steps": 500, "steps_per_s": 300.0, "acked": 480,
             "bytes_sent": 10**6, "mean_return": 20.0, "policy_version": 3, "push_latency_ms": 2.0,
             "reconnects": 0, "in_flight": 1}
    ls = {"device": "cpu", "learner_id": "l-1", "updates": 400, "updates_per_s": 0.0, "received": 500,
          "inserted": 500, "inserts_per_s": 680.0, "replay_size": 500, "replay_capacity": 10_000,
          "policy_version": 3, "mean_policy_lag": 0.5, "rejected_batches": 0,
          "gpu_mem_allocated": 0, "gpu_mem_reserved": 0, **learner}
    return {"job_id": "herd-x", "learner": ls, "actors": [actor], "target_actors": 1,
            "progress": {"eval_return": 30.0, "train_return": 20.0, "env_steps_per_s": 320.0,
                         "updates_per_s": 310.0, "time_s": 40.0}}


def rendered(st: dict) -> str:
    from herd.live import status_view

    console = Console(record=True, width=100, file=io.StringIO())
    console.print(status_view(st))
    return console.export_text()


def test_status_on_the_cpu_and_past_the_cpus():
    text = rendered(status())
    assert "gpu mem" not in text and "updates 400 (310/s)" in text  # the driver's windowed rate
    assert "gpu mem 512/1024 MiB" in rendered(status(device="cuda:0", gpu_mem_allocated=2**29,
                                                     gpu_mem_reserved=2**30))
    st = status()
    st["actors"] += [{"actor_id": f"actor-{i}", "waiting": True, "error": "waiting for CPUs (needs 0.5)"}
                     for i in range(1, 41)]
    st["target_actors"], st["cpus_free"] = 41, 0.0
    text = rendered(st)
    assert "1 env actors (0 retired, 40 waiting for CPUs)" in text, text
    assert "40 actors waiting for CPUs (needs 0.5); 0 CPUs free" in text, text
    assert "actor-40" not in text and text.count("waiting for CPUs") == 2, text
    st["cancelled"] = 48  # scaled away while waiting: never started, so not counted as retired
    assert "1 env actors (0 retired, 48 cancelled, 40 waiting for CPUs)" in rendered(st)


def test_scale_to_zero_is_refused_unless_the_job_allows_it(tmp_path):
    from herd.jobs import zero_actors_allowed

    job = "herd-x-20261204-000000-0000"
    info = {"entrypoint": f"/usr/bin/python3 -m herd.driver --job-id {job} --runs-dir {tmp_path} "
                          "--env-file /tmp/x.env.json"}
    assert not zero_actors_allowed(info) and not zero_actors_allowed(None)  # no config.yaml: refused
    (tmp_path / job).mkdir()
    for allowed in (False, True):
        (tmp_path / job / "config.yaml").write_text(yaml.safe_dump({"run": {"start_without_actors": allowed}}))
        assert zero_actors_allowed(info) is allowed
    port = dead_port()
    env = {**os.environ, "HERD_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
    r = subprocess.run([sys.executable, "-m", "herd", "scale", job, "--actors", "0"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"herd: --actors 0 would leave {job} idle (nothing steps, nothing trains): use 1 or more, or "
        f"`herd stop {job}` (a job whose config sets run.start_without_actors: true may scale to 0)"), r.stderr


def test_a_prestarted_worker_counts_from_the_submission(monkeypatch):
    from herd.startup import SENT_ENV, SUBMIT_ENV, Timeline

    t = time.time()
    monkeypatch.setenv(SUBMIT_ENV, repr(t - 12))
    monkeypatch.setenv(SENT_ENV, repr(t - 11))
    tl = Timeline(t - 5)
    tl.observe({"learner": {"inserted": 0, "updates": 0, "startup_unix": {"process": t - 40, "init": t - 4}},
                "actors": [{"actor_id": "a", "startup_unix": {"process": t - 30, "init": t - 3}}]})
    out = tl.seconds()
    assert out["submitted_s"] == out["learner_process_s"] == out["actors_process_s"] == 1.0
    assert out["learner_init_s"] == 8.0 and out["actors_init_s"] == 9.0


def test_piped_logs_lose_their_colour_codes():
    import re

    from herd.cli.job_cmds import ANSI

    line = "\x1b[36m(Learner pid=20252)\x1b[0m ready at \x1b[1m\x1b[32mhttp://127.0.0.1\x1b[39m\x1b[22m\n"
    assert re.sub(ANSI, "", line) == "(Learner pid=20252) ready at http://127.0.0.1\n"
