"""The driver's line to the job's controller, and the job's final books, whatever failed.

The controller owns the env actors (Ray ends an actor with the process that created it): if it
dies, they die with it, and the driver winds the job down from the counts it last saw
(ControllerLink.last). An actor process that was killed (for memory, by a dead controller, by
hand) could not hand in its final counts: what it delivered is what the learner accepted from
its actor id beyond what that id's cleanly stopped processes acked (Learner.received_by_actor);
what it stepped and never delivered died with it, and its last polled steps bound that from
below.
"""

from __future__ import annotations

from collections import defaultdict

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

from herd.ray_errors import one_line


class ControllerLost(Exception):
    """The job's controller died: nothing more can be asked of it."""


class ControllerLink:
    """Calls to the controller that tell a dead one (ControllerLost, for good) from a busy or
    restarting one (None from status(), asked again next tick)."""

    def __init__(self, handle):
        self.handle = handle
        self.last: dict | None = None  # the newest status it answered
        self.lost: str | None = None  # why it is gone

    def call(self, method: str, *args, timeout: float | None = None):
        if self.lost:
            raise ControllerLost(self.lost)
        try:
            return ray.get(getattr(self.handle, method).remote(*args), timeout=timeout)
        except (ActorUnavailableError, GetTimeoutError):
            raise
        except RayActorError as e:
            self.lost = f"the job's controller died ({one_line(e)})"
            raise ControllerLost(self.lost) from None

    def status(self) -> dict | None:
        try:
            self.last = self.call("status", timeout=120)
        except (ActorUnavailableError, GetTimeoutError):
            return None
        return self.last

    def tell(self, method: str, *args) -> None:
        """A call whose answer the driver does not need (nor its failure, but a death)."""
        try:
            self.call(method, *args, timeout=30)
        except (ActorUnavailableError, GetTimeoutError):
            pass


def final_books(link: ControllerLink, learner, restarted: bool) -> dict:
    """{"actors": one entry of final counts per actor process (or per actor id, for the killed
    ones), "killed": processes that could not report, "lost_at_least": steps they took and
    never delivered, "nodes_lost": nodes the job saw die (cluster/nodes.py)}. With a learner that restarted, its per-actor counts begin again at the
    restore: the killed processes then count with their last polled figures, a lower bound."""
    try:
        st = link.call("status", timeout=120)
    except Exception:  # noqa: BLE001 -- dead or hung: the last status it gave stands in
        st = link.last or {"retired": [], "dead_incarnations": [], "actors": []}
    per_actor = None
    if not restarted:
        try:
            per_actor = ray.get(learner.received_by_actor.remote(), timeout=30)
        except Exception:  # noqa: BLE001 -- unknown: the lower bound stands
            per_actor = None
    return {**settle(st, per_actor, controller_lost=bool(link.lost)),
            "nodes_lost": list(st.get("nodes_lost") or [])}


def settle(st: dict, per_actor: dict[str, int] | None, controller_lost: bool) -> dict:
    """final_books from the controller's last status `st` and the learner's accepted
    transitions per actor id (None: unknown)."""
    clean = list(st.get("retired", []))
    killed = list(st.get("dead_incarnations", []))
    n_killed = len(killed)
    if controller_lost:  # its actors died with it: their last polled counts (none for a booting one)
        n_killed += len(st.get("actors", []))
        killed += [a for a in st.get("actors", []) if "steps" in a]
    if per_actor is None:
        return {"actors": clean + killed, "killed": n_killed, "lost_at_least": None}
    acked_clean: dict[str, int] = defaultdict(int)
    for a in clean:
        acked_clean[a["actor_id"]] += int(a.get("acked", 0))
    polled: dict[str, list[dict]] = defaultdict(list)
    for a in killed:
        polled[a["actor_id"]].append(a)
    entries, lost = [], 0
    for actor_id in sorted(set(per_actor) | set(polled)):
        delivered = int(per_actor.get(actor_id, 0)) - acked_clean[actor_id]
        if delivered <= 0 and actor_id not in polled:
            continue
        stepped = sum(int(a.get("steps", 0)) for a in polled[actor_id])
        lost += max(0, stepped - delivered)
        entries.append({"actor_id": actor_id, "steps": delivered, "sent": delivered,
                        "acked": delivered, "killed_processes": len(polled[actor_id]),
                        "random_steps": sum(int(a.get("random_steps", 0)) for a in polled[actor_id]),
                        "env_errors": sum(int(a.get("env_errors", 0)) for a in polled[actor_id]),
                        "reconnects": sum(int(a.get("reconnects", 0)) for a in polled[actor_id])})
    return {"actors": clean + entries, "killed": n_killed, "lost_at_least": lost}
