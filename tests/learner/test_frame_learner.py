"""A pixel learner end to end on the CPU: a real gRPC server on loopback takes pixel batches
(each frame once), trains the conv SAC on them, publishes PolicyWeights arch "conv" as
proto/herd.proto lays it out, answers malformed frame numbers with INVALID_ARGUMENT storing
nothing, and saves and restores its networks and optimizers."""

from __future__ import annotations

import queue
import time

import grpc
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.pixels import DRQ_STEPS

FRAME = (3, 24, 24)
STACK = 3
ACTION = 2


def pixel_spec() -> pb.EnvSpec:
    return codec.spec_to_proto("dm_control/toy-v0", FRAME, "uint8", (ACTION,), [-1.0] * ACTION,
                               [1.0] * ACTION, frame_stack=STACK)


class PixelActor:
    """Frames numbered 0, 1, ... for the life of the actor; one env; episodes of 5 steps."""

    def __init__(self, channel, actor_id: str, seed: int = 0, spec: pb.EnvSpec | None = None):
        self.rng = np.random.default_rng(seed)
        self.actor_id, self.seq, self.number, self.last = actor_id, 0, 0, -1
        self.stub = pb_grpc.LearnerStub(channel)
        self.reply = self.stub.Handshake(pb.HandshakeRequest(
            actor_id=actor_id, spec=spec or pixel_spec(), incarnation=99))
        self.sid = self.reply.session_id
        self.steps = 0
        self.q: queue.Queue = queue.Queue()  # one open PushTransitions stream: the session's life
        self.acks = self.stub.PushTransitions(iter(self.q.get, None))

    def batch(self, rows: int) -> dict:
        first = self.number
        frames, prev, obs, nxt = [], [], [], []

        def frame(p):
            frames.append(self.rng.integers(0, 256, FRAME, dtype=np.uint8))
            prev.append(p)
            self.number += 1
            return self.number - 1

        for _ in range(rows):
            if self.last < 0 or self.steps % 5 == 0:
                self.last = frame(-1)  # an episode's first frame
            cur = frame(self.last)
            obs.append(self.last)
            nxt.append(cur)
            self.last = cur
            self.steps += 1
        return {"frames": np.stack(frames), "first_frame": first,
                "frame_prev": np.array(prev, np.int64), "obs_frame": np.array(obs, np.int64),
                "next_frame": np.array(nxt, np.int64),
                "action": self.rng.uniform(-1, 1, (rows, ACTION)).astype(np.float32),
                "reward": self.rng.normal(size=rows).astype(np.float32),
                "terminated": np.zeros(rows, np.uint8)}

    def push(self, arrays: dict) -> pb.PushAck:
        self.seq += 1
        msg = codec.pack_batch(arrays, session_id=self.sid, actor_id=self.actor_id, seq=self.seq,
                               policy_version=0)
        self.q.put(msg)
        return next(self.acks)


def small_cfg(**extra) -> LearnerConfig:
    return LearnerConfig.flat(capacity=1_000, min_size=32, ratio=None, device="cpu",
                              feature_dim=16, channels=8, hidden_sizes=(32, 32),
                              batch_size=8, publish_every_s=0.2, **DRQ_STEPS, **extra)


@pytest.fixture(scope="module")
def learner():
    lrn = Learner(small_cfg(), pixel_spec())
    yield lrn
    lrn.stop()


def settled(learner) -> dict:
    """The status once the training thread has written every batch taken: the books add up."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = learner.status_dict()
        written = st["inserted"] + st["rows_unresolved"] + st["rows_failed"]
        if not learner.ingest.staging.qsize() and st["received"] == written:
            return st
        time.sleep(0.002)
    return learner.status_dict()


def assert_refused_alone(learner, before: dict) -> None:
    """One batch refused, and nothing of it received, stored or counted as bytes."""
    after = settled(learner)
    for key in ("received", "inserted", "frames_received", "bytes_received"):
        assert after[key] == before[key], key
    assert after["rejected_batches"] == before["rejected_batches"] + 1


def test_pixel_batches_train_and_publish_conv_weights(learner, channel):
    actor = PixelActor(channel, "pix-a")
    for _ in range(8):
        ack = actor.push(actor.batch(10))
        assert ack.code == 0 and ack.accepted == 10, ack.message
    st = settled(learner)
    assert st["received"] == st["inserted"] == 80 and st["rows_unresolved"] == 0
    assert st["frames_received"] == 80 + 16  # a first frame per 5-step episode
    deadline = time.monotonic() + 60
    while learner.updates < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert learner.updates >= 3
    st = learner.status_dict()
    assert np.isfinite(list(st["losses"].values())).all()
    assert st["replay_bytes_per_transition"] > 0 and st["replay_frame_capacity"] > 1_000
    w = learner.publisher.wait_newer(1, timeout=10)
    assert w is not None and w.arch == "conv"


def test_conv_weights_follow_the_wire_layout(learner):
    """PolicyWeights arch "conv" as proto/herd.proto lays it out, rebuilt here from the message
    alone, gives the learner's own policy mean."""
    sac = learner.sac
    c = STACK * FRAME[0]
    x = torch.randint(0, 256, (4, c, *FRAME[1:]), dtype=torch.uint8)
    with learner._model_lock, torch.no_grad():  # the training thread waits: one set of weights
        msg = sac.policy_weights(7)
        mean, _ = sac.actor(sac.actor_trunk(sac.encoder(x)))
    assert msg.arch == "conv" and list(msg.conv_strides) == [2, 1, 1, 1]
    t = {k: torch.from_numpy(v.copy()) for k, v in codec.unpack_weights(msg)}
    assert t["conv0.weight"].shape == (8, c, 3, 3) and t["conv3.bias"].shape == (8,)
    assert t["trunk.weight"].shape == (16, sac.encoder.repr_dim) and t["trunk_norm.weight"].shape == (16,)
    assert [k for k in t if k.startswith("fc")] == [
        "fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert t["fc0.weight"].shape == (32, 16) and t["fc2.weight"].shape == (2 * ACTION, 32)
    h = x.float() / 255 - 0.5
    for i, s in enumerate(msg.conv_strides):
        h = F.relu(F.conv2d(h, t[f"conv{i}.weight"], t[f"conv{i}.bias"], stride=s))
    h = F.linear(h.flatten(1), t["trunk.weight"], t["trunk.bias"])
    h = torch.tanh(F.layer_norm(h, (16,), t["trunk_norm.weight"], t["trunk_norm.bias"], eps=1e-5))
    for i in range(3):
        h = F.linear(h, t[f"fc{i}.weight"], t[f"fc{i}.bias"])
        h = F.relu(h) if i < 2 else h
    torch.testing.assert_close(h[:, :ACTION], mean, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["prev_not_earlier", "prev_below_minus_one", "obs_beyond_newest",
                                  "next_not_after_obs", "negative_obs", "frames_bytes_short"])
def test_a_malformed_frame_batch_is_rejected_and_nothing_stored(learner, channel, kind):
    actor = PixelActor(channel, f"bad-{kind}")
    before = settled(learner)
    b = actor.batch(4)
    if kind == "prev_not_earlier":
        b["frame_prev"][2] = b["first_frame"] + 2
    elif kind == "prev_below_minus_one":
        b["frame_prev"][1] = -2
    elif kind == "obs_beyond_newest":
        b["obs_frame"][0] = b["first_frame"] + len(b["frame_prev"])
    elif kind == "next_not_after_obs":
        b["next_frame"][3] = b["obs_frame"][3]
    elif kind == "negative_obs":
        b["obs_frame"][1] = -1
    elif kind == "frames_bytes_short":
        b["frames"] = b["frames"][:-1]
    ack = actor.push(b)
    assert ack.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and ack.accepted == 0
    assert "\n" not in ack.message and ack.message
    assert_refused_alone(learner, before)
    assert actor.push(actor.batch(2)).accepted == 2  # the stream and the actor go on


def test_a_pixel_learner_saves_and_restores_its_networks(learner, tmp_path):
    learner.save(str(tmp_path / "ck"), save_replay=True)
    assert not (tmp_path / "ck" / "replay.pt").exists()  # the frame replay stays out
    other = Learner(small_cfg(), pixel_spec(), checkpoint=str(tmp_path / "ck"))
    try:
        state = torch.load(tmp_path / "ck" / "model.pt", weights_only=True)
        saved = state["sac"]
        got = other.sac.state_dict()
        for name in ("encoder", "critic", "actor", "target_encoder"):
            for k, v in saved[name].items():
                torch.testing.assert_close(got[name][k], v)
        torch.testing.assert_close(got["critic_opt"]["exp_avg"], saved["critic_opt"]["exp_avg"])
        assert other.updates == state["updates"] > 0
    finally:
        other.stop()


def test_a_handshake_with_another_frame_stack_is_refused(learner, channel):
    spec = pixel_spec()
    spec.frame_stack = 4
    with pytest.raises(grpc.RpcError) as e:
        pb_grpc.LearnerStub(channel).Handshake(pb.HandshakeRequest(actor_id="s4", spec=spec))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "frame_stack: learner has 3, actor sent 4" in e.value.details()
