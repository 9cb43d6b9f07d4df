"""`import herd`'s API names load on first use: the learner and actor processes import
herd.learner / herd.actors (which run herd/__init__.py first) without Ray or the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_api_names_are_lazy_and_all_resolve():
    code = ("import sys, herd.learner.config, herd.actors.policy, herd.proto.codec\n"
            "assert not [m for m in ('ray', 'herd.cli', 'herd.api', 'herd.export') if m in sys.modules]\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    import herd
    import herd.evaluation  # a submodule import must not shadow an API name

    assert all(getattr(herd, name) is not None for name in herd.__all__)
    assert herd.load_policy.__module__ == "herd.export" and herd.submit.__module__ == "herd.api"
    assert herd.evaluate.__name__ == "evaluate_checkpoint"  # the function, not a module
    assert not [n for n in herd.__all__ if n in {p.stem for p in Path(herd.__file__).parent.glob("*.py")}]
