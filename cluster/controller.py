"""The per-job controller: a named Ray actor that owns the env actors and answers the CLI.

`herd scale / status / stop` reach it over the loopback HTTP endpoint it serves
(cluster/control.py), or else by name (`controller_name(job_id)`) in the "herd" namespace, so
the actor count changes live, without restarting the learner. It also exports
the job's figures as Ray metrics (cluster/prom.py): the driver's progress row each log tick,
and the learner's and every actor's stats each time it polls them.

Env actors go where $HERD_ACTOR_RESOURCES (JSON, e.g. {"herd_worker": 1}; set by
`herd submit --actor-resources`) says: Ray custom resources that only CPU worker nodes offer.

With actors.weights_relay the controller picks each env actor's node itself, so that the node's
weights relay (learner/rpc/relay.py; one Ray actor per job and node, 0 CPUs) is there before it:
the actor watches for weights on the relay's loopback port instead of at the learner.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from herd.actors.config import ActorConfig, EnvConfig
from herd.capacity import actor_capacity
from herd.control import NAMESPACE
from herd.learner.rpc.relay import WeightRelay
from herd.nodes import NodeWatch
from herd.progress import window_rates

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


def relay_name(job_id: str, node_id: str) -> str:
    return f"{job_id}-relay-{node_id}"


class Controller:
    def __init__(self, job_id: str, env_cfg: EnvConfig, actor_cfg: ActorConfig, learner,
                 learner_address: str, token: str | None = None):
        self.job_id, self.env_cfg, self.actor_cfg = job_id, env_cfg, actor_cfg
        self.learner, self.learner_address, self.token = learner, learner_address, token
        self.actors: dict[str, ray.actor.ActorHandle] = {}
        # the count asked for (the config's, then the latest scale call's): status shows it while
        # the actors are still being created
        self.target_actors = actor_cfg.num_actors
        self._scaled = False  # set by the first scale(): start() then leaves the count alone
        self.retired: dict[str, dict] = {}  # final stats of actors scaled away
        self.cancelled = 0  # actors scaled away before they ever started (never placed)
        # last stats seen of actor processes that died and were restarted by Ray (their
        # counters start again from 0 in the new process): kept so that totals stay whole
        self.dead_incarnations: list[dict] = []
        self._last_seen: dict[str, dict] = {}
        self.progress: dict = {}
        self._refilled = False  # herd/pool.py: the spares this job took, started again once
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_why: dict = {}  # request_stop's reason and grace, for the driver
        self.nodes = NodeWatch()  # nodes lost while the job runs (status, summary)
        # imported here, not at the top: the driver imports this module, and EnvActor's torch and
        # MuJoCo would cost its start-up a second (this process needs them in any case)
        from herd.actors.env_actor import EnvActor

        self._remote = ray.remote(EnvActor)
        # node id -> (relay handle, ref of its loopback address), with actors.weights_relay
        self.relays: dict[str, tuple[ray.actor.ActorHandle, ray.ObjectRef]] = {}
        self.resources = actor_resources()
        self.metrics = None
        try:
            from herd.prom import HerdMetrics

            self.metrics = HerdMetrics(job_id)
        except Exception:  # metrics are an aid; a job must not fail for want of them
            log.exception("Ray metrics unavailable; the job runs without them")
        self.endpoint = None  # herd status / scale / stop without a Ray driver (cluster/control.py)
        try:
            from herd.control import ControlServer

            self.endpoint = ControlServer(self, job_id)
        except Exception:  # the CLI falls back to Ray
            log.exception("the CLI's endpoint is unavailable; `herd status` goes through Ray")

    def _spawn(self, planned: Counter) -> tuple[str, ray.actor.ActorHandle]:
        """One env actor; `planned`: actors placed on each node in this scale call so far
        (Ray's free-resource view does not count them yet)."""
        i = self._next
        self._next += 1
        actor_id = f"actor-{i}"
        extra = {"resources": self.resources} if self.resources else {}
        relay = {}
        # in a placement group (a `herd tune` trial) the group places the actor: a node
        # affinity would take it out of the group, to wait for CPUs the group holds
        node = (self._pick_node(planned) if self.actor_cfg.weights_relay
                and ray.util.get_current_placement_group() is None else None)
        if node is not None:
            planned[node] += 1
            extra["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
            # a ref: Ray hands the actor the address once the relay answers, so the relay is
            # up before the node's actors, and this call does not wait for it
            relay["weights_address"] = self._relay(node)[1]
        handle = self._remote.options(
            name=f"{self.job_id}-{actor_id}",
            namespace=NAMESPACE,
            num_cpus=self.actor_cfg.num_cpus,
            max_restarts=self.actor_cfg.max_restarts,
            max_concurrency=4,
            **extra,
        ).remote(actor_id, self.env_cfg, self.actor_cfg, self.learner_address, self.token,
                 seed=self.actor_cfg.seed * 1_000 + i, **relay)
        return actor_id, handle

    def _pick_node(self, planned: Counter) -> str | None:
        """The node of the next env actor: the fullest alive node with its CPUs (and custom
        resources) free, else the roomiest that has them at all (it waits there for them).
        None when no node ever could: the actor goes without a relay and waits like any other."""
        from ray._private.state import available_resources_per_node

        need = {"CPU": self.actor_cfg.num_cpus, **self.resources}
        able = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n.get("Alive")
                and all(n["Resources"].get(r, 0) >= v for r, v in need.items())}
        if not able:
            return None
        free = available_resources_per_node()
        left = {node: {r: free.get(node, {}).get(r, 0) - planned[node] * v for r, v in need.items()}
                for node in able}
        fits = [node for node in able if all(left[node][r] >= v for r, v in need.items())]
        if fits:
            return min(fits, key=lambda node: left[node]["CPU"])
        return max(able, key=lambda node: able[node].get("CPU", 0) - planned[node] * need["CPU"])

    def _relay(self, node: str) -> tuple[ray.actor.ActorHandle, ray.ObjectRef]:
        """The job's relay on `node` (started on first use): its handle and address ref."""
        if node not in self.relays:
            handle = ray.remote(WeightRelay).options(
                name=relay_name(self.job_id, node), namespace=NAMESPACE, get_if_exists=True,
                num_cpus=0, max_concurrency=4,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.learner_address, token=self.token, tls_ca=self.actor_cfg.tls_ca,
                     name=f"relay-{node[:12]}")
            self.relays[node] = (handle, handle.address.remote())
        return self.relays[node]

    def relay_stats(self, timeout: float = 10.0) -> dict[str, dict]:
        """Each relay's stats by node id (an error entry for one that does not answer)."""
        items = list(self.relays.items())
        refs = [h.stats.remote() for _, (h, _) in items]
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=timeout)[0]) if refs else set()
        out = {}
        for (node, _), ref in zip(items, refs):
            try:
                if ref not in ready:
                    raise TimeoutError
                out[node] = ray.get(ref)
            except Exception as e:  # noqa: BLE001 -- booting or dead: report, do not fail the status
                out[node] = {"error": f"unavailable: {type(e).__name__}"}
        return out

    def stop_relays(self, timeout: float = 10.0) -> dict[str, dict]:
        """At wind-down, after scale(0): every relay's final stats; then they are gone."""
        final = self.relay_stats(timeout)
        relays, self.relays = self.relays, {}
        for handle, _ in relays.values():
            ray.kill(handle, no_restart=True)
        return final

    def scale(self, n: int, timeout: float = 60.0) -> dict:
        """Set the number of env actors; removed ones deliver what they stepped first.

        A count beyond what the cluster could ever hold (cluster/capacity.py) is refused before
        any actor is created: the result says why under "refused", the job goes on as it was.

        Whatever state a removed actor is in, it goes and the books stay whole: one still
        waiting for a CPU never stepped and is cancelled at once; a running one stops (delivering
        its batches) and hands in its final counts; one that does not answer within `timeout`
        (booting, restarting, hung) is killed and counts with its last polled figures."""
        if n < 0:
            raise ValueError("the actor count cannot be negative")
        if n > len(self.actors) and (refused := self._beyond_capacity(n)):
            return {"actors": len(self.actors), "removed": 0, "cancelled": 0, "refused": refused,
                    **self.resource_note()}
        self.target_actors = n
        self._scaled = True
        with self._lock:
            planned: Counter = Counter()
            while len(self.actors) < n:
                actor_id, handle = self._spawn(planned)
                self.actors[actor_id] = handle
            victims = list(self.actors.items())[n:]
            for actor_id, _ in victims:
                del self.actors[actor_id]
        waiting = self._waiting_for_resources(victims)
        stopping = [(a, h) for a, h in victims if a not in waiting]
        let_go = bool(stopping) and self._learner_lets_go(True)  # what they hold goes in
        try:
            refs = [h.stop.remote() for _, h in stopping]
            done = set(ray.wait(refs, num_returns=len(refs), timeout=timeout)[0]) if refs else set()
        finally:
            if let_go:
                self._learner_lets_go(False)
        for (actor_id, handle), ref in zip(stopping, refs):
            try:
                if ref not in done:
                    raise TimeoutError(f"no answer to stop() within {timeout:.0f}s")
                self.retired[actor_id] = ray.get(ref)
            except Exception as e:  # noqa: BLE001 -- died or hung: its last polled counts stand in
                log.warning("%s did not stop cleanly (%r); killed", actor_id, e)
                if actor_id in self._last_seen:
                    self.dead_incarnations.append(self._last_seen[actor_id])
            ray.kill(handle, no_restart=True)
            self._export("retire_actor", actor_id)
        for actor_id, handle in victims:
            if actor_id in waiting:  # never ran (or waits to run again after a crash)
                ray.kill(handle, no_restart=True)
                if actor_id in self._last_seen:
                    self.dead_incarnations.append(self._last_seen[actor_id])
                self.cancelled += 1
                self._export("retire_actor", actor_id)
        self._last_seen = {a: v for a, v in self._last_seen.items() if a in self.actors}
        return {"actors": len(self.actors), "removed": len(victims) - len(waiting),
                "cancelled": len(waiting), **self.resource_note()}

    def _learner_lets_go(self, leaving: bool) -> bool:
        """Learner.let_go: while actors stop, the replay ratio does not hold their last batches
        back. False where the learner did not answer (restarting: the actors' stop waits)."""
        try:
            ray.get(self.learner.let_go.remote(leaving), timeout=10)
            return True
        except Exception as e:  # noqa: BLE001 -- the scale goes on; the actors' flush may wait
            log.warning("the learner did not answer let_go(%s): %r", leaving, e)
            return False

    def _beyond_capacity(self, n: int) -> str | None:
        """Why `n` actors could never all be placed on this cluster (cluster/capacity.py's
        rule), or None when they could."""
        cap = actor_capacity(ray.nodes(), self.actor_cfg.num_cpus, self.resources)
        if n <= cap.actors:
            return None
        return (f"{n} actors could never be placed: this cluster holds at most {cap.actors} "
                f"({cap.why(self.actor_cfg.num_cpus)}); the job goes on with its "
                f"{len(self.actors)}")

    def start(self) -> dict:
        """The config's actors, unless a `herd scale` got here first (it runs on another of
        this actor's threads, and the user's count wins)."""
        if self._scaled:
            return {"actors": len(self.actors), "removed": 0, "cancelled": 0, **self.resource_note()}
        return self.scale(self.actor_cfg.num_actors)

    @staticmethod
    def _waiting_for_resources(items: list[tuple[str, ray.actor.ActorHandle]]) -> set[str]:
        """The ids of these actors that Ray has not placed yet: no node has the CPUs (or the
        custom resources) they ask for free. One call to the GCS."""
        if not items:
            return set()
        try:
            # the GCS actor table (a DeveloperAPI): ray.util.state would go through the
            # dashboard, one more process to depend on
            from ray._private.state import actors

            table = actors(actor_state_name="PENDING_CREATION")
        except Exception:  # unknown: every actor is treated as running (logged)
            log.exception("actor states unavailable")
            return set()
        # PENDING_CREATION also covers an actor whose process runs its __init__ (booting): that
        # one has a worker process already
        unplaced = {hex_id for hex_id, a in table.items() if not a.get("Pid")}
        return {actor_id for actor_id, h in items if h._actor_id.hex() in unplaced}

    def resource_note(self) -> dict:
        """How many of the job's actors wait for resources, and the CPUs free for them."""
        with self._lock:
            items = list(self.actors.items())
        waiting = self._waiting_for_resources(items)
        free = ray.available_resources().get("CPU", 0.0)
        return {"waiting": sorted(waiting), "cpus_free": free, "cpus_per_actor": self.actor_cfg.num_cpus}

    def num_actors(self) -> int:
        return len(self.actors)

    def actor_stats(self, timeout: float = 10.0) -> list[dict]:
        """Every actor's stats, asked all at once: one slow or booting actor costs at most
        `timeout` in all, not per actor."""
        with self._lock:
            items = list(self.actors.items())
        # not asked: an actor without a process would make every status wait the full timeout
        waiting = self._waiting_for_resources(items)
        refs = [None if actor_id in waiting else handle.stats.remote() for actor_id, handle in items]
        asked = [r for r in refs if r is not None]
        ready = set(ray.wait(asked, num_returns=len(asked), timeout=timeout)[0]) if asked else set()
        out = []
        for (actor_id, _), ref in zip(items, refs):
            try:
                if ref is None:
                    out.append({"actor_id": actor_id, "waiting": True,
                                "error": f"waiting for CPUs (needs {self.actor_cfg.num_cpus:g})"})
                    continue
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
        actors = self.actor_stats()
        try:
            nodes_lost = self.nodes.observe(ray.nodes())
        except Exception:  # noqa: BLE001 -- the GCS did not answer: the last known losses
            nodes_lost = list(self.nodes.lost)
        return {
            "job_id": self.job_id,
            "time": time.time(),
            "learner": window_rates(learner, self.progress),
            "actors": actors,
            "target_actors": self.target_actors,
            "waiting_actors": sum(1 for a in actors if a.get("waiting")),
            "cpus_free": ray.available_resources().get("CPU", 0.0),
            "retired": list(self.retired.values()),
            "cancelled": self.cancelled,
            "dead_incarnations": list(self.dead_incarnations),
            "progress": dict(self.progress),
            "relays": self.relay_stats(),
            "stop_requested": self._stop.is_set(),
            "stop_why": dict(self._stop_why),
            "nodes_lost": nodes_lost,
        }

    def set_progress(self, progress: dict) -> None:
        """The driver's metric row of this log tick: kept for `herd status`, exported to Ray.
        The first row that says the job's start is over (its first update, and on the GPU its
        compiled graph: cluster/startup.py Startup.over) starts the spare workers this job took
        again, for the next job (herd/pool.py): their boot would take the start's cores."""
        self.progress = progress
        self._export("record_progress", progress)
        if progress.get("start_over"):
            self.refill_pool()

    def refill_pool(self) -> None:
        """Start the spare workers this job took again (once): when its start is over, or at
        its wind-down, its actors gone, for a job that ended before its start was over."""
        if not self._refilled:
            self._refilled = True
            threading.Thread(target=self._refill, name="herd-pool", daemon=True).start()

    @staticmethod
    def _refill() -> None:
        try:
            from herd.pool import refill

            if n := refill():
                log.info("%d spare workers started for the next job", n)
        except Exception:  # a later job only starts colder
            log.exception("starting spare workers failed")

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

    def request_stop(self, why: str | None = None, grace_s: float | None = None) -> bool:
        """Ask the driver to wind the job down. `why`: the stop reason its summary gives
        (default "stopped by user"); `grace_s`: the seconds the wind-down may take from now
        (`herd down`: the cluster goes after them), so a replay that cannot be saved in time is
        left out and the summary says so."""
        if why is not None or grace_s is not None:
            self._stop_why = {"why": why, "grace_s": grace_s, "asked_at": time.time()}
        self._stop.set()
        return True

    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def close_endpoint(self) -> None:
        """At wind-down: the CLI's endpoint stops and its record goes."""
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
