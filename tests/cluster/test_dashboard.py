"""`herd dashboard`: the URL and how to log in, the token only when asked for, a shell line that
makes Ray's own `ray get-auth-token` find Herd's token (with no ~/.ray), one line for a wrong
token or no cluster. The browser side: test_dashboard_browser.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from herd.dashboard import login_text
from tests.jobs import ROOT, herd, wait_for


def herd_in(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def suite_token() -> str:
    return Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()


@pytest.mark.cluster
def test_says_how_to_log_in_without_showing_the_token(ray_cluster):
    r = herd("dashboard")
    assert f"Ray dashboard: {ray_cluster['dashboard']}" in r.stdout
    assert "Authentication Token Required" in r.stdout and os.environ["RAY_AUTH_TOKEN_PATH"] in r.stdout
    assert "ssh -N -L" in r.stdout and "--generate" in r.stdout  # the remote way; the trap named
    assert suite_token() not in r.stdout + r.stderr


@pytest.mark.cluster
def test_token_and_env_for_ray_cli(ray_cluster, tmp_path):
    assert herd("dashboard", "--token").stdout == suite_token() + "\n"  # a line, piped or not
    line = herd("dashboard", "--env").stdout.strip()
    assert suite_token() not in line
    # a shell without any Ray setting and a HOME without ~/.ray: the line alone makes Ray's
    # CLI find the cluster's token
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(tmp_path), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", 'eval "$1"; ray get-auth-token', "-", line], env=env,
                       text=True, capture_output=True, timeout=120, check=False)
    assert r.returncode == 0 and r.stdout == suite_token(), r.stderr
    # and the rest of Ray's CLI, its job API with no --address: a RAY_ADDRESS where no Ray
    # answers (as a shell's stale one) leaves the dashboard the line names as the only way in
    env["RAY_ADDRESS"] = "127.0.0.1:9"
    r = subprocess.run(["bash", "-c", 'eval "$1"; ray job list', "-", line], env=env, text=True,
                       capture_output=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / ".ray").exists()


@pytest.mark.cluster
def test_open_starts_the_users_browser(ray_cluster, tmp_path):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    r = herd_in({**os.environ, "BROWSER": str(browser)}, "dashboard", "--open")
    assert r.returncode == 0 and not r.stderr, r.stderr
    wait_for(opened.exists, 10, "the browser command to run")
    assert opened.read_text().strip() == ray_cluster["dashboard"]


@pytest.mark.cluster
def test_wrong_token_one_line(ray_cluster):
    env = {**os.environ, "RAY_AUTH_TOKEN": "0" * 64}
    r = herd_in(env, "dashboard")
    assert r.returncode == 2 and not r.stdout, r.stdout
    assert r.stderr.count("\n") == 1 and "from $RAY_AUTH_TOKEN is not the one" in r.stderr, r.stderr


def test_no_cluster_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = herd_in(os.environ.copy(), "--address", f"http://127.0.0.1:{port}", "dashboard")
    assert r.returncode == 2 and r.stderr == (f"herd: no Herd cluster running (no Ray dashboard "
                                              f"answers at http://127.0.0.1:{port}): start one with "
                                              "`herd up`, or point --address / HERD_DASHBOARD_URL at "
                                              "yours\n"), r.stderr


def test_herd_up_token_found_without_settings(tmp_path):
    """As after `herd up` in a fresh shell: no RAY_AUTH_* set, Herd's token file in HERD_HOME."""
    (tmp_path / "herd").mkdir()
    (tmp_path / "herd" / "ray_auth_token").write_text("abc123")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(tmp_path), HERD_HOME=str(tmp_path / "herd"))
    env.pop("HERD_DASHBOARD_URL", None)
    assert herd_in(env, "dashboard", "--token").stdout == "abc123\n"
    assert herd_in(env, "dashboard", "--env").stdout == (
        f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={tmp_path / 'herd' / 'ray_auth_token'} "
        "RAY_API_SERVER_ADDRESS=http://127.0.0.1:8265\n")
    env["HERD_HOME"] = str(tmp_path / "none")
    r = herd_in(env, "dashboard", "--token")
    assert r.returncode == 2 and "no Ray token in this shell" in r.stderr and not r.stdout


def test_without_token_auth_no_login():
    text = login_text("http://127.0.0.1:8265", "disabled", None)
    assert "No login" in text and "paste" not in text
