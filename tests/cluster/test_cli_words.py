"""The CLI's words agree with what it does: every flag says what it is for; --final / --best of
one policy file are refused rather than ignored; a --video under a file is refused before any
episode runs; negative and zero actor counts get one rule; a scale whose actors wait beside free CPUs
says why; a missing env package names --working-dir. No cluster needed."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from herd import cli
from herd.cli import job_cmds, policy_cmds

ROOT = Path(__file__).resolve().parents[2]


def herd(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "HERD_DASHBOARD_URL": "http://127.0.0.1:9"}  # no cluster is asked
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def one_line(r: subprocess.CompletedProcess, must: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and must in lines[0], (r.returncode, r.stderr)


def test_every_flag_and_argument_has_a_help_text():
    subs = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bare = [f"{name} {a.option_strings or a.dest}" for name, sp in subs.choices.items()
            for a in sp._actions if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not bare, bare


def test_final_of_one_policy_file_is_refused(tmp_path):
    policy = tmp_path / "policy.onnx"
    policy.write_bytes(b"")
    one_line(herd("evaluate", str(policy), "--final"), "--final chooses among a run folder's policies")
    one_line(herd("export", str(policy), "--format", "onnx", "--best"), "--best chooses among")
    assert policy_cmds.took("best", one_file=True) == " (made from the run's best policy)"


def test_a_video_under_a_file_is_refused_before_any_episode(tmp_path):
    (tmp_path / "taken").write_text("a file")
    one_line(herd("evaluate", str(tmp_path / "no-run"), "--video", str(tmp_path / "taken" / "ep.mp4")),
             f"{tmp_path / 'taken'} is a file, not a folder")
    one_line(herd("evaluate", str(tmp_path), "--video", str(tmp_path)), "that is a folder")


def test_actor_counts_below_one_follow_one_rule():
    one_line(herd("scale", "herd-x-20261207-000000-0000", "--actors", "-3"),
             "--actors must be 1 or more, got -3 (0 only for a job whose config sets "
             "run.start_without_actors: true)")


def test_a_scale_with_cpus_free_says_why_its_actors_wait():
    assert "(each needs 0.5; 0.5 free before the actors this scale started took theirs)" in \
        job_cmds.waiting_words(1, 0.5, 0.5)
    assert "waiting for CPUs (each needs 1, 0.5 free)" in job_cmds.waiting_words(1, 1.0, 0.5)


def test_a_missing_env_package_names_working_dir():
    one_line(herd("submit", "examples/myrobot/myrobot.yaml"), "pass --working-dir DIR")


def test_herd_home_is_documented():
    assert "`HERD_HOME`" in (ROOT / "docs" / "cluster.md").read_text()


def test_make_demo_and_the_readme_say_how_to_put_herd_on_the_path():
    r = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0 and "source .venv/bin/activate" in r.stdout, r.stdout + r.stderr
    readme = (ROOT / "README.md").read_text()
    assert readme.index("source .venv/bin/activate") < readme.index("herd up\n")
