"""A process that rendered pixel envs exits without GL errors: dm_control's EGL renderer ends
the EGL display at exit before Herd's shared context is freed (atexit runs the later
registration first), and the context must not try again in its __del__."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
from herd.actors.config import EnvConfig, PixelConfig
from herd.actors.envs import make_env
env = make_env(EnvConfig(id="InvertedPendulum-v5", pixels=PixelConfig(size=16)))
env.reset(seed=0)
from dm_control._render.pyopengl import egl_renderer  # its atexit ends the display
print("rendered")
"""


def test_a_process_that_rendered_with_egl_exits_quietly():
    from herd.evaluation import gl_context_fails

    if gl_context_fails("egl"):
        pytest.skip(f"no EGL here: {gl_context_fails('egl')}")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "rendered", r.stderr
    assert "EGLError" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
