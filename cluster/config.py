"""A Herd job's configuration: one YAML file, validated before any process starts."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from herd.actors.config import ActorConfig, EnvConfig
from herd.learner.config import REMOVED, AlgorithmConfig, LearnerConfig


class ConfigError(ValueError):
    """A configuration a user must fix; the message says where and how."""


class WandbConfig(BaseModel):
    """Where a job's metrics go in Weights & Biases: wandb.init's arguments of the same names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str
    entity: str | None = None
    group: str | None = None
    name: str | None = None
    """The W&B run name; default: the job id."""
    tags: list[str] = []
    notes: str | None = None
    mode: str = Field("online", pattern="^(online|offline|disabled)$")
    """offline: files under runs/<job>/wandb/, no network (`wandb sync` uploads them later)."""


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
    seed: int | None = Field(None, ge=0)
    """One seed for the job (`herd submit --seed N`): learner.algorithm.seed and actors.seed default to
    it, and the evaluations reset their envs from 10_000 + 1_000 * seed (JobConfig.eval_seed)."""
    wandb: WandbConfig | None = None
    """Log the metric rows to Weights & Biases too (needs `pip install 'herd[wandb]'`)."""


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
        n-step rewards, take them from there (set once, in learner.algorithm)."""
        if not isinstance(data, dict) or not isinstance(data.get("actors", {}), dict):
            return data
        learner = data.get("learner") or {}
        algorithm = learner.get("algorithm") if isinstance(learner, dict) else None
        algorithm = algorithm if isinstance(algorithm, dict) else {}
        actors = dict(data.get("actors") or {})
        for key in ("n_step", "gamma"):
            given = algorithm.get(key)
            value = AlgorithmConfig.model_fields[key].default if given is None else given
            if key in actors and actors[key] != value:  # equal: a dumped config read back
                raise ValueError(f"set learner.algorithm.{key}, not actors.{key}: the actors "
                                 "take it from the learner")
            actors[key] = value
        return {**data, "actors": actors}

    @model_validator(mode="before")
    @classmethod
    def _seeds_from_run_seed(cls, data):
        """run.seed is the job's one seed: the learner's and the actors' follow it unless set
        to the same value (a dumped config read back); a different one is a contradiction."""
        if not isinstance(data, dict) or not isinstance(data.get("run") or {}, dict):
            return data
        seed = (data.get("run") or {}).get("seed")
        if seed is None:
            return data
        out = dict(data)
        for path in (("learner", "algorithm"), ("actors",)):
            node = out
            for part in path:  # a copy of each section on the way down
                child = node.get(part) or {}
                if not isinstance(child, dict):
                    return data
                node[part] = node = dict(child)
            if node.get("seed") is not None and node["seed"] != seed:
                raise ValueError(f"{'.'.join(path)}.seed={node['seed']!r} contradicts "
                                 f"run.seed={seed!r}: set run.seed only (the others follow it)")
            node["seed"] = seed
        return out

    @property
    def eval_seed(self) -> int:
        """The first seed of the evaluation episodes (episode i resets its env with eval_seed + i)."""
        return 10_000 + 1_000 * (self.run.seed or 0)

    @model_validator(mode="after")
    def _sizes(self):
        lc, rc = self.learner, self.learner.replay
        if rc.min_size > rc.capacity:
            raise ValueError(
                f"learner.replay.min_size ({rc.min_size}) exceeds "
                f"learner.replay.capacity ({rc.capacity}): learning would never start"
            )
        if rc.batch_size > rc.capacity:
            raise ValueError("learner.replay.batch_size exceeds learner.replay.capacity")
        if rc.ratio is not None and rc.ratio_tolerance < 1:
            raise ValueError("learner.replay.ratio_tolerance is 0 with a replay ratio: the learner "
                             "would wait for rows and the actors for updates, forever; use 1 or more")
        if self.actors.num_actors == 0 and not self.run.start_without_actors:
            raise ValueError("actors.num_actors is 0: the job would idle; use 1 or more, or set "
                             "run.start_without_actors: true and add actors with `herd scale`")
        if rc.min_size > self.run.max_env_steps:
            raise ValueError(f"learner.replay.min_size ({rc.min_size}) exceeds "
                             f"run.max_env_steps ({self.run.max_env_steps}): the job would end "
                             "before its first update")
        rows = self.actors.num_envs * max(self.actors.steps_per_push, lc.algorithm.n_step)
        if rows > lc.server.max_batch:
            raise ValueError(
                f"actors push {rows} rows per batch (num_envs x steps_per_push, or x n_step) but "
                f"learner.server.max_batch is {lc.server.max_batch}"
            )
        return self


def _format(e: ValidationError, source: str, given: Mapping[str, str] | None = None) -> str:
    """Every error, one per line, each naming its key; an error in a value given on the command
    line (`given`: config key -> how it was given, e.g. '--set learner.replay.batch_size=64')
    names that flag too. One error: one line."""
    given = given or {}
    lines = [_line(err, given) for err in e.errors()]
    if len(lines) == 1:
        line = lines[0]
        if line.startswith("--"):
            return line
        if given and not any(err["loc"] for err in e.errors()):  # a whole-config check (sizes)
            return f"{source} with {', '.join(given.values())}: {line}"
        return f"{source}: {line}"
    return "\n".join([f"{source}: invalid configuration", *(f"  - {line}" for line in lines)])


def _line(err: Mapping[str, Any], given: Mapping[str, str]) -> str:
    """One error as 'key: what is wrong', led by the flag that gave the key, if one did."""
    where = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
    if err["type"] == "moved":  # the flat learner layout: the key the flag or the file gave
        moved = err["ctx"]["moved"]
        for key, to in moved.items():
            flag = given.get(f"learner.{key}")
            if flag:
                return f"{flag}: learner.{key}: moved to learner.{to}"
        return err["msg"]
    if err["type"] == "removed":
        flag = given.get(f"learner.{err['ctx']['key']}")
        return f"{flag}: {err['msg']}" if flag else err["msg"]
    if err["type"] == "extra_forbidden" and where.startswith("learner.") and \
            where.rpartition(".")[2] in REMOVED:
        msg = "removed, it measured no gain (docs/tried.md)"
    elif err["type"] == "extra_forbidden":
        msg = "no such key" + _did_you_mean(where)
    elif err["type"] == "value_error":  # a validator's own sentence, without pydantic's "Value error, "
        msg = str(err["ctx"]["error"])
    else:
        msg = err["msg"]
    line = f"{where}: {msg}" if where else msg
    for key, flag in given.items():
        if where and (where == key or where.startswith(key + ".") or key.startswith(where + ".")):
            return f"{flag}: {line}"
    return line


def _did_you_mean(where: str) -> str:
    """' (did you mean learner.replay.batch_size?)' for a misspelt key of a known section: among
    the section's keys, else among those of its subsections (a key put one level too high)."""
    *path, leaf = where.split(".")
    model: Any = JobConfig
    for part in path:
        model = _section(model, part)
        if model is None:
            return ""
    fields = getattr(model, "model_fields", {})
    close = difflib.get_close_matches(leaf, list(fields), n=1)
    if close:
        return f" (did you mean {'.'.join([*path, close[0]])}?)"
    deeper = {f"{name}.{key}": key for name in fields if (sub := _section(model, name))
              for key in sub.model_fields}
    close = difflib.get_close_matches(leaf, list(deeper.values()), n=1, cutoff=0.8)
    if close:
        full = next(k for k, v in deeper.items() if v == close[0])
        return f" (did you mean {'.'.join([*path, full])}?)"
    return ""


def _section(model: Any, name: str) -> Any:
    """The model of section `name` of `model` (None when it is a value, not a section)."""
    field = getattr(model, "model_fields", {}).get(name)
    ann = field.annotation if field else None
    return next((a for a in (ann, *getattr(ann, "__args__", ())) if hasattr(a, "model_fields")), None)


def parse_sets(items: Iterable[str]) -> dict[str, Any]:
    """`--set` items ('learner.replay.batch_size=64') -> {'learner.replay.batch_size': 64}; values read as
    YAML, so 64 is an int, [64, 64] a list, true a bool, null None. ConfigError names the item."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or "" in key.split("."):
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. learner.replay.batch_size=64")
        try:
            out[key] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key}: {text!r} is not a YAML value "
                              f"({str(e).splitlines()[0]})") from None
    return out


def with_overrides(data: dict, overrides: Mapping[str, Any]) -> dict:
    """A copy of a config mapping with dotted keys set ('run.name' -> data['run']['name']);
    sections the mapping lacks are made, a key through a non-section refused."""
    out = copy.deepcopy(data)
    for key, value in overrides.items():
        node = out
        *path, leaf = key.split(".")
        for i, part in enumerate(path):
            if node.get(part) is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise ConfigError(f"--set {key}: {'.'.join(path[:i + 1])} is a value, not a section")
            node = node[part]
        node[leaf] = value
    return out


def parse_config(data: dict, source: str = "config", given: Mapping[str, str] | None = None) -> JobConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return JobConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format(e, source, given)) from None


def load_config(path: str | Path, sets: Iterable[str] = (), seed: int | None = None,
                name: str | None = None) -> JobConfig:
    """Read and validate a YAML job config, with `herd submit`'s overrides applied first:
    `sets` ('learner.replay.batch_size=64', validated exactly like the YAML), `seed` (run.seed, which
    the learner's and the actors' seeds follow) and `name` (run.name). ConfigError says what is
    wrong and where: an override's mistake in one line that names it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        return parse_config(data, str(path))
    sets = list(sets)
    overrides = parse_sets(sets)
    given = {item.partition("=")[0].strip(): f"--set {item}" for item in sets}
    if seed is not None:
        overrides["run.seed"] = seed
        given["run.seed"] = f"--seed {seed}"
        for key in ("learner.algorithm.seed", "actors.seed"):  # --seed wins over the YAML's
            overrides[key] = seed
            given[key] = f"--seed {seed}"
    if name is not None:
        overrides["run.name"] = name
        given["run.name"] = f"--name {name}"
    return parse_config(with_overrides(data, overrides), str(path), given)


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
