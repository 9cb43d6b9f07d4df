"""`herd dashboard`: where Ray's dashboard is and how to log into it.

A cluster with token auth shows only an "Authentication Token Required" box until the browser
holds Ray's login cookie. Ray 2.60 sets that cookie (HttpOnly, SameSite=Strict, 30 days) from
one place only: its own page's POST to /api/authenticate with the token in an Authorization
header. It reads no token from a URL, and a page of another origin cannot make that call (the
dashboard answers no CORS preflight), so no link can log a browser in: the token is pasted into
that box once per browser. This command says which token, where it is, and how Ray's own CLI
(`ray get-auth-token`, `ray job list`) finds it without a ~/.ray/auth_token.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import urllib.error
import urllib.request
import webbrowser
from urllib.parse import urlsplit

from herd import local

USER_RAY_TOKEN = "~/.ray/auth_token"


def url_of(address: str | None) -> str:
    """The dashboard: --address, else $HERD_DASHBOARD_URL, else the one `herd up` started (its
    port may not be the default), else the default."""
    if address or os.environ.get("HERD_DASHBOARD_URL"):
        return address or os.environ["HERD_DASHBOARD_URL"]
    return local.cluster_record().get("dashboard") or local.DEFAULT_DASHBOARD


def token_source() -> tuple[str | None, str | None]:
    """(token, where it came from) as this shell's herd and ray clients find it: $RAY_AUTH_TOKEN,
    else the file $RAY_AUTH_TOKEN_PATH names (local.align_auth_mode points it at Herd's token),
    else Ray's default file. (None, None) without any."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip(), "$RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser(USER_RAY_TOKEN)
    try:
        with open(path) as f:
            return f.read().strip(), path
    except OSError:
        return None, None


def auth_mode(url: str) -> str:
    """The cluster's auth mode ("token" or "disabled") from its public endpoint; ConnectionError
    in one line when no dashboard answers."""
    try:
        with urllib.request.urlopen(f"{url}/api/authentication_mode", timeout=5) as r:
            return json.loads(r.read())["authentication_mode"]
    except (OSError, ValueError, KeyError):
        raise ConnectionError(f"no Herd cluster running (no Ray dashboard answers at {url}): start "
                              "one with `herd up`, or point --address / HERD_DASHBOARD_URL at yours") from None


def token_works(url: str, token: str) -> bool:
    """Whether the cluster takes `token` (its API answers with it, as a browser's cookie would)."""
    req = urllib.request.Request(f"{url}/api/version", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5):
            return True
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            return False
        raise


def env_lines(where: str, url: str) -> list[str]:
    """Shell lines that make Ray's CLI use this token (a file: its path, never the token) and
    its job commands this dashboard: RAY_API_SERVER_ADDRESS, which `ray job` reads before
    RAY_ADDRESS, so that RAY_ADDRESS keeps naming the GCS for ray.init and `ray status`."""
    api = f"RAY_API_SERVER_ADDRESS={shlex.quote(url)}"
    if where == "$RAY_AUTH_TOKEN":
        return [f"export RAY_AUTH_MODE=token {api}  # RAY_AUTH_TOKEN is set already"]
    return [f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={shlex.quote(where)} {api}"]


def tunnel_hint(url: str) -> str:
    port = urlsplit(url).port or 80
    return (f"From another machine: ssh -N -L {port}:127.0.0.1:{port} USER@THIS_HOST\n"
            f"then open http://127.0.0.1:{port} there and log in the same way.")


def login_text(url: str, mode: str, where: str | None) -> str:
    """What `herd dashboard` prints: the URL and how to log in (never the token itself)."""
    lines = [f"Ray dashboard: {url}"]
    if mode != "token":
        lines.append(f"No login: this cluster runs without token auth (authentication mode {mode}).")
    else:
        lines += [
            "Log in once per browser (the login lasts 30 days): paste this cluster's token into",
            "the \"Authentication Token Required\" box. `herd dashboard --token` prints it; it is in",
            f"{where}.",
            "Ray's own CLI (`ray get-auth-token`, `ray job list`) finds it after",
            f"  {env_lines(where, url)[0]}",
            "(the line `herd dashboard --env` prints). Not `ray get-auth-token --generate`: it writes",
            f"{USER_RAY_TOKEN}, another token, and every Ray cluster this user starts later turns",
            "token auth on.",
        ]
    if local.is_loopback_host(urlsplit(url).hostname or ""):
        lines.append(tunnel_hint(url))
    return "\n".join(lines)


def main(address: str | None, open_browser: bool = False, token: bool = False,
         env: bool = False) -> int:
    """`herd dashboard [--open | --token | --env]`; ConnectionError / NotAuthorized in one line."""
    url = url_of(address).rstrip("/")
    secret, where = token_source()
    if token or env:  # for a pipe or eval: the token (or its shell lines) alone, or one error line
        if secret is None:
            raise local.NotAuthorized(f"no Ray token in this shell (none of $RAY_AUTH_TOKEN, "
                                      f"$RAY_AUTH_TOKEN_PATH, {local.ray_token_path()}, "
                                      f"{USER_RAY_TOKEN}); `herd up` makes one")
        if token:
            print(secret)  # a line like any other: `$(herd dashboard --token)` drops the newline
        else:
            print("\n".join(env_lines(where, url)))
        return 0
    mode = auth_mode(url)
    if mode == "token":
        if secret is None:
            raise local.NotAuthorized(f"the dashboard at {url} wants a token and this shell has "
                                      "none; set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH to the "
                                      "cluster's token")
        if not token_works(url, secret):
            raise local.NotAuthorized(f"the token from {where} is not the one the cluster at {url} "
                                      "runs with; set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH to its token")
    print(login_text(url, mode, where))
    if open_browser and not webbrowser.open(url):
        print(f"herd: no web browser found on this machine; open {url} in one", file=sys.stderr)
    return 0
