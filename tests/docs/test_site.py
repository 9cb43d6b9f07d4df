"""The docs site builds with `mkdocs build --strict`: every page in the nav exists, every link and
anchor resolves, every plot of bench/results is found (make docs does the same into site/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_strict_build(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    for page in ("index.html", "configuration/index.html", "cli/index.html", "performance/index.html"):
        assert (site / page).is_file(), page
    plots = {p.name for p in (ROOT / "bench/results").glob("*.png")}
    assert plots and plots <= {p.name for p in (site / "results").glob("*.png")}


def test_readme_is_a_front_door():
    """At most 250 lines; the own-robot example and the docs one click away."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for target in ("docs/own-robot.md", "examples/myrobot", "docs/cli.md", "docs/configuration.md"):
        assert target in text, target
