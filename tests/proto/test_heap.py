"""steady_heap(): large wire buffers stop costing page faults (a fresh process, no torch)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, resource, sys
import numpy as np
from herd.proto import codec
from herd.proto.heap import steady_heap
on = steady_heap()
rng = np.random.default_rng(0)  # float64 draws cast to float32, as MuJoCo's rows are
rows = {k: rng.normal(size=s).astype(d) for k, s, d in [("obs", (128, 348), np.float32),
        ("action", (128, 17), np.float32), ("reward", 128, np.float32),
        ("next_obs", (128, 348), np.float32), ("terminated", 128, np.uint8)]}
msg = codec.pack_batch(rows, session_id=1, actor_id="a", seq=1, policy_version=1)
msg.SerializeToString()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    msg.SerializeToString()
print(json.dumps({"on": on, "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 50,
                  "torch": "torch" in sys.modules}))
"""


def _probe(**env) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env}, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_steady_heap_stops_the_page_faults() -> None:
    steady, default = _probe(), _probe(HERD_STEADY_HEAP="0")
    print(f"faults per serialize: steady {steady['faults']}, glibc default {default['faults']}")
    assert steady["on"] and not default["on"] and not steady["torch"]
    assert steady["faults"] < 5
    assert default["faults"] > 50  # the cost it removes (glibc's fresh-process behaviour)
