"""Learner settings: one frozen model per component, every field documented.

`LearnerConfig` groups them by concern, and the Learner (learner/learner.py) hands each
component only its own part:

    algorithm  the SAC update's math, state or pixel: networks, losses, normalization, optimizers
               (learner/update/sac.py, learner/update/pixel_sac.py)
    encoder    pixel envs: the conv encoder, its augmentation and target (learner/update/encoder.py)
    replay     the ring and its rate limiter (learner/replay/ring.py, learner/replay/table.py)
    compute    where and how the update runs: device, AMP, CUDA graph, compile (learner/graph/capture.py)
    server     the gRPC ingest and weights port (learner/rpc/, learner/ingest/)
    placement  what Ray reserves for the learner and how it restarts it (the job driver)

Field names are unique across the sections (`LearnerConfig.flat` relies on it). A pixel job
reads the same algorithm and replay keys as a state job (learner/update/pixel_sac.py refuses
those it ignores).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError


def yaml_word(v):
    """YAML reads a bare on/off as a boolean: take it as the word it was (fields whose values
    are words such as 'on' and 'off')."""
    return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AlgorithmConfig(_Section):
    """The SAC update: networks, critic loss, normalization, returns, optimizers. A pixel job
    reads them too, and refuses the residual architectures, the c51 critic, the normalizations,
    actor_ema and the weight decays, which its update ignores."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden layers of the actor and the critics when their arch is 'mlp' (a pixel job's: behind
    their trunks)."""
    actor_arch: Literal["mlp", "residual"] = "mlp"
    """'mlp': Linear+ReLU layers of hidden_sizes; 'residual': pre-LayerNorm residual blocks
    (x + fc2(relu(fc1(norm(x))))), a final LayerNorm, then the head (SimBa/BRO-style)."""
    actor_width: int = Field(256, ge=8, multiple_of=8)
    """Residual actor: width of the residual stream."""
    actor_blocks: int = Field(1, ge=1)
    """Residual actor: number of blocks."""
    critic_arch: Literal["mlp", "residual"] = "mlp"
    """As actor_arch, for the twin critics."""
    critic_width: int = Field(512, ge=8, multiple_of=8)
    """Residual critics: width of the residual stream."""
    critic_blocks: int = Field(2, ge=1)
    """Residual critics: number of blocks."""
    expansion: int = Field(2, ge=1)
    """Residual blocks: fc1 widens the stream by this factor, fc2 narrows it back."""
    critic_loss: Literal["mse", "c51"] = "mse"
    """'mse': the soft Bellman target as one number; 'c51': a categorical return
    distribution over num_atoms fixed atoms in [v_min, v_max], trained with cross-entropy
    against the target distribution projected back onto the atoms (inside the graph)."""
    num_atoms: int = Field(101, ge=2)
    """Atoms of the c51 critic's return distribution."""
    v_min: float = -250.0
    """Lowest atom of the c51 critic (in scaled-reward units when reward_norm is on)."""
    v_max: float = 250.0
    """Highest atom of the c51 critic."""
    obs_norm: bool = False
    """Running observation mean/std on the device, updated from each sampled batch inside the
    update; every network reads clip((obs - mean) / std); the statistics ship with each
    published policy version so the actors act on the same inputs."""
    obs_clip: float = Field(10.0, gt=0)
    """Normalized observations are clipped to +-obs_clip."""
    reward_norm: bool = False
    """Divide rewards by their running RMS (device statistics from the sampled batches) before
    the Bellman target: returns land in the same range on every task (the c51 atoms' range)."""
    norm_horizon: int = Field(1_000_000, ge=1)
    """Sampled rows the running statistics average over at most (older batches fade)."""
    n_step: int = Field(1, ge=1, le=32)
    """Rows sum n discounted rewards and bootstrap from the obs n steps on (fewer where the
    episode ended); summed on the actors, which know the order of steps."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Discount per environment step."""
    tau: float = Field(0.005, gt=0, le=1)
    """Polyak step of the target critics (a pixel job's: their trunk and heads)."""
    actor_ema: float = Field(0.0, ge=0, lt=1)
    """Polyak step of an averaged copy of the actor, one lerp per update inside the graph (0:
    none). With it, evaluations, checkpoint-best, the final evaluation and exports use the
    averaged actor; the env actors still explore with the live one."""
    actor_lr: float = Field(3e-4, gt=0)
    """Adam step size of the actor."""
    critic_lr: float = Field(3e-4, gt=0)
    """Adam step size of the twin critics (a pixel job's: and of the encoder, which the critics'
    loss trains)."""
    alpha_lr: float = Field(3e-4, gt=0)
    """Adam step size of the temperature."""
    actor_weight_decay: float = Field(0.0, ge=0, lt=1)
    """AdamW's decoupled weight decay of the actor's parameters (0: plain Adam, as SAC has it;
    FastTD3 decays both networks by 0.1). The temperature is never decayed."""
    critic_weight_decay: float = Field(0.0, ge=0, lt=1)
    """AdamW's decoupled weight decay of the critics' parameters (0: plain Adam)."""
    init_alpha: float = Field(1.0, gt=0)
    """Temperature at the start."""
    target_entropy: float | None = None
    """Temperature target; null means -action_dim."""
    log_std_min: float = -5.0
    """Lowest log standard deviation of the policy."""
    log_std_max: float = 2.0
    """Highest log standard deviation of the policy."""
    seed: int = 0
    """Seed of the networks' initialization and the sampling (run.seed sets it)."""

    @model_validator(mode="after")
    def _atoms(self):
        if self.critic_loss == "c51" and not self.v_min < self.v_max:
            raise ValueError(f"v_min ({self.v_min}) must be below v_max ({self.v_max})")
        return self


class EncoderConfig(_Section):
    """Pixel envs (EnvSpec.frame_stack > 0): the conv encoder, its augmentation, its target and
    the privileged critic (learner/update/encoder.py, learner/update/pixel_sac.py). The pixel
    update's step sizes, temperature, hidden layers and batch are learner.algorithm's and
    learner.replay's own keys (the encoder learns with critic_lr, as in DrQ-v2). Defaults:
    DrQ-v2's encoder (4 conv 3x3, 32 channels, the first of stride 2; trunk Linear -> LayerNorm
    -> tanh, 50 features; random shifts of 4 pixels) and DrQ's encoder target step of 0.05.
    Unused by state envs."""

    feature_dim: int = Field(50, ge=1)
    """Width of the trunk's output (Linear -> LayerNorm -> tanh) the actor and critics read."""
    channels: int = Field(32, ge=1)
    """Channels of every conv layer."""
    layers: int = Field(4, ge=1)
    """Conv layers, 3x3, the first `strided` of stride 2, the others of stride 1, ReLU after each."""
    strided: int = Field(1, ge=1)
    """Conv layers of stride 2, from the first (DrQ-v2: 1); each more quarters the later layers'
    work."""
    augment_pad: int = Field(4, ge=0)
    """Random shift: pad by this many pixels (edge replicated), crop back at a random offset
    per sample, on the device; 0: no augmentation."""
    encoder_tau: float = Field(0.05, gt=0, le=1)
    """Polyak step of the target encoder."""
    target_encoder: bool = True
    """A Polyak target encoder (encoder_tau) under the target critics, as DrQ has it; false: the
    target critics read the online encoder's features of the next frames, as DrQ-v2 does (one
    conv pass less per update)."""
    privileged_critic: bool = False
    """The critics and their targets read the env's state (what it observes without its camera,
    sent by the actors beside each frame) through an MLP, no conv pass; the actor reads the
    frames, and its loss trains the encoder. The published and exported policy reads frames."""
    privileged_teacher: bool = False
    """With privileged_critic: an actor on the state (the teacher) learns beside the critics as
    a state job's actor does, and the frame actor (the published one) learns to match the
    teacher's action distribution on the same rows, not from the critics' gradient
    (learner/update/pixel_teacher.py)."""
    teacher_updates: int = Field(1, ge=1)
    """With privileged_teacher: critic and teacher steps per update, each on its own batch of
    rows' states (no frame read); the frame actor steps once."""

    @model_validator(mode="after")
    def _strided_within_layers(self):
        if self.strided > self.layers:
            raise ValueError(f"strided {self.strided} is more than the {self.layers} conv layers")
        return self

    @model_validator(mode="after")
    def _teacher_reads_state(self):
        if self.privileged_teacher and not self.privileged_critic:
            raise ValueError("privileged_teacher needs privileged_critic: true (the teacher and "
                             "its critics read the env's state)")
        return self


class ReplayConfig(_Section):
    """The replay ring on the learner's device, what each update samples, and the limiter that
    holds updates and inserts to a ratio."""

    capacity: int = Field(1_000_000, ge=1_000)
    """Replay ring rows, preallocated on the learner's device (a pixel replay's: capped to what
    fits in memory_gib, one line saying so)."""
    memory_gib: float | None = Field(None, gt=0)
    """Most memory a pixel replay may take, GiB; null: the device's free memory at start less a
    reserve for the update (learner/replay/fit.py)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Storage dtype of observations in the ring (halves memory at 16 bits)."""
    batch_size: int = Field(256, ge=2)
    """Transitions sampled per update."""
    ratio: float | None = Field(0.25, gt=0)
    """Updates per inserted transition (Reverb-style limiter); null: no limit either way."""
    ratio_tolerance: int = Field(2_000, ge=0)
    """How many updates learner and actors may drift from the ratio before one side waits."""
    min_size: int = Field(5_000, ge=1)
    """No update before the ring holds this many transitions."""

    @model_validator(mode="after")
    def _limiter_can_move(self):
        """Pacing with which the learner would freeze or starve, refused (one line each). With a
        finite ratio and a tolerance of 1 or more the limiter always allows an insert or an
        update (tests/learner/test_replay_limits.py). Sizes against capacity (min_size,
        batch_size) are the job config's to refuse: a learner built for one update alone
        (tests, benchmarks) keeps the defaults' min_size."""
        if self.ratio is None:
            return self
        if not math.isfinite(self.ratio):
            raise ValueError("ratio must be a finite number of updates per inserted transition "
                             "(inserts would wait for updates forever); null: no pacing")
        if self.ratio_tolerance < 1:
            raise ValueError("ratio_tolerance is 0 with a replay ratio: once min_size rows are in, "
                             "neither an insert nor an update may go and the learner freezes; "
                             "use 1 or more")
        if self.ratio * self.capacity < 1:
            raise ValueError(f"ratio {self.ratio:g} allows less than one update per "
                             f"{self.capacity} inserted rows (a whole ring): the learner would "
                             f"all but stop; raise it, or null for no pacing")
        return self


class ComputeConfig(_Section):
    """Where the update runs and how: device, precision, CUDA graph, torch.compile, threads."""

    device: Literal["auto", "cuda", "cpu"] = "auto"
    """'auto' takes CUDA when present, else the CPU; 'cuda' fails clearly without a GPU."""
    amp: Literal["off", "bf16", "fp16", "auto"] = "auto"
    """Autocast on CUDA: 'auto' is bf16 where supported. Always off on the CPU."""
    cuda_graph: bool = True
    """Capture the whole update as one CUDA graph (CUDA only)."""
    compile: bool = False
    """torch.compile the update before capture (CUDA only)."""
    compile_mode: Literal["default", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile mode, one that makes no CUDA graphs of its own (cuda_graph captures the
    whole update); 'max-autotune-no-cudagraphs' benchmarks kernels for every matmul shape at
    start-up, which lengthens the compile."""
    compile_options: dict[str, bool | int | float | str] = Field(default_factory=dict)
    """torch._inductor settings for this job's compile (torch.compile's `options`, e.g.
    `{triton.autotune_pointwise: false}`: one kernel config per pointwise kernel instead of 2-6,
    each compiled by Triton, so a shorter cold compile); with compile_mode 'default' only
    (torch.compile takes a mode or options). {}: inductor's defaults. An unknown setting stops
    the learner with one line. The GPU configs set `{triton.autotune_pointwise: false}` (the
    measurements: bench/results/compile-profile-options-nvidia-h200.json, learner-options-*)."""
    graph_in_background: bool = True
    """CUDA: train from the first rows on an uncompiled CUDA graph while a throwaway twin of the
    update compiles on a thread of its own, then swap the compiled graph in (learner/graph/capture.py).
    Off: compile and capture first, then train (the first update then waits for the compile:
    bench/results/startup-bg-nvidia-h200.json)."""
    tf32: bool = True
    """Allow TF32 matmuls on CUDA."""
    simultaneous: bool = True
    """Actor and critic steps both read the pre-update critic (as the original softlearning SAC
    does) and run as two concurrent CUDA streams inside the graph; false: the critic steps first
    and the actor's loss reads the updated critic (CleanRL's order), one stream."""
    updates_per_call: int = Field(1, ge=1)
    """Updates replayed per training-loop iteration (inside one graph on CUDA)."""
    graphs_in_flight: int = Field(2, ge=0)
    """Graph replays queued ahead of the GPU before the training thread sleeps on a blocking
    CUDA event; 0: no bound (the thread then spins a whole core in CUDA's launch queue)."""
    num_threads: int = Field(1, ge=1)
    """torch CPU threads for the learner process."""

    _yaml_amp = field_validator("amp", mode="before")(lambda v: yaml_word(v))

    @model_validator(mode="after")
    def _compile_options(self):
        if self.compile_options and self.compile_mode != "default":
            raise ValueError("compile_options needs compile_mode 'default' "
                             "(torch.compile takes a mode or options, not both)")
        return self


class ServerConfig(_Section):
    """The gRPC port actors push transitions to and watch weights from."""

    host: str = "127.0.0.1"
    """gRPC bind address. Anything but loopback requires a token."""
    port: int = Field(0, ge=0, le=65535)
    """gRPC port; 0 picks a free one."""
    advertise_host: str | None = None
    """Address actors dial; default: host, or the node's IP when host is 0.0.0.0."""
    token: str | None = None
    """Shared secret actors send as metadata. Beyond loopback the driver makes a fresh one per job
    when this is null; it is never written to runs/ or the logs."""
    tls_cert: str | None = None
    """PEM certificate chain for a TLS gRPC port (with tls_key); null: plaintext."""
    tls_key: str | None = None
    """PEM private key of tls_cert."""
    max_batch: int = Field(4_096, ge=1)
    """Most transitions one TransitionBatch may carry."""
    max_message_mb: int = Field(64, ge=1)
    """gRPC receive limit."""
    staging_batches: int = Field(64, ge=1)
    """Accepted batches waiting for the ring; when full, acks stall (backpressure)."""
    ingest_process: Literal["auto", "on", "off"] = "auto"
    """Run ingest (gRPC, validation, dedup, packing) in a process of its own, so that its Python
    never takes the training thread's GIL (learner/ingest/processes.py); 'auto': on with CUDA."""
    ingest_processes: int = Field(1, ge=1)
    """Ingest processes (with ingest_process on): each on a port of its own (`port`, `port` + 1,
    ...; free ones when `port` is 0); actors are sent to theirs at handshake. More when one
    process's core is the limit (bench/fanin.py reports ingest_cores)."""
    max_actors: int = Field(2_000, ge=0)
    """Actors streaming at once; one more is refused at once with RESOURCE_EXHAUSTED (its log
    says so and it retries with backoff), counted as refused_actors. 0: no bound."""
    publish_every_s: float = Field(0.5, gt=0)
    """Seconds between weight publications to the actors."""

    _yaml_ingest_process = field_validator("ingest_process", mode="before")(lambda v: yaml_word(v))

    @model_validator(mode="after")
    def _tls_pair(self):
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key must be given together")
        return self


class PlacementConfig(_Section):
    """What Ray reserves for the learner actor, and how a dead one comes back."""

    num_cpus: float = Field(1.0, ge=0)
    """Ray CPUs reserved for the learner actor."""
    num_gpus: float | None = Field(None, ge=0, le=1)
    """Ray GPUs for the learner actor; null: a whole one where the cluster has one. A fraction
    lets several jobs share a GPU (`herd tune --concurrent`)."""
    max_restarts: int = Field(3, ge=-1)
    """Ray restarts of a dead learner, each from the job's latest checkpoint (-1: always)."""
    down_timeout_s: float = Field(180.0, gt=0)
    """How long the driver waits for a dead learner to come back before failing the job."""


MOVED = {
    **{k: f"algorithm.{k}" for k in (
        "hidden_sizes", "actor_arch", "actor_width", "actor_blocks", "critic_arch", "critic_width",
        "critic_blocks", "expansion", "critic_loss", "num_atoms", "v_min", "v_max", "obs_norm",
        "obs_clip", "reward_norm", "norm_horizon", "n_step", "gamma", "tau", "actor_ema", "actor_lr",
        "critic_lr", "alpha_lr", "actor_weight_decay", "critic_weight_decay", "init_alpha",
        "target_entropy", "log_std_min", "log_std_max", "seed")},
    **{k: f"replay.{k}" for k in ("batch_size", "ratio_tolerance")},
    **{k: f"compute.{k}" for k in (
        "device", "amp", "cuda_graph", "compile", "compile_mode", "compile_options",
        "graph_in_background", "tf32", "simultaneous", "updates_per_call", "graphs_in_flight",
        "num_threads")},
    **{k: f"server.{k}" for k in (
        "host", "port", "advertise_host", "token", "tls_cert", "tls_key", "max_batch", "max_message_mb",
        "staging_batches", "ingest_process", "ingest_processes", "max_actors", "publish_every_s")},
    **{k: f"placement.{k}" for k in ("num_cpus", "num_gpus", "max_restarts", "down_timeout_s")},
    "buffer_capacity": "replay.capacity",
    "buffer_dtype": "replay.dtype",
    "replay_ratio": "replay.ratio",
    "min_replay_size": "replay.min_size",
}
"""The flat layout's keys (before the sections) -> where each lives now."""

MOVED_FROM_ENCODER = {"pixel_lr": "algorithm.critic_lr", "pixel_batch_size": "replay.batch_size",
                      "pixel_tau": "algorithm.tau", "pixel_init_alpha": "algorithm.init_alpha",
                      "pixel_hidden_sizes": "algorithm.hidden_sizes"}
"""The pixel update's own copies of algorithm and replay keys -> the key a pixel job reads now
(pixel_lr: critic_lr, actor_lr and alpha_lr, all three of which it set)."""

REMOVED = ("compile_process", "compile_processes", "cuda_early", "compile_pieces")
"""Options measured to give nothing and removed (docs/tried.md lists what each gave)."""


class LearnerConfig(_Section):
    """How the learner learns, stores transitions, computes, serves actors and is placed."""

    algorithm: AlgorithmConfig = AlgorithmConfig()
    """The SAC update's math."""
    encoder: EncoderConfig = EncoderConfig()
    """Pixel envs: the conv encoder, its augmentation and its target."""
    replay: ReplayConfig = ReplayConfig()
    """The replay ring, the batch and the update-to-data ratio."""
    compute: ComputeConfig = ComputeConfig()
    """Device, precision, CUDA graph and compile."""
    server: ServerConfig = ServerConfig()
    """The gRPC port for actors."""
    placement: PlacementConfig = PlacementConfig()
    """Ray resources and restarts of the learner actor."""

    @model_validator(mode="before")
    @classmethod
    def _flat_keys_moved(cls, data):
        """A key of the flat layout is refused with where it lives now (one line)."""
        if isinstance(data, dict):
            gone = [k for k in data if k in REMOVED]
            if gone:
                raise PydanticCustomError(
                    "removed", "learner.{key}: removed, it measured no gain (docs/tried.md)",
                    {"key": gone[0]})
            enc = data.get("encoder")
            moved = [k for k in (enc if isinstance(enc, dict) else ()) if k in MOVED_FROM_ENCODER]
            if moved:
                also = ", actor_lr and alpha_lr" if moved[0] == "pixel_lr" else ""
                raise PydanticCustomError(
                    "moved", "learner.encoder.{key}: moved to learner.{to}{also}{more}",
                    {"key": moved[0], "to": MOVED_FROM_ENCODER[moved[0]], "also": also,
                     "more": f" (and {len(moved) - 1} more)" if len(moved) > 1 else "",
                     "moved": {f"encoder.{k}": MOVED_FROM_ENCODER[k] for k in moved}})
            old = [k for k in data if k in MOVED]
            if old:
                more = f" (and {len(old) - 1} more of the flat layout)" if len(old) > 1 else ""
                raise PydanticCustomError(
                    "moved", "learner.{key}: moved to learner.{to}{more}",
                    {"key": old[0], "to": MOVED[old[0]], "more": more,
                      "moved": {k: MOVED[k] for k in old}})
        return data

    @classmethod
    def flat(cls, **fields) -> LearnerConfig:
        """Built from field names alone, each put in its section: `flat(batch_size=32,
        device="cpu")` is `LearnerConfig(replay={"batch_size": 32}, compute={"device": "cpu"})`."""
        sections: dict[str, dict] = {}
        for name, value in fields.items():
            section = SECTION_OF.get(name)
            if section is None:
                raise TypeError(f"LearnerConfig has no field {name!r}")
            sections.setdefault(section, {})[name] = value
        return cls(**sections)

    @classmethod
    def from_saved(cls, saved: dict, pixels: bool = False, **fields) -> LearnerConfig:
        """The config a checkpoint stored (model_dump), of any earlier layout, with `fields`
        (flat names) set over it; keys no section knows any more are dropped. A pixel run's
        (`pixels`) encoder.pixel_* keys become the algorithm and replay keys it reads now (a
        state run's are dropped: its update never read them)."""
        sections: dict[str, dict] = {}
        for key, value in saved.items():
            if isinstance(value, dict) and key in cls.model_fields:
                for name, v in value.items():
                    if SECTION_OF.get(name) == key:
                        sections.setdefault(key, {})[name] = v
            elif key in MOVED:
                section, name = MOVED[key].split(".")
                sections.setdefault(section, {})[name] = value
        encoder = saved.get("encoder") if pixels else None
        for old, to in MOVED_FROM_ENCODER.items() if isinstance(encoder, dict) else ():
            section, name = to.split(".")
            for n in ("critic_lr", "actor_lr", "alpha_lr") if old == "pixel_lr" else (name,):
                if old in encoder:
                    sections.setdefault(section, {})[n] = encoder[old]
        for name, value in fields.items():
            sections.setdefault(SECTION_OF[name], {})[name] = value
        return cls(**sections)

SECTION_OF = {name: section for section, field in LearnerConfig.model_fields.items()
              for name in field.annotation.model_fields}
"""Field name -> its section (names are unique across sections)."""
