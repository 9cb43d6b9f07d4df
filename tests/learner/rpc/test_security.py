"""Who may talk to the learner: loopback by default, a token beyond it, TLS as an option, and
no secret written where runs/ or logs would keep it."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import grpc
import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.rpc.server import Server
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc

TOKEN = "s3cret-token-for-tests"


def listening_addresses(port: int) -> set[str]:
    """Local addresses of listening TCP sockets on `port` (Linux /proc/net/tcp[6])."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if int(p, 16) == port and state == "0A":  # LISTEN
                # /proc writes each 32-bit word of the address in host (little-endian) order
                raw = b"".join(bytes.fromhex(addr[i:i + 8])[::-1] for i in range(0, len(addr), 8))
                ip = ipaddress.ip_address(raw)
                out.add(str(getattr(ip, "ipv4_mapped", None) or ip))
    return out


def test_learner_binds_loopback_by_default(make_learner):
    assert LearnerConfig().server.host == "127.0.0.1"
    learner = make_learner()
    addrs = listening_addresses(learner.port)
    assert addrs and all(ipaddress.ip_address(a).is_loopback for a in addrs), addrs


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_beyond_loopback_without_token_is_refused(host):
    with pytest.raises(ValueError, match="token"):
        Server(lambda: None, host, 0, None, 4)


def _calls(stub, spec, metadata):
    """Every RPC once; the status code each ended with."""
    codes = {}
    for name, fn in {
        "Handshake": lambda: stub.Handshake(pb.HandshakeRequest(actor_id="x", spec=spec),
                                            metadata=metadata),
        "GetStatus": lambda: stub.GetStatus(pb.StatusRequest(), metadata=metadata),
        "WatchWeights": lambda: next(iter(stub.WatchWeights(
            pb.WatchRequest(actor_id="x"), metadata=metadata))),
        "PushTransitions": lambda: list(stub.PushTransitions(
            iter([pb.TransitionBatch(session_id=1, actor_id="x", seq=1)]), metadata=metadata)),
    }.items():
        try:
            fn()
            codes[name] = grpc.StatusCode.OK
        except grpc.RpcError as e:
            codes[name] = e.code()
    return codes


def test_token_required_on_every_method(make_learner, spec):
    learner = make_learner(token=TOKEN)
    with grpc.insecure_channel(learner.address()) as ch:
        stub = pb_grpc.LearnerStub(ch)
        for metadata in ((), ((codec.TOKEN_HEADER, "wrong"),), ((codec.TOKEN_HEADER, TOKEN[:-1]),)):
            assert set(_calls(stub, spec, metadata).values()) == {grpc.StatusCode.UNAUTHENTICATED}
        ok = _calls(stub, spec, ((codec.TOKEN_HEADER, TOKEN),))
        assert set(ok.values()) == {grpc.StatusCode.OK}, ok
    assert learner.received == 0 and learner.buffer.inserted == 0


def _self_signed(tmp_path: Path) -> tuple[str, str, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "herd-learner")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"), pem


def test_tls_port_with_token(make_learner, spec, tmp_path):
    cert, key, pem = _self_signed(tmp_path)
    learner = make_learner(token=TOKEN, tls_cert=cert, tls_key=key)
    good = ((codec.TOKEN_HEADER, TOKEN),)
    creds = grpc.ssl_channel_credentials(root_certificates=pem)
    with grpc.secure_channel(learner.address(), creds) as ch:
        stub = pb_grpc.LearnerStub(ch)
        assert set(_calls(stub, spec, good).values()) == {grpc.StatusCode.OK}
        assert set(_calls(stub, spec, ()).values()) == {grpc.StatusCode.UNAUTHENTICATED}
    # a plaintext client cannot talk to the TLS port at all
    with grpc.insecure_channel(learner.address()) as ch:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.LearnerStub(ch).GetStatus(pb.StatusRequest(), metadata=good, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_actor_client_pushes_over_tls(make_learner, spec, tmp_path):
    """The actors' own client (actors.tls_ca) handshakes, pushes and is acknowledged over TLS."""
    import time

    import numpy as np

    from herd.actors.client import LearnerClient

    cert, key, _ = _self_signed(tmp_path)
    learner = make_learner(token=TOKEN, tls_cert=cert, tls_key=key, min_size=10_000,
                           capacity=10_000)
    client = LearnerClient(learner.address(), "tls-0", spec, token=TOKEN, tls_ca=cert)
    try:
        rows = {"obs": np.zeros((8, 4), np.float32), "action": np.zeros((8, 1), np.float32),
                "reward": np.ones(8, np.float32), "next_obs": np.zeros((8, 4), np.float32),
                "terminated": np.zeros(8, np.uint8)}
        client.push(rows, policy_version=0)
        assert client.flush(timeout=20), "no ack over TLS"
        assert client.stats["acked"] == 8
        deadline = time.monotonic() + 10
        while learner.received < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert learner.received == 8
    finally:
        client.close()


def test_tls_needs_cert_and_key_together():
    with pytest.raises(ValueError, match="together"):
        LearnerConfig.flat(tls_cert="/x/cert.pem")


def test_checkpoint_holds_no_token(make_learner, tmp_path):
    learner = make_learner(token=TOKEN)
    out = Path(learner.save(str(tmp_path / "ck"), save_replay=True))
    state = torch.load(out / "model.pt", weights_only=True)
    assert "token" not in state["config"]
    for f in out.iterdir():
        assert TOKEN.encode() not in f.read_bytes(), f


def test_driver_makes_a_per_job_token_and_redacts_it():
    from herd.config import parse_config
    from herd.job_setup import REDACTED, redacted, secure

    local = parse_config({"env": {"id": "InvertedPendulum-v5"}})
    assert secure(local).learner.server.token is None  # loopback: no token needed
    wide = parse_config({"env": {"id": "InvertedPendulum-v5"}, "learner": {"server": {"host": "0.0.0.0"}}})
    a, b = secure(wide), secure(wide)
    assert a.learner.server.token and b.learner.server.token and a.learner.server.token != b.learner.server.token
    assert len(a.learner.server.token) >= 32
    text = redacted(a)
    assert a.learner.server.token not in text and REDACTED in text
    given = parse_config({"env": {"id": "InvertedPendulum-v5"},
                          "learner": {"server": {"host": "0.0.0.0", "token": TOKEN}}})
    assert secure(given).learner.server.token == TOKEN and TOKEN not in redacted(given)


def test_a_configured_token_travels_in_a_private_file_not_in_env_vars(tmp_path, monkeypatch):
    """`herd submit` keeps the token out of the job's env vars (shown by the dashboard)."""
    import json
    import stat

    from herd.config import parse_config
    from herd.job_setup import token_from_file
    from herd.submission import write_token_file

    monkeypatch.setenv("HOME", str(tmp_path))
    path = write_token_file("herd-x-1", TOKEN)
    assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    cfg = parse_config({"env": {"id": "InvertedPendulum-v5"}, "learner": {"server": {"host": "0.0.0.0"}}})
    assert TOKEN not in json.dumps(cfg.model_dump(mode="json"))
    assert token_from_file(cfg, path).learner.server.token == TOKEN
    assert not Path(path).exists()  # read once
