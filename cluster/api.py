"""Herd from Python: submit a job, follow or wait for it, load what it trained.

    import herd

    job = herd.submit("configs/demo.yaml", sets=["learner.replay.batch_size=64"], seed=3)
    summary = job.wait()                      # or job.follow(): the live view `--follow` shows
    policy = herd.load_policy(job.run_dir)    # .act(obs, deterministic=True)

`submit` is `herd submit` (both call herd.submission.submit: the same checks, the same job);
errors are herd.ConfigError (a config or an override to fix) and herd.HerdError (the cluster, a
path, an argument).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from herd import jobs, local
from herd.jobs import TERMINAL, NotRunning, UserError


class HerdError(RuntimeError):
    """A Herd job or cluster that cannot do what was asked (the message says why)."""


class Job:
    """A submitted Herd job: its id, where its results go, and ways to watch it."""

    def __init__(self, job_id: str, run_dir: Path, client, address: str | None = None):
        self.id, self.run_dir, self._client, self._address = job_id, Path(run_dir), client, address

    def __repr__(self) -> str:
        return f"Job({self.id!r}, run_dir={str(self.run_dir)!r})"

    def state(self) -> str:
        """Ray's job state: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED."""
        return str(self._client.get_job_status(self.id)).split(".")[-1]

    def status(self) -> dict:
        """The live status `herd status --json` prints (rates, returns, buffer, lag); of an ended
        job, its final one (state, summary: "ended" is True); HerdError while the job starts.
        Over the controller's endpoint when this machine holds its record (no Ray driver:
        cluster/control.py), else through Ray, as the CLI."""
        try:
            return jobs.status(self.id, self._address)
        except (NotRunning, UserError) as e:
            raise HerdError(str(e)) from None

    def _call(self, on_endpoint, on_ray, timeout: float | None = None, not_running: bool = False):
        """A controller call as the CLI makes it: `on_endpoint(endpoint)`, else (no endpoint on
        record, or it did not answer) `ray.get(on_ray(actor))`. HerdError when it cannot be
        made (NotRunning itself with `not_running`)."""
        try:
            return jobs.call_controller(self.id, on_endpoint, on_ray, self._address, timeout)
        except NotRunning as e:
            if not_running:
                raise
            raise HerdError(str(e)) from None
        except UserError as e:
            raise HerdError(str(e)) from None

    def logs(self) -> str:
        return self._client.get_job_logs(self.id)

    def wait(self, timeout: float | None = None, poll_s: float = 2.0) -> dict:
        """Block until the job ends; its summary.json as a dict. HerdError when it failed or was
        stopped before writing one, TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (state := self.state()) not in TERMINAL:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{self.id} still {state} after {timeout:.0f} s")
            time.sleep(poll_s)
        return self.summary(state)

    def follow(self) -> dict:
        """`herd submit --follow`'s live view until the job ends; its summary."""
        from herd.live import follow_job

        follow_job(self._client, self.id, self.run_dir)
        return self.summary(self.state())

    def summary(self, state: str | None = None) -> dict:
        path = self.run_dir / "summary.json"
        if path.is_file():
            return json.loads(path.read_text())
        tail = [ln for ln in self.logs().strip().splitlines() if ln.strip()][-1:]
        raise HerdError(f"{self.id} ended {state or self.state()} without {path}"
                        + (f": {tail[0]}" if tail else ""))

    def stop(self) -> None:
        """Ask the job to stop (final checkpoint and summary are written)."""
        try:
            self._call(lambda ep: ep.stop(), lambda ctl: ctl.request_stop.remote(), not_running=True)
        except NotRunning:
            self._client.stop_job(self.id)  # nothing has trained yet: no checkpoint to write


def submit(config: str | Path, *, sets: Iterable[str] = (), seed: int | None = None,
           name: str | None = None, address: str | None = None, runs_dir: str | Path = "runs",
           working_dir: str | Path | None = None, py_modules: Iterable[str | Path] = (),
           resume: str | Path | None = None, actor_resources: dict | None = None) -> Job:
    """Submit the YAML job `config` to the Ray cluster at `address` (default: $HERD_DASHBOARD_URL
    or the local `herd up` cluster), as `herd submit` does; the arguments are its flags. A
    relative `config` is looked for from the current directory, then in Herd's source tree (a
    clone's configs/ and examples/). What `herd submit` warns of comes as a UserWarning."""
    import warnings

    from herd import submission

    local.align_auth_mode()  # as the CLI: the token and address of the cluster `herd up` started
    local.align_loopback()
    try:
        job = submission.submit(
            config, sets=sets, seed=seed, name=name, address=address, runs_dir=runs_dir,
            working_dir=working_dir, py_modules=py_modules, resume=resume,
            actor_resources=actor_resources,
            warn=lambda line: warnings.warn(line.removeprefix("warning: "), stacklevel=4))
    except (UserError, local.NotAuthorized, ConnectionError) as e:
        raise HerdError(str(e).strip().splitlines()[0]) from None
    return Job(job.job_id, job.run_dir, job.client, address)


def down(grace_s: float | None = None, force: bool = False) -> list[dict]:
    """`herd down`: every running Herd job of the cluster `herd up` started is wound down within
    `grace_s` seconds (default herd.teardown.DEFAULT_GRACE_S: summary.json, final checkpoint, books),
    then the cluster stops; with `force`, at once, nothing wound down. One record per job:
    job_id, run_dir, wound_down and the line `herd down` prints. HerdError when no cluster
    started by `herd up` is on record."""
    from herd.teardown import DEFAULT_GRACE_S, down_cluster

    local.align_auth_mode()
    try:
        jobs = down_cluster(DEFAULT_GRACE_S if grace_s is None else grace_s, force,
                            say=lambda line: None)
    except ValueError as e:
        raise HerdError(str(e)) from None
    if jobs is None:
        raise HerdError(f"no cluster started by `herd up` on record ({local.cluster_file()})")
    return jobs
