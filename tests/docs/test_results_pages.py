"""The performance page is short and shows one section per capability, each the newest result of
its kind with its date, machine, command and files; the archive lists every file of bench/results
exactly once; a recorded command is marked when today's config schema or scripts no longer take it."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
results = importlib.import_module("docs._gen.results")
commands = importlib.import_module("docs._gen.commands")
performance = importlib.import_module("docs._gen.performance")

SECTIONS = ["Headline", "The demo on 2 cores", "Humanoid-v5 learning curves", "Other MuJoCo tasks", "Pixels", "The update alone",
            "Fan-in", "Actor scaling", "Start-up", "Rendering"]


def sections(page: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_page_is_short_with_one_section_per_capability():
    page = (ROOT / "docs/performance.md").read_text()
    assert len(page.splitlines()) <= 300
    assert list(sections(page)) == SECTIONS


@pytest.mark.parametrize("title", SECTIONS[1:])
def test_each_section_shows_the_newest_result_of_its_kind(title):
    body = sections((ROOT / "docs/performance.md").read_text())[title]
    shown = re.findall(r"\[([^]]+\.json)\]\(\.\./bench/results/\1\)", body)
    assert shown, f"{title}: no result file"
    assert re.search(r"\d{4}-\d\d-\d\d · ", body) and ("NVIDIA" in body or "x86_64" in body)
    assert re.search(r"```\n(python|herd) ", body), f"{title}: no command"
    assert re.search(r"^\| .+ \|$", body, flags=re.MULTILINE), f"{title}: no figures"
    for name in shown:
        kind = results.kind_of(name)
        assert kind.section == title
        peers = [p for p in results.files() if results.kind_of(p.name) is kind]
        if kind.per is None:  # one file: none of its kind is newer
            assert results.newest(ROOT / "bench/results" / name) == max(map(results.newest, peers))


def test_the_archive_lists_every_result_file_exactly_once():
    page = (ROOT / "docs/results-archive.md").read_text()
    every = sorted(p.name for p in (ROOT / "bench/results").iterdir() if p.is_file())
    counts = {name: page.count(f"(../bench/results/{name})") for name in every}
    assert {n: c for n, c in counts.items() if c != 1} == {}
    rows = [ln for ln in page.splitlines() if ln.startswith(("| 20", "| –"))]
    assert len(rows) == len(results.files()) + sum((ROOT / "bench/results" / png).exists()
                                                    for png in results.COMPOSITES)


def test_every_result_file_has_a_kind_of_its_own():
    """A new benchmark's files get a row in results.KINDS, not the catch-all."""
    assert [p.name for p in results.files() if results.kind_of(p.name).name == "other"] == []


@pytest.mark.parametrize("command", [
    "python bench/humanoid.py --config configs/humanoid.yaml --seeds 1 --seconds 480 --out x.json",
    ("python bench/humanoid.py --config configs/hopper.yaml --arm 'light:learner.algorithm.critic_width=256;"
     "learner.replay.ratio=0.25' --set run.stop_at_target=false --set env.pixels.action_repeat=1"),
    "python bench/learner.py --nets plain,configs/humanoid.yaml --set 'compile_options={\"a\":false}'",
    "python bench/compile_profile.py --arm 'k1:learner.compute.updates_per_call=1;$TORCHINDUCTOR_COMPILE_THREADS=1'",
    ("herd tune configs/humanoid.yaml --grid learner.replay.batch_size=512,1024 --set actors.num_actors=4 "
     "--first-seed 2"),
    "python bench/startup.py --set learner.compute.compile_options={} --set env.kwargs.frame_skip=2",
])
def test_a_command_of_todays_layout_runs(command):
    assert commands.stale(command) is None


@pytest.mark.parametrize("command, why", [
    ("python bench/humanoid.py --set learner.actor_ema=0.001", "learner.actor_ema is now learner.algorithm.actor_ema"),
    ("herd tune configs/humanoid.yaml --grid learner.batch_size=512,1024",
     "learner.batch_size is now learner.replay.batch_size"),
    ("python bench/humanoid.py --arm 'x:learner.algorithm.tau=0.01;learner.critic_loss=mse'",
     "learner.critic_loss is now learner.algorithm.critic_loss"),
    ("python bench/startup.py --set learner.compile_process=false", "learner.compile_process was removed"),
    ("python bench/startup.py --set actors.no_such_key=1", "no key actors.no_such_key"),
    ("python bench/startup.py --set run.seed.x=1", "run.seed is a value, not a section"),
    ("python bench/learner.py --set no_such_field=1", "no learner field no_such_field"),
    ("python bench/sweep_old.py --seconds 45", "bench/sweep_old.py is no longer in the repository"),
    ("python bench/fanin.py --clients 10 --no-such-flag", "bench/fanin.py takes no --no-such-flag"),
    ("python bench/humanoid.py --config configs/mujoco_old.yaml", "configs/mujoco_old.yaml is not in the repository"),
    ("herd nosuchcommand x", "herd nosuchcommand is no command"),
])
def test_a_command_of_an_older_layout_says_what_changed(command, why):
    assert commands.stale(command) == why


def test_stale_commands_on_the_pages_are_marked():
    page = (ROOT / "docs/performance.md").read_text()
    archive = (ROOT / "docs/results-archive.md").read_text()
    for path in results.files():
        old = commands.stale_of(path)
        line = next(ln for ln in archive.splitlines() if f"(../bench/results/{path.name})" in ln)
        assert (f"({commands.MARK})" in line) == bool(old), path.name
        for command, why in old.items():
            if command in page:
                assert f"{command}  # ({commands.MARK}: {why})" in page
