"""A running Herd job, reached from this machine: the cluster's job client, the job's controller
(over its loopback endpoint, else as a Ray actor), and what `herd status / scale / stop / logs /
list` and the Python API ask of it. Plain keyword arguments in, values out; a state the user
must know is a UserError (a job without a controller: NotRunning). `address` is the Ray
dashboard's URL, None for $HERD_DASHBOARD_URL or the cluster `herd up` started."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from herd import local
from herd.ray_errors import failure_line
from herd.runs import run_dir_of

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


class UserError(Exception):
    """A mistake, or a state of the cluster or job the user must know (one line)."""


class NotRunning(Exception):
    """The job exists but has no controller (starting, or ended); the message says which."""


def dashboard_url(address: str | None = None) -> str:
    """`address`, else $HERD_DASHBOARD_URL, else the dashboard `herd up` started (on its own
    --dashboard-port too), else the default."""
    from herd.dashboard import url_of

    return url_of(address)


def no_cluster(url: str) -> UserError:
    """What every command that needs a cluster says when there is none."""
    return UserError(f"no Herd cluster running (no Ray dashboard answers at {url}): start one with "
                     "`herd up`, or point --address / HERD_DASHBOARD_URL at yours")


def no_such_job(job_id: str, url: str) -> UserError:
    return UserError(f"no job {job_id} on the cluster at {url} (`herd list` names its jobs)")


def job_client(address: str | None = None, rest: bool = False):
    """Ray's JobSubmissionClient for the cluster; with `rest`, herd.jobs_rest's stand-in for the
    calls a submit and a followed job make, without importing Ray."""
    url = dashboard_url(address)
    if not local.dashboard_up(url):
        raise no_cluster(url)
    if rest:
        from herd.jobs_rest import RestJobClient

        return RestJobClient(url)
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(url)


def job_info(job_id: str, address: str | None = None):
    """(client, Ray's record of the job); UserError when the cluster has no such job."""
    client = job_client(address)
    try:
        return client, client.get_job_info(job_id)
    except RuntimeError as e:
        if "does not exist" in str(e) or "404" in str(e):
            raise no_such_job(job_id, dashboard_url(address)) from None
        raise


def job_rest(job_id: str, address: str | None = None) -> dict | None:
    """Ray's record of the job from the dashboard's REST API (no Ray driver: fast); None when
    the dashboard does not answer. UserError when the cluster has no such job."""
    from herd.jobs_rest import JobNotFound, RestJobClient

    url = dashboard_url(address)
    if not local.dashboard_up(url):
        return None
    try:
        return RestJobClient(url, timeout=10.0).get_job_info(job_id)
    except JobNotFound:
        raise no_such_job(job_id, url) from None


def job_logs(job_id: str, address: str | None = None) -> str:
    """The job's driver log, over the dashboard's REST API."""
    from herd.jobs_rest import RestJobClient

    return RestJobClient(dashboard_url(address), timeout=10.0).get_job_logs(job_id)


def list_jobs(address: str | None = None) -> list[dict]:
    """The cluster's Herd jobs, as Ray's REST API lists them (submission_id, status, ...)."""
    url = dashboard_url(address)  # the REST API JobSubmissionClient.list_jobs reads, without Ray's import
    if not local.dashboard_up(url):
        raise no_cluster(url)
    return [j for j in json.loads(local.get(f"{url}/api/jobs/"))
            if (j.get("submission_id") or "").startswith("herd-")]


def not_running(job_id: str, info: dict, address: str | None = None) -> NotRunning:
    """Why a job has no controller, from its REST record (starting, failed, ended)."""
    state = info["status"]
    if state == "PENDING":
        return NotRunning(f"{job_id} is starting: Ray is setting up its driver (runtime env)")
    if state == "RUNNING":
        herd_lines = [ln for ln in job_logs(job_id, address).splitlines() if ln.startswith("[herd]")]
        phase = herd_lines[-1][7:] if herd_lines else "the driver is starting the learner and actors"
        return NotRunning(f"{job_id} is starting ({phase}); its controller answers once the "
                          "learner is up")
    if state == "FAILED":
        return NotRunning(f"{job_id} failed: "
                          f"{failure_line(job_logs(job_id, address)) or info.get('message')}")
    return NotRunning(f"{job_id} has ended ({state}); its results are in the runs directory "
                      f"(runs/{job_id}/summary.json)")


def endpoint(job_id: str):
    """The job's controller over its loopback endpoint (cluster/control.py) when this machine
    holds its record; None otherwise (a remote cluster, another HERD_HOME, the job not up)."""
    from herd.control import find

    return find(job_id)


def controller(job_id: str, address: str | None = None):
    """The job's controller as a Ray actor (the slow path: a Ray driver per call; endpoint()
    comes first); NotRunning says why there is none (starting, failed, ended)."""
    # a job that is not running (or does not exist) is told apart without a Ray driver
    info = job_rest(job_id, address)
    if info is not None and info["status"] != "RUNNING":
        raise not_running(job_id, info, address)
    if info is None and not os.environ.get("RAY_ADDRESS"):
        # no dashboard and no address: Ray's "auto" would find no cluster (or another user's)
        raise no_cluster(dashboard_url(address))
    import ray

    from herd.control import NAMESPACE, controller_name

    local.join()
    try:
        return ray.get_actor(controller_name(job_id), namespace=NAMESPACE)
    except ValueError:
        pass
    info = job_rest(job_id, address)
    if info is None:
        job_client(address)  # the dashboard went away: says so in one line
    raise not_running(job_id, info or {"status": "RUNNING"}, address)


def on_endpoint(job_id: str, call: Callable):
    """`call(endpoint)`'s result, or None when there is no endpoint for the job or it does not
    answer (the caller goes through Ray); a failure in the controller is a UserError."""
    from herd.control import Unreachable

    ep = endpoint(job_id)
    if ep is None:
        return None
    try:
        return call(ep)
    except Unreachable:
        return None
    except RuntimeError as e:
        raise UserError(f"{job_id}: the controller failed: {e}") from None


def status_fetch(job_id: str, address: str | None = None) -> Callable[[], dict | None]:
    """A call returning the job's status, or None once its controller is gone: over the
    controller's endpoint when this machine has its record and it answers, else through Ray.
    NotRunning when the job has no controller."""
    from herd.control import Unreachable

    ep = endpoint(job_id)
    if ep is not None:
        try:
            first = [ep.status()]
        except Unreachable:  # a record the ended job left, or a controller that moved: ask Ray
            first = None
        if first is not None:
            def fetch():
                if first:
                    return first.pop()
                try:
                    return ep.status()
                except (Unreachable, RuntimeError):  # the job ended and took its controller along
                    return None
            return fetch
    import ray

    ctl = controller(job_id, address)

    def fetch():
        try:
            return ray.get(ctl.status.remote(), timeout=30)
        except Exception:  # noqa: BLE001 -- the job ended and took its controller with it
            return None

    return fetch


def ended_status(job_id: str, address: str | None = None) -> dict | None:
    """An ended job's final status: Ray's state, a failed job's reason, and its summary.json where
    this machine can read it (None while the job has not ended)."""
    info = job_rest(job_id, address)
    if info is None or info["status"] not in TERMINAL:
        return None
    run_dir = run_dir_of(info)
    try:
        summary = json.loads((run_dir / "summary.json").read_text()) if run_dir else None
    except (OSError, ValueError):
        summary = None
    out = {"job_id": job_id, "state": info["status"], "ended": True,
           "run_dir": str(run_dir) if run_dir else None, "summary": summary}
    if info["status"] == "FAILED":
        out["error"] = failure_line(job_logs(job_id, address)) or info.get("message")
    return out


def status(job_id: str, address: str | None = None) -> dict:
    """The job's live status (`herd status --json`'s object); of an ended job its final one
    ("ended": True). NotRunning while the job starts."""
    try:
        return call_controller(job_id, lambda ep: ep.status(), lambda ctl: ctl.status.remote(),
                               address, timeout=30)
    except NotRunning:
        final = ended_status(job_id, address)
        if final is None:
            raise
        return final


def call_controller(job_id: str, on_endpoint_call: Callable, on_ray: Callable,
                    address: str | None = None, timeout: float | None = None):
    """A controller call: `on_endpoint_call(endpoint)`, else (no endpoint on record, or it did
    not answer) `ray.get(on_ray(actor))`."""
    out = on_endpoint(job_id, on_endpoint_call)
    if out is not None:
        return out
    import ray

    return ray.get(on_ray(controller(job_id, address)), timeout=timeout)


def scale(job_id: str, actors: int, address: str | None = None) -> dict:
    """Ask the job for `actors` env actors; the controller's answer (actors, removed, cancelled,
    waiting, cpus_per_actor, cpus_free). UserError when refused."""
    if actors < 0:
        raise UserError(f"--actors must be 1 or more, got {actors} (0 only for a job whose "
                        "config sets run.start_without_actors: true)")
    if actors == 0 and not zero_actors_allowed(job_rest(job_id, address)):
        raise UserError(f"--actors 0 would leave {job_id} idle (nothing steps, nothing trains): use 1 "
                        f"or more, or `herd stop {job_id}` (a job whose config sets "
                        "run.start_without_actors: true may scale to 0)")
    from ray.exceptions import RayActorError

    try:
        out = call_controller(job_id, lambda ep: ep.scale(actors),
                              lambda ctl: ctl.scale.remote(actors), address)
    except RayActorError:
        raise UserError(f"{job_id}: its controller died during the scale; the job winds "
                        "down and writes its summary and final checkpoint") from None
    if out.get("refused"):
        raise UserError(f"{job_id}: {out['refused']}")
    return out


def zero_actors_allowed(info: dict | None) -> bool:
    """Whether the job's config (runs/<job>/config.yaml, found through its driver's --runs-dir)
    sets run.start_without_actors; False where that cannot be read."""
    import yaml

    run_dir = run_dir_of(info)
    if run_dir is None:
        return False
    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
    return bool((cfg.get("run") or {}).get("start_without_actors"))


def stop(job_id: str, address: str | None = None) -> str | None:
    """Ask the job to stop (its driver saves a final checkpoint and the summary). None when its
    controller took the request; a job whose controller is not up yet is stopped through Ray
    (nothing has trained: no checkpoint to write), and why it was is returned."""
    if on_endpoint(job_id, lambda ep: ep.stop()):
        return None
    import ray

    try:
        ray.get(controller(job_id, address).request_stop.remote())
        return None
    except NotRunning as e:
        client, info = job_info(job_id, address)
        if str(info.status).split(".")[-1] not in ("PENDING", "RUNNING"):
            raise
        client.stop_job(job_id)
        return str(e)
