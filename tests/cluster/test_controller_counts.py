"""The controller keeps the counts of env-actor processes that died and were restarted."""

from herd.controller import Controller


def test_a_restarted_actor_process_keeps_its_last_counts():
    c = Controller.__new__(Controller)  # only the bookkeeping, no Ray
    c._last_seen, c.dead_incarnations = {}, []
    c._note_incarnation("actor-0", {"pid": 10, "acked": 100, "steps": 120})
    c._note_incarnation("actor-0", {"pid": 10, "acked": 300, "steps": 320})
    assert c.dead_incarnations == []
    c._note_incarnation("actor-0", {"pid": 11, "acked": 16, "steps": 40})  # Ray restarted it
    c._note_incarnation("actor-1", {"pid": 12, "acked": 5, "steps": 5})
    assert c.dead_incarnations == [{"pid": 10, "acked": 300, "steps": 320}]
    c._note_incarnation("actor-0", {"pid": 13, "acked": 8, "steps": 9})
    assert [d["pid"] for d in c.dead_incarnations] == [10, 11]
