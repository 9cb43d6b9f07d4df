"""The spare Ray workers of a `herd up` cluster: started before a job needs them, and started
again for the next job once one has taken them.

Ray binds a worker to the job whose work it first takes and ends it with that job. A worker
started for no job (RAY_JOB_ID nil) is a spare any job may take. `herd up` asks the raylet for
POOL_ENV of them (its PrestartWorkers call: no driver connects, so no job is listed in the
dashboard, as the throwaway driver that prestarted them once was). On a `--preload` cluster
the spares import torch & co. as they start (herd/preload.py), so a job's learner starts in a
process whose torch is in. Ray's own prestart, which came with every driver's connect
(RAY_prestart_worker_first_driver), is off on such a cluster: it started bare workers at the
moment a job began, and they took that job's CPUs and the next job's learner.

Each job's controller calls `refill` once the job's start is over (its first update done and,
on the GPU, its compiled graph in place: the spares' boot would otherwise take the cores of a
fully booked node from the compile and the actors), and what it took from the pool is known:
the spares taken are started again on its node, so the next job finds as many warm ones as the
first did.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

CLUSTER_MARKER_ENV = "HERD_RAY_CLUSTER"
"""Set in every process of a `herd up` cluster (its value names the cluster): herd.local finds
the cluster's processes by it, and the spares' top-up its own."""
POOL_ENV = "HERD_POOL_SIZE"
"""Spares a `herd up` cluster keeps on its head node: set in every process Ray starts there."""
FIRST_DRIVER_ENV = "RAY_prestart_worker_first_driver"
KEEP_ALIVE_S = 7 * 24 * 3600
"""How long Ray keeps a spare that no job took: past the idle-worker reaper, which ends idle
workers beyond the node's CPUs one second after they idle (a running job's workers count)."""
NIL_JOB = "ffffffff"
log = logging.getLogger("herd.pool")


def pool_env(size: int) -> dict:
    """The environment of a `herd up` cluster that keeps `size` spares: Ray's own prestart off."""
    return {POOL_ENV: str(size), FIRST_DRIVER_ENV: "0"}


def prestart(raylet: str, n: int, timeout: float = 30.0) -> None:
    """Ask the raylet at host:port for `n` spare Python workers (no job, no runtime env)."""
    if n <= 0:
        return
    from ray._private.grpc_utils import init_grpc_channel  # adds Ray's token where auth is on
    from ray.core.generated import common_pb2, node_manager_pb2, node_manager_pb2_grpc

    channel = init_grpc_channel(raylet)
    try:
        node_manager_pb2_grpc.NodeManagerServiceStub(channel).PrestartWorkers(
            node_manager_pb2.PrestartWorkersRequest(language=common_pb2.PYTHON, num_workers=n,
                                                    keep_alive_duration_secs=KEEP_ALIVE_S),
            timeout=timeout)
    finally:
        channel.close()


def head_raylet(gcs: str) -> str:
    """host:port of the raylet of the cluster at `gcs` (one node: `herd up`'s), asked of the
    GCS directly: a driver's connect would register a job."""
    from ray._raylet import GcsClient

    nodes = [n for n in GcsClient(address=gcs).get_all_node_info().values() if n.state == 0]
    if not nodes:
        raise RuntimeError(f"no node of the Ray cluster at {gcs} is alive")
    return f"{nodes[0].node_manager_address}:{nodes[0].node_manager_port}"


def top_up(raylet: str, marker: str, size: int, timeout: float = 60.0) -> int:
    """Ask the raylet at host:port for the spares missing on this node until `size` are there
    or starting: it starts no more at once than its startup concurrency (the machine's cores,
    at most its CPUs) and drops the rest of a request. How many it was asked for."""
    asked, deadline = 0, time.monotonic() + timeout
    while (missing := size - len(spares(marker, starting=True))) > 0:
        if time.monotonic() > deadline:
            log.warning("%d spare workers did not start", missing)
            break
        prestart(raylet, missing)
        asked += missing
        while time.monotonic() < deadline and len(spares(marker, starting=True)) < size:
            if len(spares(marker)) == len(spares(marker, starting=True)):  # none starting
                break
            time.sleep(0.2)
        time.sleep(0.5)  # the raylet forks what it accepted
    return asked


def start_spares(gcs: str, n: int, env: dict, timeout: float = 60.0) -> bool:
    """`herd up`'s spares, asked for by a process of the cluster's environment (its token); a
    failure costs only the gain (the first job's workers then start when it needs them)."""
    code = ("import os, sys; from herd.pool import head_raylet, top_up; "
            "top_up(head_raylet(sys.argv[1]), os.environ['HERD_RAY_CLUSTER'], int(sys.argv[2]))")
    try:
        r = subprocess.run([sys.executable, "-c", code, gcs, str(n)], env=env, timeout=timeout,
                           check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        return False
    if r.returncode:
        log.warning("spare workers not started: %s", (r.stderr.strip().splitlines() or ["?"])[-1])
    return r.returncode == 0


def spares(marker: str, starting: bool = False, proc: Path = Path("/proc")) -> list[int]:
    """Pids of this node's spares of the cluster marked `marker`: Ray workers of no job, idle
    (`starting`: and those still starting, before their first line of Ray)."""
    needle = f"{CLUSTER_MARKER_ENV}={marker}".encode()
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            if not (cmd.startswith(b"ray::IDLE") or starting and b"default_worker.py" in cmd):
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or another user's
            continue
        if needle in env and f"RAY_JOB_ID={NIL_JOB}".encode() in env:
            out.append(int(entry.name))
    return out


def refill() -> int:
    """From a job's process on a `herd up` cluster's node: start as many spares as are
    missing there. How many were asked for (0 off such a cluster)."""
    size, marker = os.environ.get(POOL_ENV), os.environ.get(CLUSTER_MARKER_ENV)
    if not size or not marker:
        return 0
    import ray

    if len(spares(marker, starting=True)) >= int(size):
        return 0
    here = ray.get_runtime_context().get_node_id()
    node = next(n for n in ray.nodes() if n["NodeID"] == here)
    return top_up(f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}", marker, int(size))
