"""How many env actors a Ray cluster could ever hold: the ceiling a scale or a config is held to
before anything is created.

The rule, per alive node that offers the actors' custom resources: as many actors as its CPUs
hold at actors.num_cpus each, and no more than its memory holds at one env actor's worker
process each (ACTOR_WORKER_BYTES); summed over the nodes. It counts the nodes as if this job's
actors had them to themselves (its learner and other jobs included), so an actor beyond it could
only ever run on a node that has not joined yet; below it, actors whose CPUs are taken wait for
them (Ray's pending actors), as RLlib's env runners and Sample Factory's workers do. Asking Ray
for far more (100,000 actors on a 2-core machine) fills the GCS, the raylet's queue and the
controller with actors that never run, until the raylet kills workers for memory.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTOR_WORKER_BYTES = 512 * 2**20
"""Resident memory counted per env actor process: Python, Ray's core worker, torch and MuJoCo
come to ~0.4 GiB for a state env (VmRSS of one on the 2-core CPU machine), rounded up."""


@dataclass(frozen=True)
class Capacity:
    actors: int  # the most actors the cluster's nodes could hold
    by_cpus: int  # of them, the CPUs' bound alone
    by_memory: int  # and the memory's
    cpus: float  # the CPUs of the nodes counted
    memory: float  # their memory (Ray's `memory` resource), bytes
    nodes: int

    def why(self, cpus_per_actor: float) -> str:
        """The rule applied to this cluster, in a few words."""
        gib = ACTOR_WORKER_BYTES / 2**30
        bound = "memory" if self.by_memory < self.by_cpus else "CPUs"
        return (f"{self.nodes} node{'s' * (self.nodes != 1)} with {self.cpus:g} CPUs and "
                f"{self.memory / 2**30:.1f} GiB: {self.by_cpus} by CPUs at actors.num_cpus="
                f"{cpus_per_actor:g}, {self.by_memory} by memory at {gib:g} GiB per actor "
                f"process; {bound} bind")


def actor_capacity(nodes: list[dict], cpus_per_actor: float,
                   resources: dict[str, float] | None = None) -> Capacity:
    """The ceiling for actors of `cpus_per_actor` CPUs (and these custom `resources` each) on
    `nodes` (ray.nodes()' entries)."""
    need = {"CPU": cpus_per_actor, **(resources or {})}
    actors = by_cpus = by_memory = n = 0
    cpus = memory = 0.0
    for node in nodes:
        have = node.get("Resources", {})
        if not node.get("Alive") or not all(have.get(r, 0) >= v for r, v in need.items()):
            continue
        # a small epsilon: Ray keeps fractional CPUs in 1/10000 units
        fit = min(int(have.get(r, 0) / v + 1e-9) for r, v in need.items())
        held = int(have.get("memory", 0) // ACTOR_WORKER_BYTES)
        actors, by_cpus, by_memory = actors + min(fit, held), by_cpus + fit, by_memory + held
        cpus, memory, n = cpus + have.get("CPU", 0), memory + have.get("memory", 0), n + 1
    return Capacity(actors, by_cpus, by_memory, cpus, memory, n)
