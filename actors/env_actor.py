"""EnvActor: E environments stepped in lockstep through one CPU policy, pushing to the learner.

The driver runs it as a Ray actor (num_cpus=1, restarted on death). Stepping starts in the
constructor, so a restarted actor resumes on its own.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time

import numpy as np
import torch

from actors.client import LearnerClient
from actors.config import ActorConfig, EnvConfig
from actors.envs import describe, make_env
from actors.policy import MLPPolicy
from proto import codec

log = logging.getLogger("herd.actor")


class EnvActor:
    def __init__(self, actor_id: str, env_cfg: EnvConfig, cfg: ActorConfig, learner_address: str,
                 token: str | None = None, seed: int = 0):
        torch.set_num_threads(1)
        self.actor_id, self.env_cfg, self.cfg = actor_id, env_cfg, cfg
        self.envs = [make_env(env_cfg) for _ in range(cfg.num_envs)]
        d = describe(self.envs[0])
        self.low, self.high = d["action_low"], d["action_high"]
        spec = codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                                   self.low, self.high)
        self.rng = np.random.default_rng(seed)
        self._policy: MLPPolicy | None = None
        self.client = LearnerClient(learner_address, actor_id, spec, token=token,
                                    window=cfg.window,
                                    backoff=(cfg.reconnect_initial_s, cfg.reconnect_max_s),
                                    on_weights=self._on_weights)
        self.steps = 0
        self.episodes = 0
        self.returns: collections.deque[float] = collections.deque(maxlen=100)
        self.lengths: collections.deque[int] = collections.deque(maxlen=100)
        self.env_errors = 0
        self._seed = seed
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="herd-step")
        self._thread.start()

    def _on_weights(self, weights) -> None:
        # Built off the stepping thread, then swapped in with one assignment: no stall.
        self._policy = MLPPolicy(weights, self.low, self.high)

    def _reset(self, i: int) -> np.ndarray:
        obs, _ = self.envs[i].reset(seed=self._seed * 10_007 + i * 101 + self.episodes)
        return np.asarray(obs, np.float32).ravel()

    def _step_env(self, i: int, action: np.ndarray):
        """env.step, recreating the env (error logged once per kind) if it raises."""
        try:
            return self.envs[i].step(action)
        except Exception as e:
            self.env_errors += 1
            if self.env_errors == 1:
                log.exception("env %d of %s raised in step; recreating it", i, self.actor_id)
            else:
                log.debug("env %d raised again: %r", i, e)
            self.envs[i] = make_env(self.env_cfg)
            return None

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:
            self._error = e
            log.exception("actor %s stopped on an error", self.actor_id)

    def _loop(self) -> None:
        E, K = self.cfg.num_envs, self.cfg.steps_per_push
        obs = np.stack([self._reset(i) for i in range(E)])
        d = obs.shape[1]
        a_dim = self.low.shape[0]
        rows = K * E
        buf = {
            "obs": np.empty((rows, d), np.float32),
            "action": np.empty((rows, a_dim), np.float32),
            "reward": np.empty(rows, np.float32),
            "next_obs": np.empty((rows, d), np.float32),
            "terminated": np.empty(rows, np.uint8),
        }
        ep_ret = np.zeros(E)
        ep_len = np.zeros(E, np.int64)
        n = 0
        version = 0
        while not self._stop.is_set():
            policy = self._policy
            if self.steps < self.cfg.warmup_steps or policy is None:
                action = self.rng.uniform(self.low, self.high, (E, a_dim)).astype(np.float32)
                version = 0
            else:
                action = policy.act(obs)
                version = policy.version
            for i in range(E):
                out = self._step_env(i, action[i])
                if out is None:  # env recreated: no transition from the failed step
                    obs[i] = self._reset(i)
                    ep_ret[i], ep_len[i] = 0, 0
                    continue
                nxt, r, term, trunc, _ = out
                nxt = np.asarray(nxt, np.float32).ravel()
                buf["obs"][n] = obs[i]
                buf["action"][n] = action[i]
                buf["reward"][n] = r
                buf["next_obs"][n] = nxt
                buf["terminated"][n] = bool(term)
                n += 1
                self.steps += 1
                ep_ret[i] += r
                ep_len[i] += 1
                if term or trunc:
                    self.returns.append(float(ep_ret[i]))
                    self.lengths.append(int(ep_len[i]))
                    self.episodes += 1
                    ep_ret[i], ep_len[i] = 0, 0
                    obs[i] = self._reset(i)
                else:
                    obs[i] = nxt
                if n == rows:
                    self.client.push({k: v.copy() for k, v in buf.items()}, version)
                    n = 0
        if n:  # what was stepped before stop still reaches the learner
            self.client.push({k: v[:n].copy() for k, v in buf.items()}, version)

    # ---- control (Ray calls; concurrent with stepping) ----
    def stats(self) -> dict:
        c = self.client.stats
        elapsed = max(time.monotonic() - self._started, 1e-9)
        return {
            "actor_id": self.actor_id,
            "pid": os.getpid(),
            "steps": self.steps,
            "sent": c["sent"],
            "acked": c["acked"],
            "rejected": c["rejected"],
            "bytes_sent": c["bytes_sent"],
            "episodes": self.episodes,
            "mean_return": float(np.mean(self.returns)) if self.returns else None,
            "mean_length": float(np.mean(self.lengths)) if self.lengths else None,
            "steps_per_s": self.steps / elapsed,
            "policy_version": self.client.policy_version,
            "push_latency_ms": 1e3 * self.client.push_latency_s,
            "reconnects": self.client.reconnects,
            "env_errors": self.env_errors,
            "error": repr(self._error) if self._error else None,
        }

    def stop(self, timeout: float = 30.0) -> dict:
        """Stop stepping, deliver everything stepped, close; returns final stats."""
        self._stop.set()
        self._thread.join(timeout)
        self.client.flush(timeout)
        stats = self.stats()
        self.client.close()
        for env in self.envs:
            env.close()
        return stats
