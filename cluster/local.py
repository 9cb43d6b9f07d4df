"""Bringing a local Ray head up and down (the `herd up` / `herd down` commands)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request

DEFAULT_DASHBOARD = "http://127.0.0.1:8265"


def ray_bin() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ray")
    return here if os.path.exists(here) else (shutil.which("ray") or "ray")


def align_auth_mode() -> None:
    """Clients must use the auth mode the cluster runs with. A Ray head started with
    RAY_AUTH_MODE unset turns token auth on by itself when ~/.ray/auth_token exists; do the
    same on the client side so that job submission and ray.init present the token."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH", os.path.expanduser("~/.ray/auth_token"))
    if "RAY_AUTH_MODE" not in os.environ and os.path.exists(path):
        os.environ["RAY_AUTH_MODE"] = "token"


def join() -> None:
    """Join the running cluster quietly (in the "herd" namespace) unless already joined."""
    import ray

    from cluster.controller import NAMESPACE

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
                 logging_level="ERROR", log_to_driver=False)


def auth_headers() -> dict[str, str]:
    """Ray's bearer token when the cluster uses token auth (Ray enables it by itself once
    ~/.ray/auth_token exists and RAY_AUTH_MODE is unset)."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH", os.path.expanduser("~/.ray/auth_token"))
    if not token and os.environ.get("RAY_AUTH_MODE", "") != "disabled" and os.path.exists(path):
        with open(path) as f:
            token = f.read().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def get(url: str, timeout: float = 10.0) -> bytes:
    """GET from the dashboard, with Ray's token when there is one."""
    req = urllib.request.Request(url, headers=auth_headers())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def dashboard_up(url: str = DEFAULT_DASHBOARD, timeout: float = 2.0) -> bool:
    try:
        get(f"{url}/api/version", timeout)
        return True
    except OSError:
        return False


def up(port: int = 6379, dashboard_port: int = 8265, num_cpus: int | None = None,
       host: str = "127.0.0.1", metrics_port: int = 8080, wait_s: float = 120) -> str:
    """Start a Ray head with its dashboard on host:dashboard_port; no-op if already up."""
    url = f"http://{host}:{dashboard_port}"
    if dashboard_up(url):
        return url
    cmd = [ray_bin(), "start", "--head", f"--port={port}", f"--node-ip-address={host}",
           "--include-dashboard=true", f"--dashboard-host={host}",
           f"--dashboard-port={dashboard_port}", f"--metrics-export-port={metrics_port}",
           "--disable-usage-stats"]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + wait_s
    while not dashboard_up(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Ray started but its dashboard did not answer at {url}")
        time.sleep(1)
    return url


def down() -> None:
    subprocess.run([ray_bin(), "stop", "--force"], check=False, stdout=subprocess.DEVNULL)
