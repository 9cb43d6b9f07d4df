"""actors.weights_relay on a real job: the env actors of a node watch for weights at that node's
relay (learner/rpc/relay.py), so the learner sends each policy version once, to the relay's one
stream, however many actors step; the books stay exact.
"""

from __future__ import annotations

import json

import pytest

from tests.jobs import SMALL, get_json, herd, status_when, submit, wait_for

pytestmark = pytest.mark.cluster


def test_job_with_a_weights_relay(ray_cluster, tmp_path):
    cfg = {**SMALL, "actors": {**SMALL["actors"], "num_actors": 2, "weights_relay": True},
           "run": {**SMALL["run"], "name": "relay"}}
    job = submit(cfg, tmp_path)
    run_dir = tmp_path / "runs" / job
    try:
        st = wait_for(lambda: status_when(job, lambda s: len(s["actors"]) == 2 and all(
            a.get("policy_version", 0) > 1 for a in s["actors"])), 120,
            "two actors on policy versions > 1")
        ls = st["learner"]
        assert ls["actors_streaming"] == 2  # two push streams ...
        assert ls["weight_streams"] == 1  # ... and one weights stream: the relay's
        (relay,) = st["relays"].values()  # one node, one relay
        assert relay["weight_streams"] == 2 and relay["policy_version"] > 1
        assert all(a["refused"] == 0 for a in st["actors"])

        # one version's size comes from best_policy.pb below: let an evaluation keep one first
        # (the evaluator starts at the first update, so it can come after the checks above)
        wait_for(lambda: (run_dir / "best_policy.pb").exists(), 120, "a periodic evaluation")
        herd("stop", job)
        wait_for(lambda: (run_dir / "summary.json").exists(), 120, "summary.json")
    finally:  # a failed check must not leave the job running beside the next tests
        if not (run_dir / "summary.json").exists():
            herd("stop", job, check=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    lr = summary["learner"]
    assert int(lr["received"]) == summary["actor_acked"] == summary["actor_steps"] > 0
    assert int(lr["inserted"]) == int(lr["received"])
    # each version left the learner at most once: its bytes are those of one stream. One
    # version's size from best_policy.pb (a PolicyWeights message; the version's varint may
    # take a byte or two more later on)
    one = len((run_dir / "best_policy.pb").read_bytes())
    versions = int(lr["policy_version"])
    assert one <= int(lr["weight_bytes_sent"]) <= versions * (one + 3)
    (relay,) = summary["relays"].values()
    assert "error" not in relay, relay
    # ... and the relay handed them on to both actors
    assert relay["weight_bytes_sent"] > int(lr["weight_bytes_sent"]) + one
    # the relays go with the job
    name = next(iter(summary["relays"]))

    def relay_gone():
        actors = get_json(f"{ray_cluster['dashboard']}/api/v0/actors?limit=1000")
        return not any(a["state"] == "ALIVE" and a.get("class_name") == "WeightRelay"
                       and a.get("name", "").endswith(name)
                       for a in actors["data"]["result"]["result"])

    wait_for(relay_gone, 30, "the relay to go")
