"""The learner killed mid-run (SIGKILL) in a real job: Ray restarts it on the same port from the
job's last checkpoint (buffer included), actors back off and reconnect with a bounded window,
the job finishes, and summary.json says what the crash cost.

The job binds the learner beyond loopback (0.0.0.0) so the per-job token is exercised too:
it must be in force, and nowhere in runs/ or the job's log.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import grpc
import pytest
import yaml

from tests.jobs import SMALL, controller_up, herd, small_learner, status, submit, wait_for

pytestmark = pytest.mark.cluster

CFG = {
    **SMALL,
    "learner": small_learner(host="0.0.0.0", advertise_host="127.0.0.1"),
    "actors": {**SMALL["actors"], "window": 3, "reconnect_max_s": 1.0},
    "run": {**SMALL["run"], "name": "lfault", "checkpoint_every_s": 3, "save_replay": True,
            "eval_every_s": 60},
}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_learner_killed_restarts_from_checkpoint(ray_cluster, tmp_path):
    import ray

    job = submit(CFG, tmp_path)
    runs = tmp_path / "runs"
    run_dir = runs / job
    ck = run_dir / "checkpoint" / "model.pt"

    try:
        wait_for(lambda: controller_up(job), 120, "the job's controller")
    except AssertionError:
        raise AssertionError(herd("logs", job, check=False).stdout) from None

    def learning():
        s = status(job)
        return s if s["learner"].get("updates", 0) > 0 and ck.exists() else None

    wait_for(learning, 150, "updates and a first checkpoint", poll=1)
    time.sleep(4)  # a little past the checkpoint: something to lose
    before = status(job)
    learner_id, pid = before["learner"]["learner_id"], before["learner"]["pid"]
    actor = before["actors"][0]
    ray.init(address=ray_cluster["gcs"], namespace="herd", logging_level="ERROR")
    try:
        token = ray.get(ray.get_actor(f"{job}-learner").__ray_call__.remote(
            lambda self: self.cfg.server.token))
        port = ray.get(ray.get_actor(f"{job}-learner").__ray_call__.remote(lambda self: self.port))
    finally:
        ray.shutdown()
    assert token and len(token) >= 32
    address = f"127.0.0.1:{port}"
    rss0 = rss_mb(actor["pid"])

    os.kill(pid, signal.SIGKILL)
    # ---- the outage: actors stall on their window, memory does not pile up ----
    in_flight, rss = [], []
    t_end = time.monotonic() + 6
    while time.monotonic() < t_end:
        a = status(job)["actors"][0]
        if "in_flight" in a:
            in_flight.append(a["in_flight"])
            rss.append(rss_mb(a["pid"]))
        time.sleep(0.5)
    assert in_flight and max(in_flight) <= CFG["actors"]["window"]

    def retrained():
        s = status(job)
        ls = s["learner"]
        if ls.get("learner_id") in (None, learner_id) or not ls.get("restored"):
            return None
        return s if ls["updates"] > ls["restored"]["updates"] else None

    try:
        after = wait_for(retrained, 150, "the restarted learner training")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{herd('logs', job, check=False).stdout[-6000:]}") from None
    restored = after["learner"]["restored"]
    assert after["learner"]["restarted"] and after["learner"]["pid"] != pid
    assert restored["replay"] == "loaded" and restored["inserted"] > 0
    assert after["learner"]["replay_size"] >= restored["inserted"] > 0
    wait_for(lambda: status(job)["actors"][0].get("reconnects", 0) > actor.get("reconnects", 0),
             60, "the actor reconnecting")
    assert max(rss) - rss0 < 50, (rss0, rss)

    # the token is in force on the restarted learner
    with grpc.insecure_channel(address) as ch:
        from herd.proto import herd_pb2 as pb
        from herd.proto import herd_pb2_grpc as pb_grpc

        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.LearnerStub(ch).GetStatus(pb.StatusRequest(), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED

    herd("stop", job)
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())
    f = summary["faults"]
    assert f["learner_restarts"] == 1, f
    r = f["restarts"][0]
    assert r["replay"] == "loaded" and r["checkpoint_received"] == restored["received"]
    # the driver's last status poll may come before or after the checkpoint it restored from
    # (both run on their own clocks), so the driver's figure is a lower bound clipped at 0
    assert r["transitions_lost"] == max(0, r["last_seen_received"] - r["checkpoint_received"])
    # exact: actors acked it all; the learner kept all but what came after the checkpoint
    lost = summary["actor_acked"] - summary["learner"]["received"]
    assert f["transitions_lost"] == lost >= f["transitions_lost_at_least"] >= 0
    assert summary["actor_acked"] == summary["actor_steps"]  # nothing lost on the actor side
    assert f["updates_lost"] == max(0, r["last_seen_updates"] - r["checkpoint_updates"])
    print(f"\n[faults] learner kill: down {r['down_s']}s, lost {f['updates_lost']} updates "
          f"(lower bound), {f['transitions_lost']} transitions (exact); actor in_flight max "
          f"{max(in_flight)}, RSS {rss0:.0f}->{max(rss):.0f} MB")

    # no secret in runs/ or the job's log
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["learner"]["server"]["token"] == "<redacted>"
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert token.encode() not in p.read_bytes(), p
    assert token not in herd("logs", job).stdout
