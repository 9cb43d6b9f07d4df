"""bench/sweep.py --quick end to end on the CPU: real learner and actor, a 2 x 2 grid, ~3 s per cell."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sweep_quick_writes_json_and_png():
    from bench.common import result_path

    out = result_path("sweep", None, quick=True)  # /tmp/herd-bench/sweep-<machine>.json, never bench/results
    assert str(out).startswith("/tmp/")
    for stale in (out, out.with_suffix(".png")):
        stale.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "bench/sweep.py", "--quick", "--seconds", "3", "--episodes", "2",
                           "--parallel", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = json.loads(out.read_text())
    assert len(records) == 4
    assert {(r["batch"], r["replay_ratio"]) for r in records} == {(64, 0.25), (64, 1.0), (256, 0.25), (256, 1.0)}
    keys = {"machine", "torch", "env", "batch", "replay_ratio", "seconds", "eval_return", "env_steps",
            "updates", "updates_per_s", "env_steps_per_s", "command"}
    for r in records:
        assert keys <= r.keys()
        assert r["env"] == "InvertedPendulum-v5" and r["seconds"] >= 3
        assert r["env_steps"] >= 1_000  # warmup alone fills min_replay_size within the budget
        assert r["eval_return"] is not None and r["eval_return"] > 0
    assert out.with_suffix(".png").stat().st_size > 1_000
    assert "batch" in proc.stdout and str(out) in proc.stdout.replace("\n", "")
