"""Where a job's run folder is, from what Ray's job list says of it (both the CLI and `herd down`
read it)."""

from __future__ import annotations

import shlex
from pathlib import Path


def run_dir_of(info: dict | None) -> Path | None:
    """runs/<job> of a job, from its driver's command line (--runs-dir, --job-id); None where
    that is not a Herd driver's."""
    argv = shlex.split((info or {}).get("entrypoint") or "")
    try:
        return Path(argv[argv.index("--runs-dir") + 1]) / argv[argv.index("--job-id") + 1]
    except (ValueError, IndexError):
        return None
