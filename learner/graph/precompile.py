"""Fill torch's on-disk compile cache for a learner config before any job needs it.

`learner.compute.compile: true` costs ~15-20 s of inductor codegen the first time a shape is seen on a
machine, and more while a job's actors load the CPUs at the same moment. Inductor keeps what it
built in its cache directory (TORCHINDUCTOR_CACHE_DIR, default /tmp/torchinductor_$USER), so a
learner started later with the same sizes only re-traces. `herd precompile CONFIG` runs this on
the GPU node once per machine and config.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import make_update
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.sac import SAC

RING = 1_000
"""Rows of the ring compiled against: enough to sample from; its size is not compiled in."""


def small_update(cfg: LearnerConfig, obs_shape: tuple[int, ...], action_dim: int, action_low,
                 action_high, device: torch.device) -> tuple[SAC, ReplayBuffer]:
    """A fresh SAC of `cfg` and an empty RING-row ring of the learner's layout: what compiles
    to the same code as the learner's own update (herd precompile)."""
    ring = ReplayBuffer(RING, tuple(obs_shape), action_dim, device,
                        obs_dtype=getattr(torch, cfg.replay.dtype),
                        one_step_discount=cfg.algorithm.gamma)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, ring.obs_dim, action_dim,
              np.asarray(action_low), np.asarray(action_high), device)
    return sac, ring


def precompile(cfg: LearnerConfig, obs_dim: int, action_dim: int, action_low, action_high,
               device: torch.device) -> float:
    """Compile and capture `cfg`'s update on a small empty ring; seconds taken (0 on the CPU,
    where nothing is compiled)."""
    if torch.device(device).type != "cuda" or not cfg.compute.compile:
        return 0.0
    t0 = time.perf_counter()
    make_update(*small_update(cfg, (obs_dim,), action_dim, action_low, action_high, device)).prepare()
    return time.perf_counter() - t0
