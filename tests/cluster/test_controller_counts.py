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


GIB = 2**30


def node(cpus: float, mem_gib: float, alive: bool = True, **custom) -> dict:
    return {"Alive": alive, "Resources": {"CPU": cpus, "memory": mem_gib * GIB, **custom}}


def test_the_actor_ceiling_is_each_nodes_cpus_or_memory_whichever_binds():
    from herd.capacity import actor_capacity

    # 2 cores at 0.5 CPU: 4 by CPUs; 16 GiB at 0.5 GiB a process: 32 by memory
    cap = actor_capacity([node(2, 16)], 0.5)
    assert (cap.actors, cap.by_cpus, cap.by_memory) == (4, 4, 32)
    assert "4 by CPUs at actors.num_cpus=0.5" in cap.why(0.5) and "CPUs bind" in cap.why(0.5)
    # many small actors on a node of little memory: memory binds there, CPUs on the other;
    # a dead node and one without the actors' custom resource hold none
    nodes = [node(16, 2), node(4, 64), node(64, 64, alive=False)]
    cap = actor_capacity(nodes, 0.05)
    assert (cap.actors, cap.by_cpus, cap.by_memory) == (4 + 80, 320 + 80, 4 + 128)
    assert "memory bind" in cap.why(0.05)
    cap = actor_capacity([node(8, 64, herd_worker=1), node(8, 64)], 1, {"herd_worker": 0.1})
    assert cap.actors == 8 and cap.nodes == 1
    assert actor_capacity([], 1).actors == 0


def test_the_books_of_killed_processes_are_what_the_learner_accepted_from_them():
    from herd.books import settle

    st = {"retired": [{"actor_id": "actor-0", "steps": 100, "acked": 100},
                      {"actor_id": "actor-1", "steps": 50, "acked": 50}],
          # actor-0's first process, killed at 70 polled steps; Ray restarted it (actor-0 above)
          "dead_incarnations": [{"actor_id": "actor-0", "steps": 70, "acked": 48, "random_steps": 70}],
          "actors": []}
    books = settle(st, {"actor-0": 164, "actor-1": 50}, controller_lost=False)
    assert books["killed"] == 1 and books["lost_at_least"] == 70 - 64
    killed = [a for a in books["actors"] if a.get("killed_processes")]
    assert killed == [{"actor_id": "actor-0", "steps": 64, "sent": 64, "acked": 64, "killed_processes": 1,
                       "random_steps": 70, "env_errors": 0, "reconnects": 0}]
    assert sum(a["acked"] for a in books["actors"]) == 164 + 50
    # unknown per-actor counts (a learner that restarted): the polled figures, a lower bound
    assert settle(st, None, controller_lost=False)["actors"] == st["retired"] + st["dead_incarnations"]


def test_a_dead_controllers_actors_count_as_killed_even_unpolled():
    from herd.books import settle

    st = {"retired": [], "dead_incarnations": [],
          "actors": [{"actor_id": "actor-0", "steps": 300, "acked": 280},
                     {"actor_id": "actor-1", "waiting": True}]}
    books = settle(st, {"actor-0": 296, "actor-2": 16}, controller_lost=True)
    assert books["killed"] == 2 and books["lost_at_least"] == 4
    assert {a["actor_id"]: a["acked"] for a in books["actors"]} == {"actor-0": 296, "actor-2": 16}


def test_a_submitted_count_beyond_the_ceiling_is_capped_with_a_warning():
    from herd.config import parse_config
    from herd.job_setup import within_capacity

    cfg = parse_config({"env": {"id": "InvertedPendulum-v5"},
                        "actors": {"num_actors": 100_000, "num_cpus": 0.5}}, "test")
    capped, warning = within_capacity(cfg, [node(2, 16)])
    assert capped.actors.num_actors == 4 and cfg.actors.num_actors == 100_000
    assert warning.startswith("actors.num_actors=100000 capped at 4: this cluster holds at most 4 (")
    same, none = within_capacity(capped, [node(2, 16)])
    assert same is capped and none is None
