"""What the job driver makes of a job's config and the cluster before it starts the learner and
the actors: the checks that refuse what this cluster can never run, the learner's GPUs, the
actor count capped at the cluster's capacity, the learner token (made per job, or handed over
by `herd submit` through a file or Ray's key-value store), a fixed learner port and the dial
address it gives, the environment file of `herd submit`, and the config as written to runs/
with its secrets redacted.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from pathlib import Path

import numpy as np
import ray

from herd.capacity import actor_capacity
from herd.config import ConfigError, JobConfig, dump_config
from herd.learner.rpc.server import is_loopback

REDACTED = "<redacted>"


def learner_gpus(cfg: JobConfig) -> float:
    """GPUs to ask Ray for; a 'cuda' learner on a cluster without GPUs is refused up front."""
    have = ray.cluster_resources().get("GPU", 0)
    if cfg.learner.compute.device == "cuda" and have < 1:
        raise SystemExit("learner.compute.device is 'cuda' but this Ray cluster has no GPU; "
                         "use device: auto (falls back to the CPU) or add a GPU node")
    if cfg.learner.compute.device == "cpu" or have < 1:
        return 0
    gpus = cfg.learner.placement.num_gpus
    return 1 if gpus is None else gpus


def check_cluster(cfg: JobConfig, env: dict) -> list[str]:
    """Refuse, before any process starts, what this cluster can never run; warnings otherwise."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    most_cpus = max((r.get("CPU", 0) for r in nodes), default=0)
    for what, need in (("learner.placement.num_cpus", cfg.learner.placement.num_cpus),
                       ("actors.num_cpus", cfg.actors.num_cpus)):
        if need > most_cpus:
            raise ConfigError(f"{what}={need:g} but the largest node of this Ray cluster has "
                              f"{most_cpus:g} CPUs: it could never be scheduled")
    obs_dim = int(np.prod(env["obs_shape"]))
    act_dim = int(np.prod(env["action_shape"]))
    rows = cfg.actors.num_envs * cfg.actors.steps_per_push
    pixels = bool(env.get("frame_stack"))
    # a pixel batch carries each uint8 frame once (at most two a row); a state batch two fp32 obs
    batch_bytes = rows * ((2 * obs_dim if pixels else (2 * obs_dim + act_dim + 1) * 4) + 1)
    if batch_bytes + 4096 > cfg.learner.server.max_message_mb * 2**20:
        raise ConfigError(f"one batch of {rows} rows is {batch_bytes / 2**20:.1f} MiB, above "
                          f"learner.server.max_message_mb={cfg.learner.server.max_message_mb}")
    obs_bytes = 2 if cfg.learner.replay.dtype in ("bfloat16", "float16") else 4
    ring = cfg.learner.replay.capacity * (2 * obs_dim * obs_bytes + (act_dim + 2) * 4)
    node_mem = max((r.get("memory", 0) for r in nodes), default=0)
    # a pixel replay is capped by the learner to what its device holds (learner/replay/fit.py)
    if not pixels and learner_gpus(cfg) == 0 and node_mem and ring > node_mem:
        raise ConfigError(f"the replay ring needs {ring / 2**30:.1f} GiB (learner.replay.capacity="
                          f"{cfg.learner.replay.capacity}) but the largest node offers Ray "
                          f"{node_mem / 2**30:.1f} GiB")
    for name in ("tls_cert", "tls_key"):
        path = getattr(cfg.learner.server, name)
        if path and not Path(path).is_file():
            raise ConfigError(f"learner.server.{name}: no such file {path}")
    warnings = []
    total = sum(r.get("CPU", 0) for r in nodes)
    need = cfg.learner.placement.num_cpus + cfg.actors.num_actors * cfg.actors.num_cpus
    if need > total:
        warnings.append(f"the job asks for {need:g} CPUs and the cluster has {total:g}: "
                        "some env actors will wait for a free CPU")
    return warnings


def within_capacity(cfg: JobConfig, nodes: list[dict]) -> tuple[JobConfig, str | None]:
    """The config with actors.num_actors capped at what the cluster of these nodes
    (ray.nodes()) could ever hold (cluster/capacity.py), and the warning that says so (None
    when it fits)."""
    from herd.controller import actor_resources

    cap = actor_capacity(nodes, cfg.actors.num_cpus, actor_resources())
    if cfg.actors.num_actors <= cap.actors:
        return cfg, None
    capped = cfg.model_copy(update={"actors": cfg.actors.model_copy(update={"num_actors": cap.actors})})
    return capped, (f"actors.num_actors={cfg.actors.num_actors} capped at {cap.actors}: this cluster "
                    f"holds at most {cap.actors} ({cap.why(cfg.actors.num_cpus)})")


def secure(cfg: JobConfig) -> JobConfig:
    """Beyond loopback the learner needs a token: make a per-job one unless the config has one.
    It goes to the learner and the actors through Ray, never to runs/ or the log."""
    srv = cfg.learner.server
    if is_loopback(srv.host) or srv.token:
        return cfg
    return with_server(cfg, token=secrets.token_urlsafe(32))


def with_server(cfg: JobConfig, **fields) -> JobConfig:
    """`cfg` with these learner.server fields replaced (token, port)."""
    server = cfg.learner.server.model_copy(update=fields)
    return cfg.model_copy(update={"learner": cfg.learner.model_copy(update={"server": server})})


def token_from_file(cfg: JobConfig, path: str | None) -> JobConfig:
    """The config's token, handed over by `herd submit` in a private file (read once, deleted)
    rather than in the job's env vars, which the dashboard shows."""
    if not path:
        return cfg
    token = Path(path).read_text().strip()
    Path(path).unlink(missing_ok=True)
    return with_server(cfg, token=token)


class DriverEnvError(Exception):
    """herd submit's environment file is missing or unreadable."""


def env_from_file(path: str | None) -> None:
    """herd submit's variables for this driver (cli.write_driver_env) into os.environ; the
    file is read once and deleted."""
    if not path:
        return
    try:
        env = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise DriverEnvError(f"the job's environment file {path} cannot be read "
                             f"({getattr(e, 'strerror', None) or e})") from None
    Path(path).unlink(missing_ok=True)
    os.environ.update({str(k): str(v) for k, v in env.items()})


def token_from_kv(cfg: JobConfig, key: str | None) -> JobConfig:
    """The config's token, handed over by `herd submit` from another machine through Ray's
    internal key-value store (read once, deleted); needs ray.init first."""
    if not key:
        return cfg
    from ray.experimental import internal_kv

    token = internal_kv._internal_kv_get(key)
    if token is None:
        raise ConfigError(f"the learner token `herd submit` left for this job ({key}) is gone")
    internal_kv._internal_kv_del(key)
    return with_server(cfg, token=token.decode())


def redacted(cfg: JobConfig) -> str:
    """The resolved config as written to runs/<job>/config.yaml: secrets replaced."""
    if cfg.learner.server.token:
        cfg = with_server(cfg, token=REDACTED)
    return dump_config(cfg)


def fixed_port(cfg: JobConfig) -> JobConfig:
    """A restarted learner must come back where the actors dial: pin port 0 to a free port."""
    if cfg.learner.server.port:
        return cfg
    family = socket.AF_INET6 if ":" in cfg.learner.server.host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((cfg.learner.server.host, 0))
        port = s.getsockname()[1]
    return with_server(cfg, port=port)


def known_address(cfg: JobConfig) -> str | None:
    """The learner's dial address when it follows from the config alone (after fixed_port)."""
    srv = cfg.learner.server
    host = srv.advertise_host or srv.host
    return None if host in ("0.0.0.0", "::") else f"{host}:{srv.port}"
