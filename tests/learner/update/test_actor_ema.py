"""learner.algorithm.actor_ema: an averaged copy of the actor, lerped toward the live one once per update
(against a plain reference), rolled back with the warm-up, carried by checkpoints, and what the
evaluation paths hand out (the learner's policy_for_eval and save_for_eval, a checkpoint's)."""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
import torch

from herd.learner.graph.capture import GraphedUpdate
from herd.proto import codec
from tests.learner.update.test_sac_family import FAMILY, make


def live_flat(sac) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in sac.actor.parameters()]).clone()


def avg_flat(sac) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in sac.actor_avg.parameters()]).clone()


@pytest.mark.parametrize("family", [False, True])
def test_the_average_follows_a_plain_reference_ema_of_the_live_actor(family) -> None:
    tau = 0.2
    sac, buf = make(actor_ema=tau, **(FAMILY if family else {}))
    ref = live_flat(sac)
    assert torch.equal(avg_flat(sac), ref)  # it starts at the initial actor
    for _ in range(6):
        sac.update(buf)
        ref = ref + tau * (live_flat(sac) - ref)
    torch.testing.assert_close(avg_flat(sac), ref, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(avg_flat(sac), live_flat(sac))  # it lags the live actor


def test_the_averaged_policy_is_what_policy_weights_packs_when_asked() -> None:
    sac, buf = make(actor_ema=0.1)
    for _ in range(4):
        sac.update(buf)
    live = dict(codec.unpack_weights(sac.policy_weights(7)))
    avg = dict(codec.unpack_weights(sac.policy_weights(7, averaged=True)))
    assert live.keys() == avg.keys()
    w = next(k for k in live if k.endswith("weight"))
    assert not np.allclose(live[w], avg[w])
    np.testing.assert_allclose(avg[w], dict(sac.actor_avg.wire_tensors())[w])
    off, _ = make()
    assert off.actor_avg is None
    assert off.policy_weights(3, averaged=True) == off.policy_weights(3)  # nothing to average


def test_warm_up_rolls_the_average_back_and_checkpoints_carry_it() -> None:
    sac, buf = make(actor_ema=0.1)
    sac.update(buf)
    before = avg_flat(sac)
    GraphedUpdate(sac, buf).warm_rollback_check()
    assert torch.equal(avg_flat(sac), before)
    state = copy.deepcopy(sac.state_dict())
    other, _ = make(seed=1, actor_ema=0.1)
    other.load_state_dict(state)
    assert torch.equal(avg_flat(other), before)
    old = {k: v for k, v in state.items() if k != "actor_avg"}  # saved before actor_ema existed
    other.load_state_dict(old)
    assert torch.equal(avg_flat(other), live_flat(sac))  # the average starts at its actor


def test_the_learner_hands_out_the_averaged_policy_for_evaluations(make_learner, tmp_path, env_cfg) -> None:
    from herd.actors.config import ActorConfig
    from herd.actors.env_actor import EnvActor
    from herd.evaluation import weights_from_checkpoint

    learner = make_learner(actor_ema=0.05, min_size=200, ratio=None)
    actor = EnvActor("t-ema", env_cfg, ActorConfig(num_envs=4, steps_per_push=8, warmup_steps=64),
                     learner.address(), seed=1)
    deadline = time.monotonic() + 30
    while learner.trainer.updates < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    actor.stop()
    assert learner.trainer.updates >= 40
    live = dict(codec.unpack_weights(learner.weights()))
    ev = learner.policy_for_eval()
    w = next(k for k in live if k.endswith("weight"))
    assert not np.allclose(dict(codec.unpack_weights(ev))[w], live[w])
    saved = learner.save_for_eval(str(tmp_path / "ckpt"))
    from_ckpt = weights_from_checkpoint(tmp_path / "ckpt", env_cfg)
    assert from_ckpt.version == saved.version
    for (k, a), (_, b) in zip(codec.unpack_weights(saved), codec.unpack_weights(from_ckpt)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=k)  # what was evaluated
