"""bench/fanin.py --quick end to end on the CPU: a real learner, 10 synthetic actors over two
processes through a weights relay; the record has the issue's flat keys and exact books."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"clients", "stalled", "transitions_per_s", "updates_per_s_alone", "update_retention_100k",
        "update_retention_flat_out", "weight_bytes_per_s", "p99_ack_ms", "machine", "command"}


def test_fanin_quick_writes_the_flat_record(tmp_path):
    out = tmp_path / "fanin.json"
    proc = subprocess.run([sys.executable, "bench/fanin.py", "--quick", "--clients", "10", "--seconds", "1.5",
                           "--relay", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [rec] = json.loads(out.read_text())
    assert KEYS <= rec.keys()
    assert rec["clients"] == 10 and rec["books_agree"] and not rec["failures"]
    assert rec["transitions_per_s"] > 0 and rec["updates_per_s_alone"] > 0
    # through the relay the learner sends each version once, not once per actor
    assert 0 < rec["weight_copies_per_publish"] <= 1.0
    assert "torch" in proc.stdout and "cores" in proc.stdout
