"""A Herd job's configuration: one YAML file, validated before any process starts."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from herd.actors.config import ActorConfig, EnvConfig
from herd.learner.config import LearnerConfig


class ConfigError(ValueError):
    """A configuration a user must fix; the message says where and how."""


class RunConfig(BaseModel):
    """Budgets, evaluation and bookkeeping of one job."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("herd", pattern=r"^[A-Za-z0-9_.-]+$")
    """Job name, part of the job id and of runs/<job>/."""
    max_env_steps: int = Field(1_000_000, ge=1)
    """Stop once the learner has received this many transitions."""
    max_seconds: float = Field(3_600, gt=0)
    """Stop after this much wall-clock time."""
    target_return: float | None = None
    """The return this task counts as learned (reported; see stop_at_target)."""
    stop_at_target: bool = False
    """Stop as soon as a periodic evaluation reaches target_return."""
    eval_every_s: float = Field(30.0, gt=0)
    """Seconds between deterministic evaluations (a separate Ray task)."""
    eval_episodes: int = Field(5, ge=1)
    log_every_s: float = Field(2.0, gt=0)
    """Seconds between metric rows (CSV, TensorBoard, the log line)."""
    checkpoint_every_s: float = Field(300.0, gt=0)
    keep_checkpoints: int = Field(1, ge=1)
    """How many checkpoints to keep: checkpoint/ is the latest, older ones stay in
    checkpoints/<updates>/ (hard links: no copy; each holds its files' space until pruned)."""
    save_replay: bool = False
    """Include the replay buffer in checkpoints (torch.load(mmap=True) compatible)."""
    start_without_actors: bool = False
    """Allow actors.num_actors: 0 (the job idles until `herd scale` adds actors)."""


class JobConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    env: EnvConfig
    learner: LearnerConfig = LearnerConfig()
    actors: ActorConfig = ActorConfig()
    run: RunConfig = RunConfig()

    @model_validator(mode="before")
    @classmethod
    def _actors_sum_the_learners_n_steps(cls, data):
        """n and gamma are the learner's algorithm settings; the actors, which sum the
        n-step rewards, take them from there (set once, in learner:)."""
        if not isinstance(data, dict) or not isinstance(data.get("actors", {}), dict):
            return data
        learner = data.get("learner") or {}
        actors = dict(data.get("actors") or {})
        for key in ("n_step", "gamma"):
            given = learner.get(key) if isinstance(learner, dict) else None
            value = LearnerConfig.model_fields[key].default if given is None else given
            if key in actors and actors[key] != value:  # equal: a dumped config read back
                raise ValueError(f"set learner.{key}, not actors.{key}: the actors take it from the learner")
            actors[key] = value
        return {**data, "actors": actors}

    @model_validator(mode="after")
    def _sizes(self):
        lc = self.learner
        if lc.min_replay_size > lc.buffer_capacity:
            raise ValueError(
                f"learner.min_replay_size ({lc.min_replay_size}) exceeds "
                f"learner.buffer_capacity ({lc.buffer_capacity}): learning would never start"
            )
        if lc.batch_size > lc.buffer_capacity:
            raise ValueError("learner.batch_size exceeds learner.buffer_capacity")
        if lc.replay_ratio is not None and lc.ratio_tolerance < 1:
            raise ValueError("learner.ratio_tolerance is 0 with a replay_ratio: the learner would "
                             "wait for rows and the actors for updates, forever; use 1 or more")
        if self.actors.num_actors == 0 and not self.run.start_without_actors:
            raise ValueError("actors.num_actors is 0: the job would idle; use 1 or more, or set "
                             "run.start_without_actors: true and add actors with `herd scale`")
        if lc.min_replay_size > self.run.max_env_steps:
            raise ValueError(f"learner.min_replay_size ({lc.min_replay_size}) exceeds "
                             f"run.max_env_steps ({self.run.max_env_steps}): the job would end "
                             "before its first update")
        rows = self.actors.num_envs * max(self.actors.steps_per_push, lc.n_step)
        if rows > lc.max_batch:
            raise ValueError(
                f"actors push {rows} rows per batch (num_envs x steps_per_push, or x n_step) but "
                f"learner.max_batch is {lc.max_batch}"
            )
        return self


def _format(e: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  - {where}: {err['msg']}")
    return "\n".join(lines)


def parse_config(data: dict, source: str = "config") -> JobConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return JobConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format(e, source)) from None


def load_config(path: str | Path) -> JobConfig:
    """Read and validate a YAML job config; ConfigError says what is wrong and where."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse_config(data, str(path))


def check_env(cfg: JobConfig) -> dict:
    """Make the env once (no Ray needed): unknown ids fail here, before anything starts."""
    from herd.actors.envs import describe, make_env

    env = make_env(cfg.env)
    try:
        return describe(env)
    finally:
        env.close()


def dump_config(cfg: JobConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
