"""bench/cli.py end to end on the CPU: its own Ray head, a demo job, each CLI command timed as a
fresh process, then stopped; one flat record per command."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.cluster


def test_cli_bench_times_each_command_about_a_running_job(tmp_path):
    out = tmp_path / "cli.json"
    proc = subprocess.run([sys.executable, "bench/cli.py", "--repeat", "2", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recs = json.loads(out.read_text())
    assert [r["cli"] for r in recs] == ["status", "list", "scale", "stop"]
    assert [r["calls"] for r in recs] == [2, 2, 2, 1]
    for r in recs:
        assert len(r["seconds"]) == r["calls"] and r["median_s"] > 0
        assert {"machine", "torch", "cores", "command"} <= r.keys()
