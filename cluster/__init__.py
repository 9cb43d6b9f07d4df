"""Herd: distributed Soft Actor-Critic on Ray. The control plane (configs, the `herd` CLI, the
job driver, the per-job controller) and the Python API:

    import herd
    job = herd.submit("configs/demo.yaml", seed=3)    # herd.Job: .wait(), .follow(), .status()
    policy = herd.load_policy(job.run_dir)            # .act(obs, deterministic=True)

The API's names load on first use (PEP 562): `import herd.learner.x` or `herd.actors.y` runs
this file first, and the learner and the actors must not pull in Ray or the CLI.
"""

from __future__ import annotations

import importlib

_API = {
    "submit": "herd.api", "Job": "herd.api", "HerdError": "herd.api", "down": "herd.api",
    "load_policy": "herd.export", "export_policy": "herd.export", "Policy": "herd.export",
    "evaluate": ("herd.evaluation", "evaluate_checkpoint"),
    "plot": ("herd.curves", "plot"),
    "load_config": "herd.config", "ConfigError": "herd.config", "JobConfig": "herd.config",
}

__all__ = ["ConfigError", "HerdError", "Job", "JobConfig", "Policy", "down", "evaluate",
           "export_policy", "load_config", "load_policy", "plot", "submit"]


def __getattr__(name: str):
    where = _API.get(name)
    if where is None:
        raise AttributeError(f"module 'herd' has no attribute {name!r}")
    module, attr = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_API])
