"""Settings of the environment and of the env actors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    """Shadows and reflections, at a render cost several times the plain frame's
    (bench/results/render-*.json)."""
    antialias: bool = True
    """Multisampled edges (the model's offsamples, 4 by default); off: plainer edges and a faster
    render, most with software GL (bench/results/render-*.json)."""
    gl: Literal["auto", "egl", "osmesa"] = "auto"
    """Offscreen OpenGL: auto takes an egl/osmesa MUJOCO_GL already set, else EGL (on the GPU where
    one shows, Mesa's software EGL elsewhere)."""


Range = tuple[float, float]


class RandomizeConfig(BaseModel):
    """Domain randomization (docs/camera-to-robot.md): at every reset the env's MuJoCo model is
    drawn anew around its own values, from `seed` and the episode's reset seed; a field set to
    null leaves that part nominal. Scales multiply the model's value, offsets are added to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(0, ge=0)
    """Seed of the training draws: an episode's draw follows from it and the episode's reset seed."""
    heldout_seed: int = Field(1, ge=0)
    """Seed of the held-out draws evaluation reports beside the nominal model (differs from seed)."""
    train: bool = True
    """Draw while training; false: the actors step the model as written and evaluations still
    report the held-out draws (how a policy trained without randomization copes with them)."""
    light_dir: Range | None = (-0.3, 0.3)
    """Offset added to each component of every light's direction (then normalized)."""
    light_diffuse: Range | None = (0.6, 1.4)
    """Scale of every light's diffuse colour, per light and channel (colour and intensity)."""
    light_ambient: Range | None = (-0.1, 0.2)
    """Offset added to every light's ambient colour, per light (clipped to [0, 1])."""
    geom_rgb: Range | None = (-0.25, 0.25)
    """Offset added to each geom's red, green and blue (clipped to [0, 1])."""
    material_rgb: Range | None = (-0.25, 0.25)
    """Offset added to each material's red, green and blue: tints textured floors and skins."""
    camera_pos: Range | None = (-0.02, 0.02)
    """Offset in metres added to each axis of the camera's position (a free camera's look-at)."""
    camera_angle: Range | None = (-3.0, 3.0)
    """Rotation in degrees of the camera about each of its axes (a free camera's azimuth and
    elevation)."""
    camera_fovy: Range | None = (-3.0, 3.0)
    """Offset in degrees added to the camera's vertical field of view."""
    mass: Range | None = (0.8, 1.2)
    """Scale of each body's mass and inertia."""
    friction: Range | None = (0.7, 1.3)
    """Scale of each geom's friction (sliding, torsional, rolling)."""
    damping: Range | None = (0.7, 1.3)
    """Scale of each joint's damping, per degree of freedom."""
    actuator_gain: Range | None = (0.8, 1.2)
    """Scale of each actuator's gain (a motor's force per control; a servo's kp and kv with it)."""
    gravity: Range | None = (0.95, 1.05)
    """Scale of the gravity vector."""

    @model_validator(mode="after")
    def _ranges(self) -> RandomizeConfig:
        if self.heldout_seed == self.seed:
            raise ValueError(f"heldout_seed equals seed ({self.seed}): held-out draws must differ "
                             "from training's")
        for name in SCALES + OFFSETS:
            r = getattr(self, name)
            if r is None:
                continue
            lo, hi = r
            if not lo <= hi:
                raise ValueError(f"{name}: [{lo:g}, {hi:g}] is not a range (low above high)")
            if name in SCALES and lo <= 0:
                raise ValueError(f"{name}: [{lo:g}, {hi:g}] scales the model's value: both ends "
                                 "must be above 0")
        return self


SCALES = ("light_diffuse", "mass", "friction", "damping", "actuator_gain", "gravity")
"""RandomizeConfig's fields that multiply the model's values."""
OFFSETS = ("light_dir", "light_ambient", "geom_rgb", "material_rgb", "camera_pos", "camera_angle",
           "camera_fovy")
"""RandomizeConfig's fields added to the model's values."""


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
    randomize: RandomizeConfig | None = None
    """Draw the model's looks and physics anew every episode (`randomize: {}` for the defaults);
    unset: the model as it is written."""

    def nominal(self) -> EnvConfig:
        """The env as written, without randomization."""
        return self.model_copy(update={"randomize": None})

    def heldout(self) -> EnvConfig | None:
        """The env randomized from its held-out seed (None for an env that is not randomized)."""
        r = self.randomize
        if r is None:
            return None
        drawn = r.model_copy(update={"seed": r.heldout_seed, "train": True})
        return self.model_copy(update={"randomize": drawn})


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
    """Actors watch for weights at one relay per node (learner/rpc/relay.py), not the learner."""
    tls_ca: str | None = None
    """PEM of the CA (or the learner's self-signed cert) when the learner serves TLS."""
    seed: int = 0
