"""The cluster's nodes as a job sees them: a node that was alive and is gone (a worker machine
or container lost, its raylet killed) is recorded once, with when, so that `herd status` and
summary.json name it. What its actors stepped and never delivered is counted by the books
(cluster/books.py): they are actor processes that died."""

from __future__ import annotations

import time


class NodeWatch:
    """observe(ray.nodes()) on every status: nodes seen alive, and those since lost."""

    def __init__(self):
        self.alive: dict[str, str] = {}  # node id -> its address, while alive
        self.lost: list[dict] = []

    def observe(self, nodes: list[dict]) -> list[dict]:
        """The nodes lost so far, after this look at the cluster's node table."""
        known = {n["node_id"] for n in self.lost}
        for node in nodes:
            node_id, address = node.get("NodeID"), node.get("NodeManagerAddress", "?")
            if not node_id:
                continue
            if node.get("Alive"):
                self.alive[node_id] = address
            elif node_id in self.alive and node_id not in known:
                del self.alive[node_id]
                self.lost.append({"node_id": node_id, "address": address, "unix_time": time.time(),
                                  "cpus": (node.get("Resources") or {}).get("CPU")})
        return list(self.lost)


def lost_line(lost: list[dict]) -> str:
    """The status box's line for lost nodes ("" for none)."""
    if not lost:
        return ""
    where = ", ".join(f"{n['address']} ({n['node_id'][:8]})" for n in lost)
    return (f"{len(lost)} node{'s' if len(lost) > 1 else ''} lost: {where}; the job goes on "
            "with the rest, its actors' undelivered steps counted in the books")
