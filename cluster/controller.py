"""The per-job controller: a named Ray actor that owns the env actors and answers the CLI.

`herd scale / status / stop` find it by name (`controller_name(job_id)`) in the "herd"
namespace, so the actor count changes live, without restarting the learner.
"""

from __future__ import annotations

import threading
import time

import ray

from actors.config import ActorConfig, EnvConfig
from actors.env_actor import EnvActor

NAMESPACE = "herd"


def controller_name(job_id: str) -> str:
    return f"herd-controller-{job_id}"


class Controller:
    def __init__(self, job_id: str, env_cfg: EnvConfig, actor_cfg: ActorConfig, learner,
                 learner_address: str, token: str | None = None):
        self.job_id, self.env_cfg, self.actor_cfg = job_id, env_cfg, actor_cfg
        self.learner, self.learner_address, self.token = learner, learner_address, token
        self.actors: dict[str, ray.actor.ActorHandle] = {}
        self.retired: dict[str, dict] = {}  # final stats of actors scaled away
        self.progress: dict = {}
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._remote = ray.remote(EnvActor)

    def _spawn(self) -> tuple[str, ray.actor.ActorHandle]:
        i = self._next
        self._next += 1
        actor_id = f"actor-{i}"
        handle = self._remote.options(
            name=f"{self.job_id}-{actor_id}",
            namespace=NAMESPACE,
            num_cpus=self.actor_cfg.num_cpus,
            max_restarts=self.actor_cfg.max_restarts,
            max_concurrency=4,
        ).remote(actor_id, self.env_cfg, self.actor_cfg, self.learner_address, self.token,
                 seed=self.actor_cfg.seed * 1_000 + i)
        return actor_id, handle

    def scale(self, n: int, timeout: float = 60.0) -> dict:
        """Set the number of env actors; removed ones deliver what they stepped first."""
        if n < 0:
            raise ValueError("the actor count cannot be negative")
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
        return {"actors": len(self.actors), "removed": [a for a, _ in victims]}

    def num_actors(self) -> int:
        return len(self.actors)

    def actor_stats(self, timeout: float = 10.0) -> list[dict]:
        with self._lock:
            items = list(self.actors.items())
        out = []
        for actor_id, handle in items:
            try:
                out.append(ray.get(handle.stats.remote(), timeout=timeout))
            except Exception as e:  # restarting or dead: report, do not fail the status
                out.append({"actor_id": actor_id, "error": f"unavailable: {type(e).__name__}"})
        return out

    def status(self) -> dict:
        try:
            learner = ray.get(self.learner.status_dict.remote(), timeout=10)
        except Exception as e:
            learner = {"error": f"learner unavailable: {type(e).__name__}: {e}"}
        return {
            "job_id": self.job_id,
            "time": time.time(),
            "learner": learner,
            "actors": self.actor_stats(),
            "retired": list(self.retired.values()),
            "progress": dict(self.progress),
            "stop_requested": self._stop.is_set(),
        }

    def set_progress(self, progress: dict) -> None:
        self.progress = progress

    def request_stop(self) -> bool:
        self._stop.set()
        return True

    def stop_requested(self) -> bool:
        return self._stop.is_set()
