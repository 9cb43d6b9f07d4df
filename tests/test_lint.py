"""`make lint` stays clean: ruff (pinned in pyproject.toml) over the same folders as the Makefile."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    folders = re.search(r"ruff check (.+)", (ROOT / "Makefile").read_text()).group(1).split()
    ruff = Path(sys.executable).parent / "ruff"
    assert ruff.exists(), f"no ruff beside {sys.executable}: `make setup` installs the dev extra"
    r = subprocess.run([str(ruff), "check", "--output-format", "concise", *folders], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, f"ruff found problems (run `make lint`):\n{r.stdout}{r.stderr}"
