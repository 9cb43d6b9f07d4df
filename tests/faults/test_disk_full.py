"""The disk fills up under a running job's checkpoints: the save fails in one log line, leaves
no partial file, the job trains on, and `herd stop` still ends with a checkpoint and a summary.
(A 16 KiB tmpfs mounted over runs/<job>/checkpoint, then unmounted again; needs root.)"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.jobs import SMALL, herd, status, submit, wait_for

pytestmark = pytest.mark.cluster

CFG = {**SMALL, "run": {**SMALL["run"], "name": "diskfull", "checkpoint_every_s": 2, "keep_checkpoints": 2}}


def test_a_full_disk_during_checkpoints_costs_the_job_nothing(ray_cluster, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    job = submit(CFG, tmp_path)
    run_dir = tmp_path / "runs" / job
    ckpt = run_dir / "checkpoint"
    mounted = False
    try:
        wait_for(lambda: (ckpt / "model.pt").exists(), 150, "the first checkpoint", poll=1)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(ckpt)],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        mounted = True
        line = wait_for(lambda: next((ln for ln in herd("logs", job).stdout.splitlines()
                                      if "checkpoint not written" in ln), None), 60, "a failed save")
        assert "No space left on device" in line and "training goes on" in line, line
        # no partial file stays behind. A save is tried every 2 s and its .tmp exists while it
        # writes (until ENOSPC), so one look may land inside the next attempt: a .tmp that stayed
        # would be there at every look, one that goes is gone between two attempts
        wait_for(lambda: not [p.name for p in ckpt.iterdir() if p.name.endswith(".tmp")], 10,
                 "no partial checkpoint file between two save attempts", poll=0.05)
        before = status(job)["learner"]["updates"]
        wait_for(lambda: status(job)["learner"]["updates"] > before, 60, "training to go on")
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(ckpt)], check=False)
        herd("stop", job, check=False)
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "stopped by user"
    assert summary["checkpoint_errors"] and all("No space left" in e["error"]
                                                for e in summary["checkpoint_errors"])
    assert summary["checkpoint"] == str(ckpt) and (ckpt / "model.pt").is_file()
    assert summary["actor_steps"] == summary["actor_acked"] == int(summary["learner"]["received"])
    # keep_checkpoints: 2: the final save and the one before it, as hard links
    kept = sorted((run_dir / "checkpoints").iterdir())
    assert len(kept) == 2 and (kept[-1] / "model.pt").samefile(ckpt / "model.pt")
