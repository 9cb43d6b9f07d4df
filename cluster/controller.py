"""The per-job controller: a named Ray actor that owns the env actors and answers the CLI.

`herd scale / status / stop` find it by name (`controller_name(job_id)`) in the "herd"
namespace, so the actor count changes live, without restarting the learner. It also exports
the job's figures as Ray metrics (cluster/prom.py): the driver's progress row each log tick,
and the learner's and every actor's stats each time it polls them.

Env actors go where $HERD_ACTOR_RESOURCES (JSON, e.g. {"herd_worker": 1}; set by
`herd submit --actor-resources`) says: Ray custom resources that only CPU worker nodes offer.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import ray

from actors.config import ActorConfig, EnvConfig
from actors.env_actor import EnvActor

NAMESPACE = "herd"
ACTOR_RESOURCES_ENV = "HERD_ACTOR_RESOURCES"
log = logging.getLogger("herd.controller")


def actor_resources() -> dict[str, float]:
    """Custom Ray resources each env actor asks for (empty: anywhere with free CPUs)."""
    raw = os.environ.get(ACTOR_RESOURCES_ENV, "").strip()
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict) or not all(isinstance(v, (int, float)) for v in value.values()):
        raise ValueError(f"${ACTOR_RESOURCES_ENV} must be a JSON object of numbers, got {raw!r}")
    return {str(k): float(v) for k, v in value.items()}


def controller_name(job_id: str) -> str:
    return f"herd-controller-{job_id}"


class Controller:
    def __init__(self, job_id: str, env_cfg: EnvConfig, actor_cfg: ActorConfig, learner,
                 learner_address: str, token: str | None = None):
        self.job_id, self.env_cfg, self.actor_cfg = job_id, env_cfg, actor_cfg
        self.learner, self.learner_address, self.token = learner, learner_address, token
        self.actors: dict[str, ray.actor.ActorHandle] = {}
        # the count asked for (the config's, then the latest scale call's): status shows it while
        # the actors are still being created
        self.target_actors = actor_cfg.num_actors
        self.retired: dict[str, dict] = {}  # final stats of actors scaled away
        # last stats seen of actor processes that died and were restarted by Ray (their
        # counters start again from 0 in the new process): kept so that totals stay whole
        self.dead_incarnations: list[dict] = []
        self._last_seen: dict[str, dict] = {}
        self.progress: dict = {}
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._remote = ray.remote(EnvActor)
        self.resources = actor_resources()
        self.metrics = None
        try:
            from cluster.prom import HerdMetrics

            self.metrics = HerdMetrics(job_id)
        except Exception:  # metrics are an aid; a job must not fail for want of them
            log.exception("Ray metrics unavailable; the job runs without them")

    def _spawn(self) -> tuple[str, ray.actor.ActorHandle]:
        i = self._next
        self._next += 1
        actor_id = f"actor-{i}"
        extra = {"resources": self.resources} if self.resources else {}
        handle = self._remote.options(
            name=f"{self.job_id}-{actor_id}",
            namespace=NAMESPACE,
            num_cpus=self.actor_cfg.num_cpus,
            max_restarts=self.actor_cfg.max_restarts,
            max_concurrency=4,
            **extra,
        ).remote(actor_id, self.env_cfg, self.actor_cfg, self.learner_address, self.token,
                 seed=self.actor_cfg.seed * 1_000 + i)
        return actor_id, handle

    def scale(self, n: int, timeout: float = 60.0) -> dict:
        """Set the number of env actors; removed ones deliver what they stepped first."""
        if n < 0:
            raise ValueError("the actor count cannot be negative")
        self.target_actors = n
        with self._lock:
            while len(self.actors) < n:
                actor_id, handle = self._spawn()
                self.actors[actor_id] = handle
            victims = list(self.actors.items())[n:]
            for actor_id, _ in victims:
                del self.actors[actor_id]
        finals = ray.get([h.stop.remote() for _, h in victims], timeout=timeout) if victims else []
        for (actor_id, handle), stats in zip(victims, finals):
            self.retired[actor_id] = stats
            ray.kill(handle, no_restart=True)
            self._export("retire_actor", actor_id)
        return {"actors": len(self.actors), "removed": [a for a, _ in victims]}

    def num_actors(self) -> int:
        return len(self.actors)

    def actor_stats(self, timeout: float = 10.0) -> list[dict]:
        """Every actor's stats, asked all at once: one slow or booting actor costs at most
        `timeout` in all, not per actor."""
        with self._lock:
            items = list(self.actors.items())
        refs = [handle.stats.remote() for _, handle in items]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout) if refs else ([], [])
        ready = set(ready)
        out = []
        for (actor_id, _), ref in zip(items, refs):
            try:
                if ref not in ready:
                    raise TimeoutError
                out.append(ray.get(ref))
            except Exception as e:  # noqa: BLE001 -- booting, restarting or dead: report, do not fail the status
                out.append({"actor_id": actor_id, "error": f"unavailable: {type(e).__name__}"})
                continue
            self._note_incarnation(actor_id, out[-1])
            self._export("record_actor", out[-1])
        return out

    def _note_incarnation(self, actor_id: str, stats: dict) -> None:
        before = self._last_seen.get(actor_id)
        if before is not None and before.get("pid") != stats.get("pid"):
            self.dead_incarnations.append(before)
        self._last_seen[actor_id] = stats

    def _export(self, method: str, arg) -> None:
        if self.metrics is not None:
            try:
                getattr(self.metrics, method)(arg)
            except Exception:
                log.exception("exporting metrics failed (%s)", method)

    def status(self) -> dict:
        try:
            learner = ray.get(self.learner.status_dict.remote(), timeout=10)
            self._export("record_learner", learner)
        except Exception as e:  # noqa: BLE001 -- reported in the status, which must not fail
            learner = {"error": f"learner unavailable: {type(e).__name__}: {e}"}
        return {
            "job_id": self.job_id,
            "time": time.time(),
            "learner": learner,
            "actors": self.actor_stats(),
            "target_actors": self.target_actors,
            "retired": list(self.retired.values()),
            "dead_incarnations": list(self.dead_incarnations),
            "progress": dict(self.progress),
            "stop_requested": self._stop.is_set(),
        }

    def set_progress(self, progress: dict) -> None:
        """The driver's metric row of this log tick: kept for `herd status`, exported to Ray."""
        self.progress = progress
        self._export("record_progress", progress)

    def latest_progress(self) -> dict:
        """The driver's last row alone: cheap, unlike status(), which asks every actor."""
        return dict(self.progress)

    def placement(self) -> dict:
        """Where the env actors run: the custom resources they ask for and their nodes."""
        with self._lock:
            ids = {a: h._actor_id.hex() for a, h in self.actors.items()}
        nodes = {}
        try:
            from ray.util.state import get_actor

            for actor_id, ray_id in ids.items():
                info = get_actor(ray_id)
                nodes[actor_id] = info.node_id if info else None
        except Exception as e:  # noqa: BLE001 -- placement is informational
            log.warning("actor placement unavailable: %r", e)
        return {"resources": self.resources, "nodes": nodes}

    def request_stop(self) -> bool:
        self._stop.set()
        return True

    def stop_requested(self) -> bool:
        return self._stop.is_set()
