"""The part of Ray's JobSubmissionClient that `herd submit` and a followed job use, over the
dashboard's REST API with the standard library: `import ray` (0.4 s on the 2-core box, and on
the critical path of every job's start, since the start-up timeline counts from the submit)
is left to the calls that need it. Jobs that upload code (--working-dir, --py-modules with
local paths) still go through Ray's client (herd.submission.submit)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from herd import local


class JobNotFound(RuntimeError):
    """The dashboard answered 404: this cluster has no such job."""


class RestJobClient:
    """submit_job / get_job_status / get_job_logs / stop_job as JobSubmissionClient answers them
    (statuses as their names, e.g. "RUNNING"); a refused request raises RuntimeError with Ray's
    reason, as that client does (JobNotFound, one of them, when the job is not there)."""

    def __init__(self, address: str, timeout: float = 30.0):
        self.address, self.timeout = address.rstrip("/"), timeout

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        headers = {**local.auth_headers(), **({"Content-Type": "application/json"} if data else {})}
        req = urllib.request.Request(self.address + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace").strip()
            error = JobNotFound if e.code == 404 else RuntimeError
            raise error(f"Request failed with status code {e.code}: {text}") from None

    def _job(self, job_id: str) -> str:
        return f"/api/jobs/{urllib.parse.quote(job_id, safe='')}"

    def submit_job(self, *, entrypoint: str, submission_id: str,
                   runtime_env: dict | None = None) -> str:
        body = {"entrypoint": entrypoint, "submission_id": submission_id,
                "runtime_env": runtime_env or {}, "metadata": {}}
        return self._call("POST", "/api/jobs/", body)["submission_id"]

    def get_job_info(self, job_id: str) -> dict:
        """Ray's record of the job: status, message, entrypoint, start and end times, ..."""
        return self._call("GET", self._job(job_id))

    def get_job_status(self, job_id: str) -> str:
        return self.get_job_info(job_id)["status"]

    def get_job_logs(self, job_id: str) -> str:
        return self._call("GET", self._job(job_id) + "/logs")["logs"]

    def stop_job(self, job_id: str) -> bool:
        return bool(self._call("POST", self._job(job_id) + "/stop").get("stopped"))
