"""Settings of the environment and of the env actors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PixelConfig(BaseModel):
    """Camera frames as observations (docs/pixels.md): one RGB uint8 frame per step, the actor
    stacks the last frame_stack of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int = Field(84, ge=16, le=512)
    """Width and height of a frame in pixels."""
    camera: str | int | None = None
    """The model's camera by name or id (-1: MuJoCo's free camera); unset: the env's own (a
    DeepMind Control domain's, a gymnasium MujocoEnv's camera_name or default view)."""
    frame_stack: int = Field(3, ge=1, le=16)
    """Frames stacked (oldest first, on the channel axis) into one observation."""
    action_repeat: int = Field(2, ge=1)
    """Env steps per agent step: the action is repeated, the rewards summed, one frame rendered."""
    effects: bool = False
    """Shadows and reflections (several times the render cost: bench/results/render-*.json)."""
    antialias: bool = True
    """Multisampled edges (the model's offsamples, 4 by default); off: plainer edges at about 3x
    the frames/s with software GL (bench/results/render-*.json)."""
    gl: Literal["auto", "egl", "osmesa"] = "auto"
    """Offscreen OpenGL: auto takes an egl/osmesa MUJOCO_GL already set, else EGL (on the GPU where
    one shows, Mesa's software EGL elsewhere)."""


class EnvConfig(BaseModel):
    """Which environment to run: any gymnasium id, or a name registered with ray.tune."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """gymnasium id (e.g. Humanoid-v5), a DeepMind Control task as dm_control/<domain>-<task>-v0
    (e.g. dm_control/walker-walk-v0), or a name given to ray.tune.registry.register_env."""
    kwargs: dict[str, Any] = {}
    """Keyword arguments for gymnasium.make, or the env_config dict for a Ray env creator."""
    module: str | None = None
    """Module imported first in every process, e.g. one that calls register_env."""
    pixels: PixelConfig | None = None
    """Observe camera frames instead of the state vector (`pixels: {}` for the defaults)."""


class ActorConfig(BaseModel):
    """How each EnvActor steps and pushes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_actors: int = Field(2, ge=0)
    """EnvActor processes at start (change live with `herd scale`)."""
    num_envs: int = Field(4, ge=1)
    """Environments per actor, stepped as one batch through the policy."""
    steps_per_push: int = Field(16, ge=1)
    """Vector steps per TransitionBatch: a batch holds steps_per_push * num_envs rows."""
    warmup_steps: int = Field(1_000, ge=0)
    """Env steps per actor with uniform random actions before the policy takes over."""
    wait_for_policy: bool = False
    """Step only once the learner's first weights arrived (a resumed job sets it, with
    warmup_steps 0: its restored policy acts from the first step, no random warm-up)."""
    window: int = Field(4, ge=1)
    """Unacknowledged batches in flight; a full window blocks stepping (backpressure)."""
    num_cpus: float = Field(1.0, gt=0)
    """Ray CPUs reserved per actor."""
    nice: int = Field(0, ge=0, le=19)
    """Lower CPU priority of each actor's process (Linux nice, added to every thread): above 0,
    a learner on the same node (its training thread, ingest, a compile running in the
    background) wins every contested core. The replay ratio paces the actors anyway. Left at 0
    in the configs: 10 gave no clear gain at start-up
    (bench/results/startup-2026-12-03-arms-nvidia-h200.json)."""
    step_threads: int = Field(0, ge=0)
    """Threads stepping the envs (MuJoCo fast path only; mj_step releases the GIL).
    0: one per whole Ray CPU reserved (num_cpus), at most num_envs."""
    fast_mujoco: bool = True
    """Step gymnasium MuJoCo envs below gymnasium's wrappers (same results); off: env.step."""
    max_restarts: int = -1
    """Ray restarts of a dead actor (-1: always)."""
    reconnect_initial_s: float = Field(0.2, gt=0)
    reconnect_max_s: float = Field(5.0, gt=0)
    n_step: int = Field(1, ge=1, le=32)
    """Rewards summed per row (n-step returns); the job sets it from learner.algorithm.n_step."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Discount of the n-step sums; the job sets it from learner.algorithm.gamma."""
    weights_relay: bool = False
    """Actors watch for weights at one relay per node (learner/relay.py), not the learner."""
    tls_ca: str | None = None
    """PEM of the CA (or the learner's self-signed cert) when the learner serves TLS."""
    seed: int = 0
