"""The env's state beside each frame (learner.encoder.privileged_critic): the frame replay's
state rows against what the actors sent, kept plainly here, across the frame ring's wraparound;
and a real privileged pixel learner on loopback that asks for the state in its handshake reply,
trains on it, and refuses a malformed state field (wrong length, NaN, Inf, missing, or sent
where no state is read) with INVALID_ARGUMENT, storing nothing."""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest
import torch

from herd.learner.learner import Learner
from herd.learner.replay.frames import FrameReplay
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.replay.test_frame_replay import SHAPE, STACK, Actor, Reference
from tests.learner.rpc.test_bad_input import Stream, rows
from tests.learner.test_frame_learner import PixelActor, assert_refused_alone, pixel_spec, settled, small_cfg
from tests.pixels import DRQ_STEPS

DIM = 5
IA, FP = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION


class StateActor(Actor):
    """test_frame_replay's actor, each frame sent with a random state it remembers."""

    def __init__(self, *args):
        super().__init__(*args)
        self.states: dict[int, np.ndarray] = {}

    def batch(self) -> dict:
        nums = [n for n, _ in self.sent]
        for n in nums:
            self.states[n] = self.rng.normal(size=DIM).astype(np.float32)
        out = super().batch()
        out["frame_state"] = np.array([self.states[n] for n in nums], np.float32).reshape(-1, DIM)
        return out


def test_state_rows_match_what_the_actors_sent_across_wraparound():
    fcap = 40
    replay = FrameReplay(32, SHAPE, STACK, 1, torch.device("cpu"), window=64, frame_capacity=fcap,
                         state_dim=DIM)
    ref = Reference(fcap)
    actors = {"a": StateActor("a", 1, 2, 1), "b": StateActor("b", 2, 3, 2)}
    checked = 0
    for i in range(60):
        actor = actors["ab"[i % 2]]
        for _ in range(int(actor.rng.integers(1, 6))):
            actor.step()
        b = actor.batch()
        assert replay.insert(b) == ref.add(b)
        start, count = (int(x) for x in replay.window_t)
        got = replay.gather((start + torch.arange(count)) % replay.capacity)
        for j, (name, o, x) in enumerate(ref.rows[len(ref.rows) - count:]):
            if not ref.alive((name, o)):  # never sampled (test_frame_replay.py)
                continue
            np.testing.assert_array_equal(got["obs_state"][j].numpy(), actors[name].states[o])
            np.testing.assert_array_equal(got["next_state"][j].numpy(), actors[name].states[x])
            checked += 1
    assert replay.written > 3 * fcap and checked > 500
    sampled = replay.sample(16)
    assert sampled["obs_state"].shape == sampled["next_state"].shape == (16, DIM)
    assert replay.nbytes - FrameReplay(32, SHAPE, STACK, 1, torch.device("cpu"), window=64,
                                       frame_capacity=fcap).nbytes == fcap * DIM * 4


def state_spec(dim: int = DIM) -> pb.EnvSpec:
    spec = pixel_spec()
    spec.state_dim = dim
    return spec


class StateSender(PixelActor):
    """test_frame_learner's actor with a state spec: each new frame's state in frame_state."""

    def __init__(self, channel, actor_id: str, seed: int = 0):
        super().__init__(channel, actor_id, seed, state_spec())

    def batch(self, rows: int) -> dict:
        b = super().batch(rows)
        b["frame_state"] = self.rng.normal(size=(len(b["frames"]), DIM)).astype(np.float32)
        return b


@pytest.fixture(scope="module")
def learner():
    lrn = Learner(small_cfg(privileged_critic=True), state_spec())
    yield lrn
    lrn.stop()


def test_a_privileged_learner_asks_for_the_state_and_trains_on_it(learner, channel):
    actor = StateSender(channel, "ok")
    assert actor.reply.state_dim == DIM
    for _ in range(12):
        ack = actor.push(actor.batch(8))
        assert ack.code == 0 and ack.accepted == 8, ack.message
    deadline = time.monotonic() + 60
    while learner.status_dict()["updates"] < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    st = learner.status_dict()
    assert st["updates"] >= 5 and all(np.isfinite(v) for v in st["losses"].values())
    assert learner.sac.critic.obs_dim == DIM and learner.buffer.state_dim == DIM


@pytest.mark.parametrize("kind", ["short", "long", "nan", "inf", "missing"])
def test_a_malformed_state_field_is_rejected_and_nothing_stored(learner, channel, kind):
    actor = StateSender(channel, f"bad-{kind}")
    before = settled(learner)
    b = actor.batch(4)
    if kind == "short":
        b["frame_state"] = b["frame_state"][:, :-1]
    elif kind == "long":
        b["frame_state"] = np.concatenate([b["frame_state"], b["frame_state"][:1]])
    elif kind == "nan":
        b["frame_state"][1, 2] = np.nan
    elif kind == "inf":
        b["frame_state"][0, 0] = -np.inf
    else:
        del b["frame_state"]
    ack = actor.push(b)
    assert ack.code == IA.value[0] and ack.accepted == 0, ack.message
    assert "frame_state" in ack.message and "\n" not in ack.message
    assert_refused_alone(learner, before)
    assert actor.push(actor.batch(2)).accepted == 2  # the stream and the actor go on


def test_a_handshake_with_another_state_dim_is_refused(learner, channel):
    with pytest.raises(grpc.RpcError) as e:
        pb_grpc.LearnerStub(channel).Handshake(pb.HandshakeRequest(actor_id="s4", spec=state_spec(4)))
    assert e.value.code() == FP and "state_dim" in e.value.details()


def test_a_frames_only_learner_asks_for_no_state_and_refuses_it():
    lrn = Learner(small_cfg(), state_spec())  # the env has a state; the critics read frames
    try:
        ch = grpc.insecure_channel(lrn.address())
        actor = StateSender(ch, "frames-only")
        assert actor.reply.state_dim == 0
        before = settled(lrn)
        ack = actor.push(actor.batch(4))
        assert ack.code == IA.value[0] and "frame_state" in ack.message
        assert settled(lrn)["inserted"] == before["inserted"]
        b = actor.batch(3)
        del b["frame_state"]
        assert actor.push(b).accepted == 3
        ch.close()
    finally:
        lrn.stop()


def test_a_state_field_in_a_state_job_is_rejected(make_learner):
    lrn = make_learner()
    ch = grpc.insecure_channel(lrn.address())
    stub = pb_grpc.LearnerStub(ch)
    sid = stub.Handshake(pb.HandshakeRequest(actor_id="s", spec=lrn.spec)).session_id
    stream = Stream(ch)
    msg = codec.pack_batch(rows(4), session_id=sid, actor_id="s", seq=1, policy_version=0)
    msg.frame_state = np.zeros(4 * DIM, np.float32).tobytes()
    before = lrn.status_dict()
    ack = stream.send(msg)
    assert ack.code == IA.value[0] and "frame" in ack.message
    msg.frame_state = b""
    msg.seq = 2
    assert stream.send(msg).accepted == 4
    assert lrn.status_dict()["received"] == before["received"] + 4
    stream.close()
    ch.close()


@pytest.mark.parametrize("layout", ["now", "encoder.pixel_*"])
def test_a_privileged_checkpoint_gives_back_the_frames_policy_it_published(tmp_path, layout):
    """weights_from_checkpoint (herd evaluate, herd export of a checkpoint) on a real pixel env
    whose state the critics read: the policy it rebuilds is the published one, frames in; a run
    saved when the pixel update read encoder.pixel_* (its hidden layers among them) too."""
    from herd.actors.config import EnvConfig
    from herd.actors.envs import describe, make_env
    from herd.checkpoint import weights_from_checkpoint
    from herd.learner.config import LearnerConfig
    from herd.learner.update.pixel_sac import PixelSAC

    env_cfg = EnvConfig(id="InvertedPendulum-v5", pixels={"size": 32, "frame_stack": 3})
    env = make_env(env_cfg)
    d = describe(env)
    env.close()
    assert d["state_dim"] == 4
    cfg = LearnerConfig.flat(device="cpu", feature_dim=8, channels=4, layers=2,
                             hidden_sizes=(16,), privileged_critic=True, **DRQ_STEPS)
    sac = PixelSAC(cfg.algorithm, cfg.encoder, cfg.compute, cfg.replay.batch_size, d["obs_shape"], 3,
                   1, d["action_low"], d["action_high"], "cpu", d["state_dim"])
    saved = cfg.model_dump()
    if layout != "now":  # the algorithm section held the state update's defaults
        saved["algorithm"] = LearnerConfig().algorithm.model_dump()
        saved["encoder"].update(pixel_hidden_sizes=[16], pixel_lr=1e-3, pixel_batch_size=256,
                                pixel_tau=0.01, pixel_init_alpha=0.1)
    (tmp_path / "ck").mkdir()
    torch.save({"sac": sac.state_dict(), "config": saved, "policy_version": 3},
               tmp_path / "ck" / "model.pt")
    got = weights_from_checkpoint(tmp_path / "ck", env_cfg)
    want = sac.policy_weights(3)
    assert got.arch == "conv" and got.version == 3
    assert [(t.name, t.data) for t in got.tensors] == [(t.name, t.data) for t in want.tensors]
