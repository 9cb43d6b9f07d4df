"""herd/preload.py (`herd up --preload`): a worker importing it takes work at once, and torch &
co. arrive in the background."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys, time
t0 = time.perf_counter()
import herd.preload
returned = time.perf_counter() - t0
while not all(m in sys.modules for m in herd.preload.MODULES) and time.perf_counter() - t0 < 120:
    time.sleep(0.05)
print(returned, all(m in sys.modules for m in herd.preload.MODULES))
"""


def test_preload_returns_at_once_and_loads_in_the_background():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=180,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    returned, loaded = out.stdout.split()
    # torch alone takes ~3 s to import here: a preload that waited for it would not return in 1 s
    assert float(returned) < 1.0, out.stdout
    assert loaded == "True", out.stdout
