"""Submitting a Herd job: the config found and checked (env, resume, target, cluster), the
token and the driver's variables handed over privately, the job given to Ray. `herd submit`
and herd.submit both call `submit` with keyword arguments."""

from __future__ import annotations

import json
import secrets
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from herd import local
from herd.jobs import UserError, dashboard_url, job_client

TOKEN_FILE_ENV = "HERD_TOKEN_FILE"
TOKEN_KV_ENV = "HERD_TOKEN_KV"


class Submitted(NamedTuple):
    """A job Ray took: its client, id, run directory, the resolved config, and the checkpoint
    it resumes with why that one (None for a fresh job)."""

    client: object
    job_id: str
    run_dir: Path
    cfg: object
    resume: str | None


def submit(config: str | Path, *, sets: Iterable[str] = (), seed: int | None = None,
           name: str | None = None, address: str | None = None, runs_dir: str | Path = "runs",
           working_dir: str | Path | None = None, py_modules: Iterable[str | Path] = (),
           resume: str | Path | None = None, actor_resources: dict | None = None,
           warn: Callable[[str], None] | None = None) -> Submitted:
    """Validate, then hand the job to Ray. Raises ConfigError / EnvError / UserError /
    CheckpointRefused. `warn(line)` is told what the user should read before the job runs."""
    submitted = time.time()  # the job's start-up timeline counts from here (summary.json)
    from herd import usercode
    from herd.config import ConfigError, check_env, load_config
    from herd.tracking import submit_info

    sets = [str(s) for s in sets]
    warn = warn or (lambda line: None)
    runtime_env = user_code(working_dir, py_modules)
    config = str(find_config(config))
    cfg = load_config(config, sets, seed=seed, name=name)
    if cfg.env.pixels is not None:  # a key the pixel update would ignore: refused before Ray
        from herd.learner.update.pixel_sac import refuse_ignored

        try:
            refuse_ignored(cfg.learner)
        except ValueError as e:
            raise ConfigError(f"{config}: {e}") from None
    with importable(runtime_env):  # the user's env module, as the cluster will import it
        spec = check_env(cfg)
    warning = target_from_elsewhere(cfg, config, sets)
    if warning:  # of an env that exists
        warn(warning)
    from herd.startup import GCS_ENV, SENT_ENV, SPEC_ENV, spec_to_env

    env_vars = {"HERD_CONFIG_JSON": json.dumps(cfg.model_dump(mode="json")), "PYTHONUNBUFFERED": "1",
                "HERD_SUBMIT_UNIX": repr(submitted),
                SPEC_ENV: spec_to_env(cfg.env.id, spec),  # the driver makes no env of its own
                "HERD_SUBMIT_INFO": json.dumps(submit_info(config, runtime_env))}
    job_vars = {}  # every process of the job's: the controller reads these
    if actor_resources is not None:
        from herd.controller import ACTOR_RESOURCES_ENV

        if not (isinstance(actor_resources, dict)
                and all(isinstance(v, (int, float)) for v in actor_resources.values())):
            raise UserError("actor resources must be an object of numbers, e.g. "
                            f"{{\"herd_worker\": 1}}, got {actor_resources!r}")
        job_vars[ACTOR_RESOURCES_ENV] = json.dumps(actor_resources)
    resumed, resume_why = check_resume(str(resume), cfg, warn) if resume else (None, None)
    # code to upload (a local --working-dir / --py-modules) needs Ray's own client
    client = job_client(address, rest=not any(runtime_env.get(k) for k in ("working_dir", "py_modules")))
    if cfg.learner.compute.device == "cuda" and not cluster_has_gpu():
        raise ConfigError("learner.compute.device is 'cuda' but the cluster has no GPU; use device: auto "
                          "(falls back to the CPU) or add a GPU node")
    # the suffix keeps two jobs of one name submitted in the same second apart
    job_id = f"herd-{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    runs = Path(runs_dir).resolve()
    # The driver runs on the cluster's head. On this machine it can read a private file we
    # write and use this venv's python; elsewhere, neither.
    here = local.is_this_machine(urllib.parse.urlsplit(dashboard_url(address)).hostname or "")
    token = cfg.learner.server.token
    if token:
        # the dashboard shows a job's env vars: hand the token over privately instead
        dumped = cfg.model_dump(mode="json")
        dumped["learner"]["server"]["token"] = None
        env_vars["HERD_CONFIG_JSON"] = json.dumps(dumped)
        if here:
            env_vars[TOKEN_FILE_ENV] = write_token_file(job_id, token)
        else:
            env_vars[TOKEN_KV_ENV] = put_token_in_cluster(job_id, token)
    gcs = local.recorded_gcs(dashboard_url(address)) if here else None
    if gcs:
        # the driver joins this cluster by name: Ray's "auto" reads /tmp/ray's newest cluster,
        # which another cluster started later on this machine takes over
        env_vars[GCS_ENV] = gcs
    python = sys.executable if here else "python"
    entry = f"{python} -m herd.driver --job-id {job_id} --runs-dir {runs}"
    if resumed:
        entry += f" --resume {resumed}"
    env_vars[SENT_ENV] = repr(time.time())
    if here:
        # in a private file the driver reads once: env_vars in the job's runtime_env would make
        # Ray set up a runtime env for every worker it starts (the job's supervisor, the
        # learner, the controller, each actor), ~0.5 s more each (bench/startup.py)
        entry += f" --env-file {write_driver_env(job_id, env_vars)}"
    else:
        job_vars = {**env_vars, **job_vars}
    # Herd itself is installed on every node (the same version: `pip install herd`, the
    # compose image); only the user's own code travels, by --working-dir / --py-modules
    job_env = {**runtime_env, **({"env_vars": job_vars} if job_vars else {})}
    quiet_uploads()
    submit_with_retry(client, entrypoint=entry, submission_id=job_id, runtime_env=job_env or None)
    usercode.record(runs / job_id, runtime_env)  # herd evaluate / export import it from there
    return Submitted(client, job_id, runs / job_id, cfg, resumed and (
        f"{resumed}" + ("" if resume_why == "named" else f": {resume_why}")))


def find_config(path: str | Path) -> Path:
    """A config path as given, else (relative, and not found from here) the same path in
    Herd's source tree (a clone's configs/ and examples/); ConfigError names both places."""
    from herd.config import ConfigError

    given = Path(path).expanduser()
    if given.is_file() or given.is_absolute():
        return given
    import herd

    source = Path(herd.__file__).resolve().parent.parent  # cluster/.. in a clone
    if (source / "pyproject.toml").is_file() and (source / given).is_file():
        return source / given
    tried = [str(Path.cwd() / given)] + ([str(source / given)] if (source / "pyproject.toml").is_file() else [])
    raise ConfigError(f"{path}: no such config file (looked for {' and '.join(tried)})")


def stop_rule(cfg) -> str:
    """What ends the job, in one line: the target (when it stops there) and the budgets."""
    run = cfg.run
    budgets = f"run.max_seconds {run.max_seconds:g} s or run.max_env_steps {run.max_env_steps:,}"
    if run.target_return is None:
        return f"at {budgets} (no run.target_return)"
    if run.stop_at_target:
        return f"at eval return ≥ {run.target_return:g} (run.target_return), else at {budgets}"
    return (f"at {budgets}; eval returns are reported against {run.target_return:g} "
            "(run.target_return; run.stop_at_target is off)")


def target_from_elsewhere(cfg, config: str, sets) -> str | None:
    """A warning when run.target_return comes from a config file written for another env
    than the job's (`--set env.id=...`): a target is a fact of one env."""
    import yaml

    if cfg.run.target_return is None or any(s.partition("=")[0].strip() == "run.target_return" for s in sets):
        return None
    try:
        file_env = ((yaml.safe_load(Path(config).read_text()) or {}).get("env") or {}).get("id")
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    if file_env is None or file_env == cfg.env.id:
        return None
    verb = "stops" if cfg.run.stop_at_target else "reports"
    return (f"warning: run.target_return {cfg.run.target_return:g} comes from {config}, written for "
            f"{file_env}; this job trains {cfg.env.id} and {verb} at that return: set "
            "--set run.target_return=R for it (or =null for none)")


def quiet_uploads() -> None:
    """Ray's client logs each package it uploads (--working-dir) at INFO on stdout."""
    import logging

    for name in ("ray.dashboard.modules.dashboard_sdk", "ray._private.runtime_env.packaging"):
        logging.getLogger(name).setLevel(logging.WARNING)


def user_code(working_dir: str | Path | None = None, py_modules: Iterable[str | Path] = ()) -> dict:
    """Ray's runtime_env for the user's own code (--working-dir, --py-modules): local paths are
    checked here and sent absolute; URIs (s3://, gs://, https://...) go to Ray as they are."""
    out: dict = {}

    def local_path(flag: str, value: str, want_dir: bool) -> str:
        if "://" in value:
            return value
        path = Path(value).expanduser()
        if not path.exists() or (want_dir and not path.is_dir()):
            raise UserError(f"{flag} {value}: no such {'directory' if want_dir else 'file or directory'}")
        return str(path.resolve())

    if working_dir:
        out["working_dir"] = local_path("--working-dir", str(working_dir), True)
    if py_modules:
        out["py_modules"] = [local_path("--py-modules", str(m), False) for m in py_modules]
    return out


class importable:
    """sys.path as Ray lays it out for the job's processes (working_dir, each py_module's
    parent), for the duration of the local env check."""

    def __init__(self, runtime_env: dict):
        from herd.usercode import search_paths

        self.paths = search_paths(runtime_env)

    def __enter__(self):
        sys.path[:0] = self.paths

    def __exit__(self, *exc):
        for p in self.paths:
            sys.path.remove(p)


def check_resume(path: str, cfg, warn: Callable[[str], None] = print) -> tuple[Path, str]:
    """The checkpoint directory `--resume PATH` continues from (the newest of runs/<job>'s
    checkpoint/ and checkpoint-best/, or the one named) and why that one, checked against the
    new config: the networks and the env must match what was saved."""
    from herd.checkpoint import newest_checkpoint
    from herd.config import ConfigError
    from herd.evaluation import load_checkpoint

    ckpt, why = newest_checkpoint(path)
    ckpt = ckpt.resolve()
    load_checkpoint(ckpt)  # refused here, in one line, rather than in the learner's start-up
    old_file = ckpt.parent / "config.yaml"
    if old_file.is_file():
        import yaml

        from herd.learner.config import LearnerConfig

        old = yaml.safe_load(old_file.read_text()) or {}  # either learner layout
        old_learner = LearnerConfig.from_saved(old.get("learner") or {},
                                               pixels=(old.get("env") or {}).get("pixels") is not None)
        for what, a, b in (("env.id", (old.get("env") or {}).get("id"), cfg.env.id),
                           ("learner.algorithm.hidden_sizes", old_learner.algorithm.hidden_sizes,
                            cfg.learner.algorithm.hidden_sizes)):
            if a != b:
                raise ConfigError(f"--resume {path}: the checkpoint was trained with {what}={a!r}, "
                                  f"this config has {b!r}")
    if cfg.run.save_replay and not (ckpt / "replay.pt").exists():
        warn(f"note: {ckpt} holds no replay.pt (checkpoint-best/ never does; save_replay: false); "
             "the buffer starts empty")
    return ckpt, why


def put_token_in_cluster(job_id: str, token: str) -> str:
    """The token in Ray's internal key-value store (behind the cluster's own auth, not shown by
    the dashboard), under a key the job's driver reads once and deletes (remote clusters)."""
    from ray.experimental import internal_kv

    local.join()
    key = f"herd/token/{job_id}"
    internal_kv._internal_kv_put(key, token.encode(), overwrite=True)
    return key


def write_token_file(job_id: str, token: str) -> str:
    """A 0600 file the job's driver reads once and deletes (a cluster on this machine)."""
    return str(local.write_private(local.herd_home() / "secrets" / job_id, token))


def write_driver_env(job_id: str, env: dict) -> str:
    """The driver's environment variables in a 0600 file it reads once and deletes (a cluster
    on this machine): herd.driver --env-file."""
    return str(local.write_private(local.herd_home() / "secrets" / f"{job_id}.env.json", json.dumps(env)))


def cluster_has_gpu() -> bool:
    import ray

    local.join()
    return ray.cluster_resources().get("GPU", 0) >= 1


def submit_with_retry(client, wait_s: float = 90.0, **kwargs) -> None:
    """A fresh head's job agent registers a few seconds after the dashboard answers: wait."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client.submit_job(**kwargs)
            return
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(2)
