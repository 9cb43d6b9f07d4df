"""herd.jobs_rest against a stand-in dashboard on loopback (unit test: the suite's real jobs go
through it too, by `herd submit`): the requests Ray's REST API takes, its answers read back,
Ray's refusals raised as Ray's client raises them, the token sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from herd.jobs_rest import JobNotFound, RestJobClient
from herd.submission import submit_with_retry


@pytest.fixture
def dashboard(monkeypatch, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    seen, refusals = [], {"left": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, code: int, body: dict | str) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            seen.append(("POST", self.path, body, self.headers.get("Authorization")))
            if self.path == "/api/jobs/":
                if refusals["left"]:
                    refusals["left"] -= 1
                    return self.answer(500, "No available agent to submit job, please try again later.")
                if not body.get("entrypoint"):
                    return self.answer(400, "entrypoint is required")
                return self.answer(200, {"job_id": "raysubmit_1", "submission_id": body["submission_id"]})
            if self.path == "/api/jobs/herd-x/stop":
                return self.answer(200, {"stopped": True})
            self.answer(404, "no such job")

        def do_GET(self):
            seen.append(("GET", self.path, None, self.headers.get("Authorization")))
            if self.path == "/api/jobs/herd-x":
                return self.answer(200, {"status": "RUNNING", "submission_id": "herd-x"})
            if self.path == "/api/jobs/herd-x/logs":
                return self.answer(200, {"logs": "line 1\nline 2\n"})
            self.answer(404, "Job herd-y does not exist")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", seen, refusals
    server.shutdown()


def test_it_speaks_rays_job_api_with_the_token(dashboard):
    url, seen, _ = dashboard
    client = RestJobClient(url + "/")
    assert client.submit_job(entrypoint="python -m herd.driver", submission_id="herd-x",
                             runtime_env={"env_vars": {"A": "1"}}) == "herd-x"
    assert seen[-1][:3] == ("POST", "/api/jobs/", {"entrypoint": "python -m herd.driver",
                                                  "submission_id": "herd-x",
                                                  "runtime_env": {"env_vars": {"A": "1"}},
                                                  "metadata": {}})
    assert client.get_job_status("herd-x") == "RUNNING"
    assert client.get_job_logs("herd-x") == "line 1\nline 2\n"
    assert client.stop_job("herd-x") is True
    assert {auth for *_, auth in seen} == {"Bearer s3cret"}


def test_refusals_are_raised_as_rays_client_raises_them(dashboard):
    url, _, refusals = dashboard
    client = RestJobClient(url)
    with pytest.raises(JobNotFound, match="404.*does not exist"):
        client.get_job_status("herd-y")
    assert client.get_job_info("herd-x")["submission_id"] == "herd-x"
    with pytest.raises(RuntimeError, match="400.*entrypoint is required"):
        client.submit_job(entrypoint="", submission_id="herd-z")
    # a fresh head's job agent is not registered yet: submit_with_retry waits for it
    refusals["left"] = 1
    submit_with_retry(client, wait_s=10, entrypoint="x", submission_id="herd-x")
    assert refusals["left"] == 0
