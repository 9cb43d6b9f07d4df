"""`herd up` / `herd down` as a user runs them: token auth on with Herd's own token (never the
user's ~/.ray/auth_token), every port Ray opens on loopback, and `herd down` stops that
cluster only (the suite's cluster keeps answering)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from herd.local import CLUSTER_MARKER_ENV, dashboard_up
from tests.jobs import wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_pids(marker: str) -> list[int]:
    needle = f"{CLUSTER_MARKER_ENV}={marker}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                out.append(int(entry.name))
        except OSError:
            pass
    return out


def listening(pids: list[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on (/proc/net/tcp{,6})."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                addr, port = f[1].split(":")
                raw = bytes.fromhex(addr)
                # /proc prints each 32-bit word little-endian
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                ip = socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, raw)
                found.append(f"{ip}:{int(port, 16)}")
    return found


def loopback(addr: str) -> bool:
    ip = addr.rsplit(":", 1)[0]
    return ip.startswith(("127.", "::ffff:127.")) or ip == "::1"


def private_home(tmp_path: Path) -> tuple[Path, dict, int]:
    """A HOME of the test's own (its ~/.herd, never the user's ~/.ray), the environment that
    `herd` runs in there, and the dashboard port it is to use."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERD_HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
                        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    dash = free_port()
    env.update(HOME=str(home), HERD_DASHBOARD_URL=f"http://127.0.0.1:{dash}")
    return home, env, dash


def test_herd_up_is_loopback_only_with_token_auth_and_down_stops_only_it(ray_cluster, tmp_path):
    home, env, dash = private_home(tmp_path)

    def herd(*args):
        return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180, check=False)

    r = herd("up", "--port", str(free_port()), "--dashboard-port", str(dash), "--num-cpus", "1",
             "--metrics-port", str(free_port()), "--client-port", str(free_port()),
             "--agent-port", str(free_port()), "--preload")
    record = home / ".herd" / "cluster.json"
    try:
        assert r.returncode == 0, r.stderr
        # --preload: it returned once its spare workers had imported torch & co.
        marks = [p.name for p in (home / ".herd" / "preload").glob("*/*")]
        started = sorted(n.split(".")[0] for n in marks if n.endswith(".start"))
        assert started and started == sorted(n.split(".")[0] for n in marks if n.endswith(".done")), marks
        token = home / ".herd" / "ray_auth_token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and "token auth on" in r.stdout
        assert not (home / ".ray").exists()  # the user's Ray token is neither read nor made
        marker = json.loads(record.read_text())["marker"]
        # GCS, raylet, dashboard, client server, agent, metrics...: on a loaded box the last
        # of them may still be binding when `herd up` returns
        def all_listening():
            ports = listening(marked_pids(marker))
            return ports if len(ports) >= 5 else None

        ports = wait_for(all_listening, 30, "5 or more of Ray's ports listening")
        assert all(loopback(a) for a in ports), ports
        # no token, no answer; herd's CLI finds the token by itself
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{dash}/api/version", timeout=10)
        assert e.value.code == 401
        # the dashboard lists no job: the spares came from the raylet, not from a driver
        req = urllib.request.Request(f"http://127.0.0.1:{dash}/api/jobs/",
                                     headers={"Authorization": f"Bearer {token.read_text().strip()}"})
        jobs = json.loads(urllib.request.urlopen(req, timeout=10).read())
        assert jobs == [], jobs
        r = herd("list")
        assert r.returncode == 0 and "no Herd jobs on the cluster" in r.stdout, r.stderr
        # a second `up` finds it and says so: no second start, no false auth warning
        r = herd("up", "--dashboard-port", str(dash))
        assert r.returncode == 0 and "already up" in r.stdout and not r.stderr, (r.stdout, r.stderr)
        assert json.loads(record.read_text())["marker"] == marker
    finally:
        r = herd("down")
    assert r.returncode == 0 and "stopped" in r.stdout, r.stderr
    assert not marked_pids(marker) and not record.exists()
    assert not (home / ".herd" / "preload" / marker).exists()
    assert dashboard_up(ray_cluster["dashboard"])  # the suite's cluster was not touched
    r = herd("down")
    assert r.returncode == 0 and "nothing stopped" in r.stderr


def test_the_token_hand_off_follows_the_address_not_its_spelling():
    """`herd submit` hands learner.server.token over in a private file when the dashboard is on this
    machine, however the URL spells it (http://localhost:8265 used to put it in the job's env
    vars, which the dashboard shows, because the test was '127.0.0.1' in the URL)."""
    from herd.local import is_this_machine

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # UDP: picks the outgoing interface, sends nothing
        own = s.getsockname()[0]
    for host in ("localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]", own):
        assert is_this_machine(host), host
    for host in ("198.51.100.7", "127.0.0.1.example.invalid", ""):
        assert not is_this_machine(host), host
