"""bench/compile_profile.py end to end on the CPU: each arm compiled cold in a fresh process with
an empty inductor cache; the record counts the graphs compiled and carries torch's phase timers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


def test_compile_profile_records_each_arm_cold(tmp_path):
    out = tmp_path / "cp.json"
    proc = subprocess.run([sys.executable, "bench/compile_profile.py", "--config", "configs/demo.yaml",
                           "--arm", "compiled:learner.compute.compile=true;learner.compute.updates_per_call=1",
                           "--no-warm", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plain, compiled = json.loads(out.read_text())
    assert (plain["arm"], compiled["arm"]) == ("config", "compiled")
    assert plain["cold"] and compiled["cold"]
    assert plain["compile_mode"] is None and plain["frames"] == 0  # demo.yaml does not compile
    assert compiled["compile_mode"] and compiled["frames"] >= 2  # the SAC pieces and the Adams
    assert compiled["prepare_s"] > plain["prepare_s"]
    assert any(k.startswith("phase_") for k in compiled)
    assert {"machine", "torch", "cores", "command", "env"} <= compiled.keys()


def test_an_arm_is_learner_fields_and_env_vars():
    from compile_profile import parse_arm

    assert parse_arm("k1:learner.compute.updates_per_call=1;$TORCHINDUCTOR_COMPILE_THREADS=1") == (
        "k1", {"updates_per_call": 1}, {"TORCHINDUCTOR_COMPILE_THREADS": "1"})
    with pytest.raises(SystemExit, match="learner.<section>.<field> or"):
        parse_arm("x:batch_size=3")
    with pytest.raises(SystemExit, match="learner.<section>.<field> or"):
        parse_arm("x:learner.compute.batch_size=3")  # batch_size lives in replay
    with pytest.raises(SystemExit, match="NAME:KEY=VALUE"):
        parse_arm("x:learner.replay.batch_size")
