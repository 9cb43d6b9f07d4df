"""The job controller's HTTP endpoint, and the CLI's client of it: `herd status / scale / stop`
answer without opening a Ray driver (a fresh one costs seconds per call).

The controller serves it on 127.0.0.1 (on $HERD_CONTROL_HOST if set: nothing listens beyond
loopback unless asked) at a free port, and records where, with a per-job secret, in
HERD_HOME/jobs/<job>/controller.json (0600, in 0700 folders). A client on the same machine with
the same HERD_HOME finds it there; every request must carry the secret as a bearer token, or it
is refused (401). Without the record (a remote cluster, another HERD_HOME) or with a controller
that does not answer, the CLI goes the old way, through Ray.

    GET  /status    Controller.status()         GET /progress  Controller.latest_progress()
    POST /scale     {"actors": N} -> Controller.scale(N)
    POST /stop      {"why": ..., "grace_s": S} (both optional) -> Controller.request_stop

The client half imports nothing beyond the standard library and herd.local: no Ray, no torch.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from herd.local import NAMESPACE, herd_home, write_private  # noqa: F401 -- NAMESPACE: callers import it here

HOST_ENV = "HERD_CONTROL_HOST"
RECORD = "controller.json"


def controller_name(job_id: str) -> str:
    """The controller's Ray actor name (the Ray path, where the endpoint is not reachable)."""
    return f"herd-controller-{job_id}"


def record_path(job_id: str) -> Path:
    return herd_home() / "jobs" / job_id / RECORD


class Unreachable(Exception):
    """No endpoint on record for the job, or it did not answer as the job's controller."""


# ---- server (in the controller's process) ----
class ControlServer:
    """Serves `controller`'s calls on a daemon thread; `close()` stops it and drops the record."""

    def __init__(self, controller, job_id: str, host: str | None = None):
        self.job_id, self.token = job_id, secrets.token_urlsafe(32)
        host = host or os.environ.get(HOST_ENV) or "127.0.0.1"
        routes = {
            ("GET", "/status"): lambda body: controller.status(),
            ("GET", "/progress"): lambda body: controller.latest_progress(),
            ("POST", "/scale"): lambda body: controller.scale(int(body["actors"])),
            ("POST", "/stop"): lambda body: controller.request_stop(body.get("why"),
                                                                    body.get("grace_s")),
        }
        token = self.token

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                given = self.headers.get("Authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return self._reply(401, {"error": "a bearer token is required"})
                route = routes.get((method, self.path))
                if route is None:
                    return self._reply(404, {"error": f"no {method} {self.path}"})
                try:
                    n = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(n)) if n else {}
                    return self._reply(200, {"job_id": job_id, "result": route(body)})
                except Exception as e:  # noqa: BLE001 -- the client shows it in one line
                    return self._reply(500, {"error": f"{type(e).__name__}: {e}"})

            def _reply(self, code: int, payload: dict) -> None:
                data = json.dumps(payload, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def log_message(self, *args):  # quiet: the job log is the driver's
                pass

        server_cls = ThreadingHTTPServer
        if ":" in host:  # an IPv6 address
            import socket

            server_cls = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
        self.server = server_cls((host.strip("[]"), 0), Handler)
        self.server.daemon_threads = True
        port = self.server.server_address[1]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        threading.Thread(target=self.server.serve_forever, name="herd-control", daemon=True).start()
        self.path = write_record(job_id, {"job_id": job_id, "address": self.address,
                                          "token": self.token, "pid": os.getpid()})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        remove_record(self.job_id)


def write_record(job_id: str, record: dict) -> Path:
    """The record, 0600 in 0700 folders, written under a temporary name and renamed."""
    return write_private(record_path(job_id), json.dumps(record))


def remove_record(job_id: str) -> None:
    path = record_path(job_id)
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass


# ---- client (the CLI) ----
class Endpoint:
    """The job's controller over HTTP; every call raises Unreachable when it does not answer."""

    def __init__(self, job_id: str, address: str, token: str):
        self.job_id, self.url, self.token = job_id, f"http://{address}", token

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 120.0):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                payload = json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code == 500:
                raise RuntimeError(json.loads(e.read()).get("error", "controller error")) from None
            raise Unreachable(f"HTTP {e.code}") from None
        except (OSError, ValueError) as e:  # refused, reset, timed out, not JSON: not ours
            raise Unreachable(str(e)) from None
        if payload.get("job_id") != self.job_id:  # a stale record's port, now another job's
            raise Unreachable("another job answered")
        return payload["result"]

    def status(self) -> dict:
        return self.call("GET", "/status")

    def progress(self) -> dict:
        return self.call("GET", "/progress", timeout=15)

    def scale(self, n: int) -> dict:
        return self.call("POST", "/scale", {"actors": n})

    def stop(self, why: str | None = None, grace_s: float | None = None) -> bool:
        return self.call("POST", "/stop", {"why": why, "grace_s": grace_s}, timeout=15)


def find(job_id: str) -> Endpoint | None:
    """The job's endpoint from its record on this machine; None without one."""
    try:
        rec = json.loads(record_path(job_id).read_text())
        return Endpoint(job_id, rec["address"], rec["token"])
    except (OSError, ValueError, KeyError):
        return None
