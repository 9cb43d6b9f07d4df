"""What a learner config and an env spec get, chosen here and nowhere else: the device, where
ingest runs, the replay ring and its table, and the update.

    state env (EnvSpec.frame_stack 0)   ReplayBuffer (packed rows) + ReplayTable, SAC
    pixel env (frame_stack > 0)         FrameReplay (each frame once) + FrameTable, PixelSAC, or
                                        TeacherPixelSAC with learner.encoder.privileged_teacher

The Learner, checkpoint loading (learner/checkpoint.py), `herd precompile` (`precompile`, on a
small ring of the same layout) and the benchmarks build through `build_update` and
`build_ring`; the graph's background compile asks the update itself for its `twin()`.

torch is imported inside the functions: the job driver imports the Learner's module, which
imports this one, for the actor class alone.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

import numpy as np

from herd.proto import codec
from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:
    import torch

    from herd.learner.config import LearnerConfig, ServerConfig
    from herd.learner.replay.fit import Fit
    from herd.learner.replay.frames import FrameReplay
    from herd.learner.replay.ring import ReplayBuffer
    from herd.learner.update.pixel_sac import PixelSAC
    from herd.learner.update.sac import SAC

log = logging.getLogger("herd.learner")

PRECOMPILE_ROWS = 1_000
"""Rows of the ring `herd precompile` compiles against: enough to sample from; its size is not
compiled in."""


def pick_device(name: str) -> torch.device:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "learner.compute.device is 'cuda' but this process sees no GPU "
            "(is the learner on a GPU node, and is torch a CUDA build?); "
            "use device: auto to fall back to the CPU"
        )
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def cuda_likely(name: str) -> bool:
    """pick_device(name) is CUDA, as far as can be told before torch is imported: asked for, or
    auto on a machine with an NVIDIA driver whose GPUs are not all hidden."""
    if name.startswith("cuda"):
        return True
    return (name == "auto" and os.path.exists("/dev/nvidiactl")
            and os.environ.get("CUDA_VISIBLE_DEVICES", "x") != "")


def ingest_in_processes(cfg: ServerConfig, cuda: bool, pixels: bool = False) -> bool:
    """Whether ingest runs in processes of its own (learner/ingest/processes.py). Never for a
    pixel env: its batches go to the frame replay whole, which maps frame numbers where it
    writes."""
    return not pixels and (cfg.ingest_process == "on" or (cfg.ingest_process == "auto" and cuda))


def learner_spec(cfg: LearnerConfig, spec: pb.EnvSpec) -> pb.EnvSpec:
    """The spec the learner serves for an env's `spec`: its state_dim 0 unless the critics read
    the env's state (learner.encoder.privileged_critic), which asks the actors for no state."""
    if not spec.state_dim or cfg.encoder.privileged_critic:
        return spec
    frames_only = type(spec)()
    frames_only.CopyFrom(spec)
    frames_only.state_dim = 0
    return frames_only


def row_layout(cfg: LearnerConfig, spec: pb.EnvSpec) -> dict:
    """A state env's ring layout (ReplayBuffer's and the ingest processes' packing keywords)."""
    import torch

    return dict(obs_shape=tuple(spec.obs_shape), action_dim=int(np.prod(spec.action_shape)),
                obs_dtype=getattr(torch, cfg.replay.dtype), one_step_discount=cfg.algorithm.gamma)


def build_ring(cfg: LearnerConfig, spec: pb.EnvSpec, device: torch.device,
               capacity: int | None = None) -> tuple[ReplayBuffer | FrameReplay, Fit | None]:
    """The ring an env's rows go to, and for a pixel env how its capacity fits the device
    (learner/replay/fit.py: capped to what the device holds, one line logged). `capacity`: rows
    instead of learner.replay.capacity, uncapped."""
    if not codec.is_pixel_spec(spec):
        from herd.learner.replay.ring import ReplayBuffer

        return ReplayBuffer(capacity or cfg.replay.capacity, device=device,
                            **row_layout(cfg, spec)), None
    from herd.learner.replay.fit import available_bytes, fit_capacity
    from herd.learner.replay.frames import FrameReplay, default_frame_capacity, layout_bytes

    frame_shape = tuple(spec.obs_shape)
    if len(frame_shape) != 3 or spec.obs_dtype != "uint8":
        raise ValueError(f"a pixel env's obs_shape must be one frame [C, H, W] of uint8; "
                         f"the spec has {frame_shape} {spec.obs_dtype}")
    action_dim = int(np.prod(spec.action_shape))
    fit = None
    if capacity is None:
        fit = fit_capacity(cfg.replay.capacity, lambda n: layout_bytes(
                               n, default_frame_capacity(n), frame_shape, action_dim, spec.state_dim),
                           *available_bytes(device, cfg.replay.memory_gib),
                           at_least=cfg.replay.min_size)
        if fit.note:
            log.warning("herd learner: %s", fit.note)
        capacity = fit.capacity
    ring = FrameReplay(capacity, frame_shape, spec.frame_stack, action_dim, device,
                       one_step_discount=cfg.algorithm.gamma, state_dim=spec.state_dim)
    return ring, fit


def build_table(cfg: LearnerConfig, ring: ReplayBuffer | FrameReplay):
    """The ring behind its rate limiter (learner/replay/table.py): what the trainer inserts into
    and samples from."""
    from herd.learner.replay.frames import FrameReplay
    from herd.learner.replay.table import FrameTable, RateLimiter, ReplayTable

    replay = cfg.replay
    limiter = RateLimiter(replay.ratio, replay.ratio_tolerance, replay.min_size)
    if isinstance(ring, FrameReplay):
        return FrameTable(ring, limiter)
    return ReplayTable(ring, limiter, chunk_rows=2 * cfg.server.max_batch)


def build_update(cfg: LearnerConfig, spec: pb.EnvSpec, device: torch.device | str) -> SAC | PixelSAC:
    """The update an env gets: PixelSAC for a pixel env (TeacherPixelSAC with
    learner.encoder.privileged_teacher), else the state SAC. Fresh weights, seeded by
    learner.algorithm.seed. A pixel env's config that sets a key the pixel update ignores is
    refused here, in one line (learner/update/pixel_sac.py refuse_ignored): the learner's start
    fails with it before any update."""
    action = (int(np.prod(spec.action_shape)), np.asarray(spec.action_low, np.float32),
              np.asarray(spec.action_high, np.float32))
    if codec.is_pixel_spec(spec):
        from herd.learner.update.pixel_sac import PixelSAC, refuse_ignored
        from herd.learner.update.pixel_teacher import TeacherPixelSAC

        refuse_ignored(cfg)
        kind = TeacherPixelSAC if cfg.encoder.privileged_teacher else PixelSAC
        return kind(cfg.algorithm, cfg.encoder, cfg.compute, cfg.replay.batch_size,
                    tuple(spec.obs_shape), spec.frame_stack, *action, device, spec.state_dim)
    from herd.learner.update.sac import SAC

    return SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, int(np.prod(spec.obs_shape)),
               *action, device)


def small_update(cfg: LearnerConfig, spec: pb.EnvSpec, device: torch.device):
    """(update, ring): a fresh update of `cfg` for `spec` and an empty PRECOMPILE_ROWS ring of
    the learner's layout: what compiles to the same code as the learner's own update."""
    spec = learner_spec(cfg, spec)
    ring, _ = build_ring(cfg, spec, device, capacity=PRECOMPILE_ROWS)
    return build_update(cfg, spec, device), ring


def precompile(cfg: LearnerConfig, spec: pb.EnvSpec, device: torch.device) -> float:
    """Fill torch's on-disk compile cache (TORCHINDUCTOR_CACHE_DIR) with `cfg`'s update for
    `spec`, compiled and captured on a small empty ring, so that a job with the same sizes on
    this machine only re-traces; seconds taken (0 on the CPU or without compile, where nothing
    is compiled). `herd precompile CONFIG` runs it once per machine and config."""
    import torch

    from herd.learner.graph.capture import make_update

    if torch.device(device).type != "cuda" or not cfg.compute.compile:
        return 0.0
    t0 = time.perf_counter()
    make_update(*small_update(cfg, spec, device)).prepare()
    return time.perf_counter() - t0
