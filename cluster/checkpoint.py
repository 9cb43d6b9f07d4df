"""A run's checkpoint read back: where model.pt is, the env it was trained on, its tensors
(never anything that unpickling would run) and the policy it holds, packed as the learner
published it. `herd evaluate`, `herd export`, `herd.load_policy` and `herd submit --resume`
read checkpoints through these."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from herd.actors.config import EnvConfig
from herd.actors.envs import describe, make_env
from herd.learner.checkpoint import (  # noqa: F401 -- CheckpointRefused: callers' name here
    CheckpointRefused,
    read_model,
    saved_policy,
)


def resolve_checkpoint(path: str | Path) -> Path:
    """runs/<job> or runs/<job>/checkpoint -> the directory holding model.pt."""
    p = Path(path)
    for cand in (p, p / "checkpoint"):
        if (cand / "model.pt").is_file():
            return cand
    raise FileNotFoundError(f"{path}: no checkpoint here (expected model.pt or checkpoint/model.pt)")


RESUMABLE = ("checkpoint", "checkpoint-best")
"""The folders of a run that `herd submit --resume runs/<job>` takes the newest of: the last
(periodic or final) checkpoint, and the full state of the best evaluation."""


def newest_checkpoint(path: str | Path) -> tuple[Path, str]:
    """The checkpoint `--resume PATH` continues from, and why that one: PATH itself when it
    holds model.pt, else the newest (by model.pt's time) of PATH's checkpoint/ and
    checkpoint-best/ (a run stopped without a wind-down may have only the latter)."""
    p = Path(path)
    if (p / "model.pt").is_file():
        return p, "named"
    if p.name == "model.pt" and p.is_file():
        return p.parent, "named"
    found = [p / name for name in RESUMABLE if (p / name / "model.pt").is_file()]
    if not found:
        raise FileNotFoundError(f"{path}: no checkpoint here (looked for model.pt, "
                                f"{'/model.pt, '.join(RESUMABLE)}/model.pt)")
    newest = max(found, key=lambda d: (d / "model.pt").stat().st_mtime)
    age = time.time() - (newest / "model.pt").stat().st_mtime
    why = f"the newest checkpoint there, saved {age:.0f} s ago"
    if len(found) > 1:
        other = next(d for d in found if d != newest)
        why += f"; {other.name}/ is older"
    return newest, why


def job_env_config(ckpt: Path) -> EnvConfig:
    """The env a checkpoint was trained on, from the run's resolved config.yaml beside it."""
    import yaml

    cfg_file = ckpt.parent / "config.yaml"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{cfg_file} is missing: pass --env ENV_ID")
    return EnvConfig(**yaml.safe_load(cfg_file.read_text())["env"])


def load_checkpoint(ckpt: str | Path) -> dict:
    """model.pt of a checkpoint directory, on the CPU; CheckpointRefused for a file that holds
    anything but tensors and plain containers (unpickling it could run code)."""
    return read_model(ckpt, "cpu")


def weights_from_checkpoint(ckpt: str | Path, env_cfg: EnvConfig):
    """A PolicyWeights message rebuilt from a checkpoint: the learner's own update, built from
    the checkpoint's config and loaded from it, packs its actor (layout, observation statistics)
    exactly as the learner published it to the actors."""
    from herd.proto import codec

    state = load_checkpoint(ckpt)
    env = make_env(env_cfg)
    d = describe(env)
    env.close()
    try:
        return saved_policy(state, codec.spec_to_proto(env_cfg.id, **d))  # as evaluated
    except (RuntimeError, KeyError) as e:  # torch lists every mismatched tensor: keep the first
        obs_dim, action_dim = int(np.prod(d["obs_shape"])), int(np.prod(d["action_shape"]))
        raise ValueError(f"{ckpt}: its networks do not fit {env_cfg.id} (obs {obs_dim}, action "
                         f"{action_dim}): {str(e).strip().splitlines()[0]}") from None
