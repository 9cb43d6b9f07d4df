"""bench/common.private_ray_auth: a bench's own local Ray gets a token of its own, never the
user's ~/.ray/auth_token; a caller's auth settings are left as they are."""

import os
import stat
from pathlib import Path

import pytest

from bench.common import private_ray_auth

KEYS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def test_a_private_token_when_none_is_set(monkeypatch):
    for k in KEYS:
        monkeypatch.delenv(k, raising=False)
    private_ray_auth()
    path = os.environ["RAY_AUTH_TOKEN_PATH"]
    assert os.environ["RAY_AUTH_MODE"] == "token" and not path.startswith(os.path.expanduser("~"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(Path(path).read_text()) == 64


@pytest.mark.parametrize("key", KEYS)
def test_the_callers_choice_is_kept(monkeypatch, key):
    for k in KEYS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(key, "disabled" if key == "RAY_AUTH_MODE" else "x")
    private_ray_auth()
    assert {k: os.environ.get(k) for k in KEYS} == {k: ("disabled" if k == "RAY_AUTH_MODE" else "x")
                                                     if k == key else None for k in KEYS}
