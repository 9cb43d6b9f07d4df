"""Learner settings: one frozen model, every field documented."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class LearnerConfig(BaseModel):
    """How the learner stores transitions, learns from them and serves actors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: Literal["auto", "cuda", "cpu"] = "auto"
    """'auto' takes CUDA when present, else the CPU; 'cuda' fails clearly without a GPU."""
    buffer_capacity: int = Field(1_000_000, ge=1_000)
    """Replay ring rows, preallocated on the learner's device."""
    buffer_dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Storage dtype of observations in the ring (halves memory at 16 bits)."""
    batch_size: int = Field(256, ge=2)
    """Transitions sampled per update."""
    replay_ratio: float | None = Field(0.25, gt=0)
    """Updates per inserted transition (Reverb-style limiter); null: no limit either way."""
    ratio_tolerance: int = Field(2_000, ge=0)
    """How many updates learner and actors may drift from the ratio before one side waits."""
    min_replay_size: int = Field(5_000, ge=1)
    """No update before the ring holds this many transitions."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden layers of the actor and the critics when their arch is 'mlp'."""
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
    critic_blocks: int = Field(2, ge=1)
    expansion: int = Field(2, ge=1)
    """Residual blocks: fc1 widens the stream by this factor, fc2 narrows it back."""
    critic_loss: Literal["mse", "c51"] = "mse"
    """'mse': the soft Bellman target as one number; 'c51': a categorical return
    distribution over num_atoms fixed atoms in [v_min, v_max], trained with cross-entropy
    against the target distribution projected back onto the atoms (inside the graph)."""
    num_atoms: int = Field(101, ge=2)
    v_min: float = -250.0
    """Lowest atom of the c51 critic (in scaled-reward units when reward_norm is on)."""
    v_max: float = 250.0
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
    tau: float = Field(0.005, gt=0, le=1)
    """Polyak step of the target critics."""
    actor_ema: float = Field(0.0, ge=0, lt=1)
    """Polyak step of an averaged copy of the actor, one lerp per update inside the graph (0:
    none). With it, evaluations, checkpoint-best, the final evaluation and exports use the
    averaged actor; the env actors still explore with the live one."""
    actor_lr: float = Field(3e-4, gt=0)
    critic_lr: float = Field(3e-4, gt=0)
    alpha_lr: float = Field(3e-4, gt=0)
    actor_weight_decay: float = Field(0.0, ge=0, lt=1)
    """AdamW's decoupled weight decay of the actor's parameters (0: plain Adam, as SAC has it;
    FastTD3 decays both networks by 0.1). The temperature is never decayed."""
    critic_weight_decay: float = Field(0.0, ge=0, lt=1)
    """AdamW's decoupled weight decay of the critics' parameters (0: plain Adam)."""
    init_alpha: float = Field(1.0, gt=0)
    target_entropy: float | None = None
    """Temperature target; null means -action_dim."""
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    amp: Literal["off", "bf16", "fp16", "auto"] = "auto"
    """Autocast on CUDA: 'auto' is bf16 where supported. Always off on the CPU."""
    cuda_graph: bool = True
    """Capture the whole update as one CUDA graph (CUDA only)."""
    compile: bool = False
    """torch.compile the update before capture (CUDA only)."""
    compile_mode: Literal["default", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile mode (no mode that makes CUDA graphs of its own: we capture the update);
    'default' is what bench/learner.py measured (max-autotune spends
    seconds per matmul shape benchmarking at start-up)."""
    compile_options: dict[str, bool | int | float | str] = Field(default_factory=dict)
    """torch._inductor settings for this job's compile (torch.compile's `options`, e.g.
    `{triton.autotune_pointwise: false}`: one kernel config per pointwise kernel instead of 2-6,
    each compiled by Triton, so a shorter cold compile); with compile_mode 'default' only
    (torch.compile takes a mode or options). {}: inductor's defaults. An unknown setting stops
    the learner with one line. The GPU configs set `{triton.autotune_pointwise: false}`: on the
    H200 (cold Humanoid) the compile alone took 30.3 s against 37.4, at 1,541 against 1,544
    updates/s, and the job's compiled graph took over at 45.7 / 50.6 s against 53.0 / 56.1
    (bench/results/compile-profile-options-*, learner-options-*, startup-2026-12-03-{fast,base}-*)."""
    graph_in_background: bool = True
    """CUDA: train from the first rows on an uncompiled CUDA graph while a throwaway twin of the
    update compiles on a thread of its own, then swap the compiled graph in (learner/graphed.py).
    Off: compile and capture first, then train. A cold Humanoid job on the H200: first update
    28 s after submit on, 75 s off (42 s of it the compile); the swap stopped the training
    thread 0.16 s (bench/results/startup-bg-nvidia-h200.json)."""
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
    publish_every_s: float = Field(0.5, gt=0)
    """Seconds between weight publications to the actors."""
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
    never takes the training thread's GIL (learner/ingest_proc.py); 'auto': on with CUDA."""
    ingest_processes: int = Field(1, ge=1)
    """Ingest processes (with ingest_process on): each on a port of its own (`port`, `port` + 1,
    ...; free ones when `port` is 0); actors are sent to theirs at handshake. More when one
    process's core is the limit (bench/fanin.py reports ingest_cores)."""
    max_actors: int = Field(2_000, ge=0)
    """Actors streaming at once; one more is refused at once with RESOURCE_EXHAUSTED (its log
    says so and it retries with backoff), counted as refused_actors. 0: no bound."""
    num_cpus: float = Field(1.0, ge=0)
    """Ray CPUs reserved for the learner actor."""
    num_gpus: float | None = Field(None, ge=0, le=1)
    """Ray GPUs for the learner actor; null: a whole one where the cluster has one. A fraction
    lets several jobs share a GPU (`herd tune --concurrent`)."""
    num_threads: int = Field(1, ge=1)
    """torch CPU threads for the learner process."""
    max_restarts: int = Field(3, ge=-1)
    """Ray restarts of a dead learner, each from the job's latest checkpoint (-1: always)."""
    down_timeout_s: float = Field(180.0, gt=0)
    """How long the driver waits for a dead learner to come back before failing the job."""
    seed: int = 0

    @field_validator("ingest_process", mode="before")
    @classmethod
    def _yaml_on_off(cls, v):
        """YAML reads a bare on/off as a boolean: take it as the word it was."""
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v

    @model_validator(mode="after")
    def _atoms(self):
        if self.critic_loss == "c51" and not self.v_min < self.v_max:
            raise ValueError(f"learner.v_min ({self.v_min}) must be below learner.v_max ({self.v_max})")
        return self

    @model_validator(mode="after")
    def _compile_options(self):
        if self.compile_options and self.compile_mode != "default":
            raise ValueError("learner.compile_options needs learner.compile_mode 'default' "
                             "(torch.compile takes a mode or options, not both)")
        return self

    @model_validator(mode="after")
    def _tls_pair(self):
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("learner.tls_cert and learner.tls_key must be given together")
        return self
