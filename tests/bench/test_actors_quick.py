"""bench/actors.py --quick end to end on the CPU: a real learner, Ray actors, the ceiling
processes, the base set-up and one variant (1 s windows after 0.5 s warm-ups: the rows' plumbing,
not their figures); the JSON rows carry what the performance page's actors table is read from."""

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_actors_quick_writes_rows_and_plot():
    from bench.common import result_path

    out = result_path("actors", None, quick=True)
    assert str(out).startswith("/tmp/")
    for stale in (out, out.with_suffix(".png")):
        stale.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "bench/actors.py", "--quick", "--counts", "1", "--threaded", "",
                           "--variants", "base,envs=4", "--envs", "2", "--seconds", "1", "--warmup", "0.5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [(r["actors"], r["variant"], r["envs_per_actor"]) for r in rows] == [(1, "base", 2), (1, "envs=4", 4)]
    for r in rows:
        assert r["policy"] == "init" and r["ceiling_policy_version"] == 1  # one fixed policy on both sides
        assert r["env_steps_per_s"] > 0 and r["ceiling_steps_per_s"] > 0 and r["ceiling_after_steps_per_s"] > 0
        assert math.isclose(r["ratio_to_ceiling"], r["env_steps_per_s"] / r["ceiling_steps_per_s"], rel_tol=0.01)
        assert r["sent"] == r["acked"] > 0 and not r["errors"]
        assert r["env_us_per_step"] > r["policy_us_per_step"] > 0 and r["push_us_per_step"] > 0
        assert r["episode_length"] > 0 and r["ceiling_episode_length"] > 0
        assert {"machine", "cores", "torch", "command"} <= r.keys()
    assert out.with_suffix(".png").stat().st_size > 10_000
