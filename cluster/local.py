"""Bringing a local Ray head up and down (the `herd up` / `herd down` commands)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from herd.pool import CLUSTER_MARKER_ENV

DEFAULT_DASHBOARD = "http://127.0.0.1:8265"
NAMESPACE = "herd"  # Herd's Ray namespace: controllers, learners, actors (herd.control's too)


def ray_bin() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ray")
    return here if os.path.exists(here) else (shutil.which("ray") or "ray")


def herd_home() -> Path:
    """Herd's own state: $HERD_HOME, default ~/.herd (the tests point it at a temp dir)."""
    return Path(os.environ.get("HERD_HOME") or Path.home() / ".herd")


def ray_token_path() -> Path:
    """The Ray auth token of the cluster `herd up` starts. Kept apart from Ray's default
    ~/.ray/auth_token on purpose: once that file exists, every Ray cluster the user starts
    without RAY_AUTH_MODE turns token auth on, and clients without the token get HTTP 401."""
    return herd_home() / "ray_auth_token"


def cluster_file() -> Path:
    """What `herd up` started (its marker, dashboard, GCS), so that `herd down` stops that only."""
    return herd_home() / "cluster.json"


def cluster_record() -> dict:
    """What `herd up` recorded (marker, dashboard, gcs); {} when nothing readable is on record."""
    try:
        record = json.loads(cluster_file().read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def recorded_gcs(dashboard: str) -> str | None:
    """The GCS address of the cluster `herd up` recorded, if `dashboard` is its dashboard."""
    record = cluster_record()
    return record.get("gcs") if record.get("dashboard", "").rstrip("/") == dashboard.rstrip("/") else None


def write_private(path: Path, text: str) -> Path:
    """`text` in a 0600 file (written under a temporary name, then renamed), in folders this
    makes 0700: Herd's secrets and records."""
    for folder in reversed([path.parent, *path.parent.parents]):
        folder.mkdir(exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
    return path


def ensure_token() -> Path:
    """Herd's Ray token file (0600 in a 0700 folder), made once."""
    path = ray_token_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path


def align_auth_mode() -> None:
    """Clients must use the auth mode the cluster runs with. With RAY_AUTH_MODE unset: Herd's
    token when `herd up` made one (its cluster runs with token auth), else Ray's own rule (a
    head started with ~/.ray/auth_token present turns token auth on by itself)."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        os.environ["RAY_AUTH_MODE"] = "token"
    elif ray_token_path().exists():
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(ray_token_path())
    elif os.path.exists(os.path.expanduser("~/.ray/auth_token")):
        os.environ["RAY_AUTH_MODE"] = "token"


LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # why "0" means loopback: see up()


def align_loopback() -> None:
    """A client of a loopback-only cluster must not swap 127.0.0.1 for the machine's external
    IP either (Ray does so for the GCS address and the client's own node IP): the cluster does
    not listen there. The cluster is RAY_ADDRESS's or, without one, the one `herd up` started."""
    addr = os.environ.get("RAY_ADDRESS", "")
    if not addr or addr == "auto":
        addr = cluster_record().get("gcs")
        if not addr:
            return
    host = addr.split("://")[-1].rsplit(":", 1)[0]
    if is_loopback_host(host):
        os.environ.setdefault(LOOPBACK_ONLY_ENV, "0")


def join() -> None:
    """Join the running cluster quietly (in the "herd" namespace) unless already joined."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS", "auto")
    if address != "auto" and "://" not in address:
        # ray.init retries a dead address for a minute or more; a refused connection is final
        import socket

        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
        except (OSError, ValueError):
            raise ConnectionError(f"no Ray cluster answers at {address} (RAY_ADDRESS); start "
                                  "one with `herd up`") from None
    ray.init(address=address, namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)


def auth_headers() -> dict[str, str]:
    """Ray's bearer token when token auth is on (align_auth_mode says where it is)."""
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
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise NotAuthorized(f"the Ray dashboard at {url} wants a token this shell does not "
                                f"have (HTTP {e.code}); set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH") from None
        return False
    except OSError:
        return False


class NotAuthorized(RuntimeError):
    """The cluster runs with token auth and this process holds no (or the wrong) token."""


def up(port: int = 6379, dashboard_port: int = 8265, num_cpus: int | None = None,
       host: str = "127.0.0.1", metrics_port: int = 8080, client_port: int = 10001,
       agent_port: int = 52365, wait_s: float = 120, preload: bool | None = None) -> str:
    """Start a Ray head with its dashboard on host:dashboard_port; no-op if already up.

    Token auth is on (Herd's token, ray_token_path()) unless RAY_AUTH_MODE=disabled is set.
    With a loopback host every port Ray opens (GCS, raylet, object manager, client server,
    dashboard agent, metrics) listens on loopback only: Ray's C++ servers bind 127.0.0.1 when
    the node's IP is 127.0.0.1, and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps `ray start` from
    replacing that IP with the machine's external one (the price: no other node can join, which
    a loopback head could not offer anyway).

    It starts one spare worker per CPU (herd/pool.py). preload: the spares import torch & co.
    as they start, and this returns once they are done (herd/preload.py, finish_preload);
    None: on where a GPU is (preload_default)."""
    from herd import pool

    url = f"http://{host}:{dashboard_port}"
    if dashboard_up(url):
        return url
    if preload is None:
        preload = preload_default()
    marker = secrets.token_hex(8)
    env = {**os.environ, CLUSTER_MARKER_ENV: marker}
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "disabled":
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(ensure_token()))
        env.pop("RAY_AUTH_TOKEN", None)
    if is_loopback_host(host):
        env[LOOPBACK_ONLY_ENV] = "0"
    spares = num_cpus if num_cpus is not None else os.cpu_count() or 1
    env.update(pool.pool_env(spares))
    preload_dir = herd_home() / "preload" / marker if preload else None
    if preload_dir is not None:
        env.update(preload_env(preload_dir))
    cmd = [ray_bin(), "start", "--head", f"--port={port}", f"--node-ip-address={host}",
           "--include-dashboard=true", f"--dashboard-host={host}",
           f"--dashboard-port={dashboard_port}", f"--metrics-export-port={metrics_port}",
           f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
           "--disable-usage-stats"]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    r = subprocess.run(cmd, check=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode:
        if preload_dir is not None:
            shutil.rmtree(preload_dir, ignore_errors=True)
        last = [ln for ln in r.stderr.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise RuntimeError(f"`ray start` failed: {last[0]}")
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", LOOPBACK_ONLY_ENV):  # this process's clients follow suit
        if key in env:
            os.environ[key] = env[key]
    os.environ.pop("RAY_AUTH_TOKEN", None)
    cluster_file().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    cluster_file().write_text(json.dumps({"marker": marker, "dashboard": url,
                                          "gcs": f"{host}:{port}"}))
    deadline = time.monotonic() + wait_s
    while not dashboard_up(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Ray started but its dashboard did not answer at {url}")
        time.sleep(1)
    pool.start_spares(f"{host}:{port}", spares, env)
    if preload_dir is not None:
        finish_preload(preload_dir)
    return url


PRELOAD_ENV = "RAY_preload_python_modules"
PRELOAD = "herd.preload"
"""What every Ray worker of a `herd up --preload` cluster imports before it takes work:
herd/preload.py, which imports torch & co. in a background thread (why not Ray's own way: see
there)."""
PRELOAD_DIR_ENV = "HERD_PRELOAD_DIR"
"""Where each preloading worker leaves <pid>.start and <pid>.done (herd/preload.py)."""


def preload_default(dev: Path = Path("/dev"),
                    proc: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """`herd up`'s preload when neither --preload nor --no-preload is given: on where this
    machine shows an NVIDIA GPU to its processes (a /dev/nvidia<N> node, as CUDA needs, or the
    driver's /proc list). There the learner's torch + CUDA import sat on the first update's
    path: cold Humanoid first update 8.79 s preloaded against 13.25 s bare, median of 3 each
    (2026-12-03, startup-warming-nvidia-h200.json). On the 2-core CPU box it cost 0.3 s (4.03
    against 3.70 s, startup-preload-warming-x86-64.json), so off there."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return any(dev.glob("nvidia[0-9]*")) or (proc.is_dir() and any(proc.iterdir()))


def preload_env(folder: Path) -> dict:
    """The environment a `herd up --preload` cluster's processes start with; makes `folder`."""
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.mkdir(mode=0o700, exist_ok=True)
    return {PRELOAD_ENV: PRELOAD, PRELOAD_DIR_ENV: str(folder)}


def finish_preload(folder: Path, timeout: float = 90.0) -> float | None:
    """Wait for the spares' imports (wait_preloaded). Seconds waited, None when it gave up."""
    t0 = time.monotonic()
    done = wait_preloaded(folder, timeout)
    return round(time.monotonic() - t0, 2) if done else None


def wait_preloaded(folder: Path, timeout: float = 90.0, settle: float = 1.0,
                   first_s: float = 20.0) -> bool:
    """Wait until the workers that began preloading (<pid>.start in folder) have all ended
    (<pid>.done), and no new one began for `settle` s. Give up after `timeout` s, or after
    `first_s` s without any worker beginning: the workers then only keep importing while the
    first job starts. True when they were done."""
    t0 = time.monotonic()
    quiet_since, last = None, None
    while time.monotonic() < t0 + timeout:
        names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        started = {n[:-6] for n in names if n.endswith(".start")}
        finished = {n[:-5] for n in names if n.endswith(".done")}
        now = time.monotonic()
        if started and started <= finished:
            if names != last:
                quiet_since, last = now, names
            elif now - quiet_since >= settle:
                return True
        else:
            quiet_since, last = None, None
            if not started and now - t0 > first_s:
                return False
        time.sleep(0.1)
    return False


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost, decided on the address, not on how it is spelled."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_this_machine(host: str) -> bool:
    """Whether `host` names this machine: loopback, or an address one of its interfaces holds
    (binding a socket to it succeeds only then)."""
    import socket

    if is_loopback_host(host):
        return True
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    for family, _, _, _, addr in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((addr[0], 0))
                return True
        except OSError:
            continue
    return False


def down() -> bool:
    """Stop the cluster `herd up` started (its processes only; other Ray clusters of the user
    keep running). False when there is none on record."""
    marker = cluster_record().get("marker")
    if not marker:
        return False
    stop_processes_marked(marker)
    shutil.rmtree(herd_home() / "preload" / marker, ignore_errors=True)
    cluster_file().unlink(missing_ok=True)
    return True


def stop_processes_marked(marker: str, timeout: float = 3.0) -> None:
    """SIGTERM, then SIGKILL, every process of this user whose environment carries
    HERD_RAY_CLUSTER=<marker> (all a `ray start` spawned inherit it: GCS, raylet, dashboard,
    client server, workers, job drivers), and their children.

    `timeout`: seconds each signal gets. On this 2-core box everything but the raylet exits
    within 0.5 s of SIGTERM; the raylet takes ~10 s, which made `herd down` 17 s. The whole
    cluster is going and nothing in it is durable, so it gets SIGKILL after 3 s."""
    needle = f"{CLUSTER_MARKER_ENV}={marker}".encode()
    parent, marked = {}, set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                marked.add(int(entry.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or another user's
            pass
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in marked} - marked
        grew = bool(more)
        marked |= more
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while any(Path(f"/proc/{p}").exists() for p in marked) and time.monotonic() < deadline:
            time.sleep(0.2)
