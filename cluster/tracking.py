"""What a run was: its resolved config, seeds, package versions and git commits, written where
users look (summary.json, TensorBoard's text tab, Weights & Biases' run config).

`submit_info` runs where `herd submit` runs (the user's git checkouts are there); `provenance`
in the job's driver (the package versions that actually train).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("herd", "torch", "ray", "gymnasium", "mujoco", "numpy", "grpcio", "protobuf", "pydantic",
            "wandb")


def git_state(path: str | Path) -> dict | None:
    """{'commit', 'dirty'} of the git checkout holding `path`; None outside one (or without git)."""
    where = Path(path)
    where = where if where.is_dir() else where.parent
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)}


def submit_info(config_path: str | Path, runtime_env: dict) -> dict:
    """Facts of the submitting machine: the config file and the git commits of Herd's source
    (an editable install or a checkout on PYTHONPATH), of the config's folder and of the
    --working-dir sent with the job."""
    import herd

    git = {"herd": git_state(Path(herd.__file__).resolve().parent),
           "config": git_state(Path(config_path).resolve())}
    wd = runtime_env.get("working_dir")
    if wd and "://" not in wd:
        git["working_dir"] = git_state(wd)
    return {"config_file": str(Path(config_path).resolve()), "git": git,
            "runtime_env": {k: v for k, v in runtime_env.items() if k != "env_vars"}}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def seeds(cfg) -> dict:
    """Every seed of the job, as the components derive them (controller, stepper, evaluator)."""
    return {
        "run": cfg.run.seed,
        "learner": cfg.learner.algorithm.seed,  # torch.manual_seed: network init, replay sampling
        "actors": cfg.actors.seed,
        "actor_i": f"{cfg.actors.seed} * 1000 + i (warm-up actions, exploration noise)",
        "actor_env_reset": "actor_seed * 10007 + env * 101 + resets",
        "evaluation": cfg.eval_seed,  # episode i resets with evaluation + i
    }


def provenance(cfg, config: dict) -> dict:
    """The run's record: `config` is the resolved config as written to config.yaml (secrets
    redacted)."""
    submitted = json.loads(os.environ.get("HERD_SUBMIT_INFO") or "{}")
    return {
        "config": config,
        "seeds": seeds(cfg),
        "versions": versions(),
        "git": submitted.get("git"),
        "config_file": submitted.get("config_file"),
        "runtime_env": submitted.get("runtime_env"),
        "host": platform.node(),
        "argv": sys.argv,
    }


def open_wandb(wandb_cfg, run_dir: Path, job_id: str, record: dict):
    """A W&B run for the job (run.wandb), its files under runs/<job>/wandb/; None when off."""
    if wandb_cfg is None or wandb_cfg.mode == "disabled":
        return None
    try:
        import wandb
    except ImportError:
        raise RuntimeError("run.wandb is set but wandb is not installed on the cluster: "
                           "pip install 'herd[wandb]' on every node") from None
    return wandb.init(project=wandb_cfg.project, entity=wandb_cfg.entity, group=wandb_cfg.group,
                      name=wandb_cfg.name or job_id, id=job_id, tags=list(wandb_cfg.tags) or None,
                      notes=wandb_cfg.notes, mode=wandb_cfg.mode, dir=str(run_dir), config=record,
                      reinit="create_new")
