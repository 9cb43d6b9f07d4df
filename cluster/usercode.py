"""A user's own code (their env's package) where Herd needs it outside the job: at submit, and
after the job, in `herd evaluate`, `herd export` and `herd.load_policy`.

A job's processes import the user's code from what Ray unpacks of `herd submit --working-dir`
and `--py-modules`. `herd submit` writes where those came from into runs/<job>/code.json, and
exports carry the same list, so that reading a run back on the submitting machine imports
`env.module` from there, with no PYTHONPATH to set. Elsewhere, `--working-dir DIR` names it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

CODE_FILE = "code.json"


def search_paths(runtime_env: dict) -> list[str]:
    """The sys.path entries Ray gives a job's processes for its runtime_env: the working_dir
    itself and each py_module's parent (a wheel or zip as it is). Remote URIs have none here."""
    wd = runtime_env.get("working_dir")
    paths = [wd] if wd and "://" not in wd else []
    for m in runtime_env.get("py_modules", []):
        if "://" not in m:
            paths.append(m if m.endswith((".whl", ".zip")) else str(Path(m).parent))
    return paths


def record(run_dir: Path, runtime_env: dict) -> None:
    """runs/<job>/code.json: the local paths of the job's code (nothing when it sent none)."""
    paths = search_paths(runtime_env)
    if not paths:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CODE_FILE).write_text(json.dumps({"paths": paths, **runtime_env}, indent=1) + "\n")


def recorded(run_dir: Path) -> list[str]:
    """The paths runs/<job>/code.json lists ([] without one, or unreadable)."""
    try:
        return list(json.loads((Path(run_dir) / CODE_FILE).read_text())["paths"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def use(paths: Iterable[str | Path]) -> list[str]:
    """Put the existing ones of `paths` first on sys.path (as Ray does in a job's processes);
    the list of those that now are there."""
    added = []
    for p in reversed([str(Path(p).expanduser().resolve()) for p in paths if p]):
        if Path(p).exists():
            if p in sys.path:
                sys.path.remove(p)
            sys.path.insert(0, p)
            added.insert(0, p)
    return added

