"""Checkpoints a user can trust: a crafted model.pt is refused everywhere it is read (the
learner's resume and restart, `herd evaluate`, `herd submit --resume`) without running its
payload."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.jobs import SMALL

ROOT = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this runs `touch <marker>`: what a malicious model.pt would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def crafted(tmp_path) -> tuple[Path, Path]:
    """runs/<job>/ whose checkpoint/model.pt carries the payload beside real-looking fields."""
    run_dir = tmp_path / "runs" / "herd-crafted"
    (run_dir / "checkpoint").mkdir(parents=True)
    marker = tmp_path / "payload-ran"
    torch.save({"sac": Payload(marker), "updates": 1, "received": 1, "inserted": 1,
                "policy_version": 1, "config": {}}, run_dir / "checkpoint" / "model.pt")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(SMALL))
    return run_dir, marker


def herd(*args):
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=os.environ.copy(), check=False)


def test_the_learner_refuses_a_crafted_checkpoint(crafted, spec):
    from herd.learner.config import LearnerConfig
    from herd.learner.learner import Learner

    run_dir, marker = crafted
    cfg = LearnerConfig.flat(capacity=2_000, min_size=100, batch_size=32, hidden_sizes=(32, 32))
    with pytest.raises(ValueError, match="refused to load"):
        Learner(cfg, spec, str(run_dir / "checkpoint"))
    assert not marker.exists()


def test_the_cli_refuses_a_crafted_checkpoint_in_one_line(crafted, tmp_path):
    run_dir, marker = crafted
    r = herd("evaluate", str(run_dir), "--episodes", "1")
    assert r.returncode == 2 and "refused to load" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    # refused before any cluster is asked: no dashboard runs at this address
    r = herd("--address", "http://127.0.0.1:9", "submit", str(cfg), "--resume", str(run_dir))
    assert r.returncode == 2 and "refused to load" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not marker.exists()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs: the disk of a full machine (needs root for mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path = tmp_path / "tiny"
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)],
                       capture_output=True, text=True, check=False)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_fails_the_save_in_one_line_and_leaves_no_partial_file(make_learner, tiny_disk):
    import time

    learner = make_learner(min_size=100, capacity=2_000, hidden_sizes=(256, 256))
    ckpt = tiny_disk / "checkpoint"
    with pytest.raises(OSError) as e:  # 256x256 networks and Adam's moments: > 1 MB
        learner.save(str(ckpt), save_replay=True)
    assert e.value.errno == 28 and "checkpoint not written" in str(e.value)
    assert "No space left on device" in str(e.value) and "\n" not in str(e.value)
    assert list(ckpt.iterdir()) == []  # neither replay.pt(.tmp) nor model.pt(.tmp) left behind
    # the learner goes on: a save elsewhere works and restores
    good = tiny_disk.parent / "good"
    learner.save(str(good))
    state = torch.load(good / "model.pt", weights_only=True)
    assert state["updates"] == learner.updates
    time.sleep(0.1)
    assert learner.status_dict()["learner_id"]  # no failure surfaced by the training thread


def test_older_checkpoints_survive_the_next_saves_up_to_keep(tmp_path):
    """run.keep_checkpoints: each save's files stay reachable in checkpoints/<updates>/ (hard
    links), so a later save of a collapsed policy cannot overwrite the last good state."""
    from herd.job.supervise import keep_history

    ckpt = tmp_path / "checkpoint"
    ckpt.mkdir()
    for updates in (100, 200, 300, 400):
        tmp = ckpt / "model.pt.tmp"
        torch.save({"updates": updates}, tmp)
        os.replace(tmp, ckpt / "model.pt")  # as Learner.save renames over the previous file
        keep_history(ckpt, keep=3)
    history = tmp_path / "checkpoints"
    kept = sorted(p.name for p in history.iterdir())
    assert kept == ["000000000200", "000000000300", "000000000400"]
    for name in kept:
        assert torch.load(history / name / "model.pt", weights_only=True)["updates"] == int(name)
    assert (history / "000000000400" / "model.pt").samefile(ckpt / "model.pt")  # a link, no copy
    keep_history(ckpt, keep=1)  # the default keeps no history and touches none
    assert len(list(history.iterdir())) == 3


def test_the_best_evaluations_full_state_replaces_the_previous_best(tmp_path):
    from herd.periodic_eval import BEST_CHECKPOINT, CANDIDATE, keep_best_checkpoint

    for updates in (100, 200):
        (tmp_path / CANDIDATE).mkdir()
        torch.save({"updates": updates}, tmp_path / CANDIDATE / "model.pt")
        keep_best_checkpoint(tmp_path)
        assert not (tmp_path / CANDIDATE).exists()
        assert torch.load(tmp_path / BEST_CHECKPOINT / "model.pt", weights_only=True)["updates"] == updates
    assert sorted(p.name for p in tmp_path.iterdir()) == [BEST_CHECKPOINT]
