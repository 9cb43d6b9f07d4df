"""NodeWatch over Ray's node table (stood in for here; tests/faults/test_node_loss.py loses a
real node): a node seen alive and then dead is recorded once; one dead before the job saw it,
never."""

from __future__ import annotations

from herd.nodes import NodeWatch, lost_line


def node(node_id: str, alive: bool) -> dict:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": f"10.0.0.{node_id[-1]}",
            "Resources": {"CPU": 4.0}}


def test_a_node_seen_alive_then_dead_is_lost_once():
    watch = NodeWatch()
    assert watch.observe([node("n1", True), node("n2", True), node("n0", False)]) == []
    lost = watch.observe([node("n1", True), node("n2", False), node("n0", False)])
    assert [(n["node_id"], n["address"], n["cpus"]) for n in lost] == [("n2", "10.0.0.2", 4.0)]
    assert watch.observe([node("n1", True), node("n2", False)]) == lost  # once
    assert lost_line(lost).startswith("1 node lost: 10.0.0.2 (n2); the job goes on with the rest")
    assert lost_line([]) == ""
