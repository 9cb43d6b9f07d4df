"""EnvActor: E environments stepped in lockstep through one CPU policy, pushing to the learner.

The driver runs it as a Ray actor (num_cpus=1, restarted on death). Stepping starts in the
constructor, so a restarted actor resumes on its own.

torch and the policy are imported on a thread of their own beside the first (random) warm-up
steps, the envs (MuJoCo) in the constructor: the job's controller imports this module for the
actor class alone and needs none of them.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from herd.actors.client import LearnerClient
from herd.actors.config import ActorConfig, EnvConfig
from herd.actors.nstep import NStep, transition_rows
from herd.actors.priority import lower_priority
from herd.proto import codec
from herd.proto.heap import steady_heap

if TYPE_CHECKING:
    from herd.actors.policy import MLPPolicy

log = logging.getLogger("herd.actor")


class EnvActor:
    def __init__(self, actor_id: str, env_cfg: EnvConfig, cfg: ActorConfig, learner_address: str,
                 token: str | None = None, seed: int = 0, weights_address: str | None = None):
        """`weights_address`: where to watch for weights when not the learner (the node's relay)."""
        from herd.proto.timing import process_started

        # the start-up timeline's actors_* phases (cluster/startup.py), this process's clock
        self.startup_unix = {"process": process_started(), "init": time.time()}
        lower_priority(cfg.nice)  # before the threads below: they inherit it
        # torch (seconds of CPU) comes in beside the first warm-up steps, which take random
        # actions: only the policy needs it, and _on_weights waits for it
        self._torch = threading.Thread(target=self._import_torch, args=(seed,), daemon=True,
                                       name="herd-torch")
        self._torch.start()
        from herd.actors.envs import describe
        from herd.actors.stepper import VecStepper

        steady_heap()  # batches and weights reuse heap blocks instead of fresh page-faulted maps
        self.actor_id, self.env_cfg, self.cfg = actor_id, env_cfg, cfg
        threads = cfg.step_threads or max(1, int(cfg.num_cpus))
        self.stepper = VecStepper(env_cfg, cfg.num_envs, seed=seed, threads=threads,
                                  fast=cfg.fast_mujoco)
        d = describe(self.stepper.envs[0])
        self.low, self.high = d["action_low"], d["action_high"]
        # pixel envs: obs_shape is one camera frame, the policy acts on the last frame_stack
        self.frame_stack, self.frame_shape = int(d.get("frame_stack", 0)), tuple(d["obs_shape"])
        spec = codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                                   self.low, self.high, frame_stack=self.frame_stack,
                                   state_dim=d["state_dim"])
        # warm-up actions and the policy's exploration noise, both from the actor's seed
        self.rng = np.random.default_rng(seed)  # (the noise's generator: _import_torch)
        self._policy: MLPPolicy | None = None
        self._has_policy = threading.Event()
        self.client = LearnerClient(learner_address, actor_id, spec, token=token,
                                    window=cfg.window,
                                    backoff=(cfg.reconnect_initial_s, cfg.reconnect_max_s),
                                    on_weights=self._on_weights, tls_ca=cfg.tls_ca,
                                    weights_address=weights_address)
        self.steps = 0
        self.random_steps = 0  # env steps taken with uniform random actions (the warm-up)
        self.episodes = 0
        self.returns: collections.deque[float] = collections.deque(maxlen=100)
        self.lengths: collections.deque[int] = collections.deque(maxlen=100)
        self._lags: collections.deque[int] = collections.deque(maxlen=64)
        self._started = time.monotonic()
        self._rate = (self._started, 0, 0.0)  # (time, steps, steps/s) of the last stats() call
        # where the stepping thread's time goes: cumulative seconds and the steps they cover,
        # one snapshot replaced at each push (read by stats())
        self._time = {"policy": 0.0, "env": 0.0, "push": 0.0, "wall": 0.0, "cpu": 0.0, "steps": 0}
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="herd-step")
        self._thread.start()

    @property
    def env_errors(self) -> int:
        return self.stepper.env_errors

    def _import_torch(self, seed: int) -> None:
        import torch

        import herd.actors.policy  # noqa: F401 -- the policy's module too, off the stepping path

        torch.set_num_threads(1)
        self.noise = torch.Generator().manual_seed(seed)

    def _on_weights(self, weights) -> None:
        # Built off the stepping thread, then swapped in with one assignment: no stall.
        self._torch.join()
        from herd.actors.policy import MLPPolicy

        self._policy = MLPPolicy(weights, self.low, self.high)
        self._has_policy.set()

    def _run(self) -> None:
        try:
            self._loop_pixels() if self.frame_stack else self._loop()
        except BaseException as e:
            self._error = e
            log.exception("actor %s stopped on an error", self.actor_id)

    def _loop(self) -> None:
        E, K = self.cfg.num_envs, self.cfg.steps_per_push
        st = self.stepper
        a_dim = self.low.shape[0]
        # n-step rows (actors/nstep.py): each vector step's one-step rows go to a scratch
        # batch, the accumulator writes the finished n-step rows into the push batch.
        acc = NStep(E, st.obs_dim, a_dim, self.cfg.n_step, self.cfg.gamma) if self.cfg.n_step > 1 else None
        per_step = acc.max_rows_per_step() if acc else E
        rows = max(K * E, per_step)
        # One preallocated batch; every vector step fills E rows of it in place.
        buf = transition_rows(rows, st.obs_dim, a_dim, discount=acc is not None)
        one = transition_rows(E, st.obs_dim, a_dim) if acc else None
        n = 0
        version = 0
        clock = time.perf_counter
        wall0, cpu0 = clock(), time.thread_time()
        t_policy = t_env = t_push = 0.0
        if not self._await_policy():
            return
        while not self._stop.is_set():
            policy = self._policy
            dst, s = (one, slice(0, E)) if acc else (buf, slice(n, n + E))
            # ---- hot loop: act on all E observations at once, step, write rows in place ----
            t0 = clock()
            dst["obs"][s] = st.obs
            if self.steps < self.cfg.warmup_steps or policy is None:
                dst["action"][s] = self.rng.uniform(self.low, self.high, (E, a_dim))
                version = 0
                self.random_steps += E
            else:
                dst["action"][s] = policy.act(st.obs, generator=self.noise)
                version = policy.version
            t1 = clock()
            out = st.step(dst["action"][s], dst["next_obs"][s], dst["reward"][s],
                          dst["terminated"][s])
            t2 = clock()
            t_policy += t1 - t0
            t_env += t2 - t1
            steps = int(out.ok.sum())
            if acc:
                n += acc.add(one["obs"], one["action"], one["reward"], one["next_obs"],
                             one["terminated"], out.done, out.ok, buf, n)
            elif steps < E:  # a recreated env's row is no transition: close the gap
                keep = np.flatnonzero(out.ok) + n
                for v in buf.values():
                    v[n:n + steps] = v[keep]
                n += steps
            else:
                n += E
            self.steps += steps
            for ret, length in out.episodes:
                self.returns.append(ret)
                self.lengths.append(length)
            self.episodes += len(out.episodes)
            if n + per_step > rows:
                self._push({k: v[:n] for k, v in buf.items()}, version)
                n = 0
                t3 = clock()
                t_push += t3 - t2
                self._time = {"policy": t_policy, "env": t_env, "push": t_push, "wall": t3 - wall0,
                              "cpu": time.thread_time() - cpu0, "steps": self.steps}
        if acc:  # pending n-step rows leave truncated where the envs stand; they fit: the
            # loop leaves room for a step's worst case (per_step), more than can be pending
            n += acc.flush_all(st.obs, buf, n)
        if n:  # what was stepped before stop still reaches the learner
            self._push({k: v[:n] for k, v in buf.items()}, version)

    def _loop_pixels(self) -> None:
        """The loop of a pixel env (actors/frames.py): the policy acts on each env's stack of
        frames; each new frame is numbered and sent once, rows name frames by number."""
        from herd.actors.frames import FrameRows

        E, st = self.cfg.num_envs, self.stepper
        a_dim = self.low.shape[0]
        fr = FrameRows(st.obs, self.frame_shape, self.frame_stack, a_dim,
                       self.cfg.steps_per_push * E, self.cfg.n_step, self.cfg.gamma, st.state)
        version = 0
        clock = time.perf_counter
        wall0, cpu0 = clock(), time.thread_time()
        t_policy = t_env = t_push = 0.0
        if not self._await_policy():
            return
        while not self._stop.is_set():
            policy = self._policy
            t0 = clock()
            if self.steps < self.cfg.warmup_steps or policy is None:
                fr.begin(self.rng.uniform(self.low, self.high, (E, a_dim)))
                version = 0
                self.random_steps += E
            else:
                fr.begin(policy.act(fr.stacks(), generator=self.noise))
                version = policy.version
            t1 = clock()
            out = st.step(fr.one["action"], fr.next_frames, fr.one["reward"], fr.one["terminated"])
            t2 = clock()
            fr.end(st.obs, out.ok, out.done, st.state, st.next_state)
            t_policy += t1 - t0
            t_env += t2 - t1
            self.steps += int(out.ok.sum())
            for ret, length in out.episodes:
                self.returns.append(ret)
                self.lengths.append(length)
            self.episodes += len(out.episodes)
            if fr.full():
                self._push(fr.take(), version)
                t3 = clock()
                t_push += t3 - t2
                self._time = {"policy": t_policy, "env": t_env, "push": t_push, "wall": t3 - wall0,
                              "cpu": time.thread_time() - cpu0, "steps": self.steps}
        fr.flush()
        if fr.n:
            self._push(fr.take(), version)

    def _await_policy(self) -> bool:
        """With actors.wait_for_policy: block until the first policy arrived; False when the
        actor was stopped first."""
        while self.cfg.wait_for_policy and not self._has_policy.wait(0.1):
            if self._stop.is_set():
                return False
        return True

    def _push(self, arrays: dict, version: int) -> None:
        # push() packs (copies) the rows into the message before returning: no copy here.
        self._lags.append(max(0, self.client.policy_version - version) if version else 0)
        self.client.push(arrays, version)

    # ---- control (Ray calls; concurrent with stepping) ----
    def stats(self) -> dict:
        c = self.client.stats
        tm = self._time  # one push's snapshot: its parts and steps agree
        now = time.monotonic()
        elapsed = max(now - self._started, 1e-9)
        t0, s0, recent = self._rate
        if now - t0 >= 1.0:  # steps/s since the previous call (at least 1 s apart)
            recent = (self.steps - s0) / (now - t0)
            self._rate = (now, self.steps, recent)
        return {
            "actor_id": self.actor_id,
            "pid": os.getpid(),
            "steps": self.steps,
            "random_steps": self.random_steps,
            "sent": c["sent"],
            "acked": c["acked"],
            "rejected": c["rejected"],
            "refused": c["refused"],  # pushes the learner turned away (full: max_actors)
            "bytes_sent": c["bytes_sent"],
            "episodes": self.episodes,
            "mean_return": float(np.mean(self.returns)) if self.returns else None,
            "mean_length": float(np.mean(self.lengths)) if self.lengths else None,
            "steps_per_s": self.steps / elapsed,
            "recent_steps_per_s": recent,
            "policy_version": self.client.policy_version,
            "policy_lag": float(np.mean(self._lags)) if self._lags else 0.0,
            "push_latency_ms": 1e3 * self.client.push_latency_s,
            "push_wait_s": self.client.wait_s,
            "in_flight": self.client.in_flight,
            "fast_path": self.stepper.fast,
            "stepper_path": self.stepper.path,
            "startup_unix": self.startup_unix,  # process, init: unix times (cluster/startup.py)
            "step_threads": self.stepper.threads,
            "reconnects": self.client.reconnects,
            "disconnects": dict(self.client.disconnects),
            # stepping thread up to the last push: seconds acting, env stepping, handing batches
            # to the sender (blocks on a full window), wall, the thread's own CPU; env steps
            "time_s": tm,
            "env_us_per_step": 1e6 * tm["env"] / max(tm["steps"], 1),
            "policy_us_per_step": 1e6 * tm["policy"] / max(tm["steps"], 1),
            "env_errors": self.env_errors,
            "error": repr(self._error) if self._error else None,
        }

    def pin(self, cores: list[int]) -> list[int]:
        """Bind every thread of this process to `cores` (Linux); returns the process's set."""
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), cores)
            except OSError:  # the thread ended meanwhile
                pass
        return sorted(os.sched_getaffinity(0))

    def stop(self, timeout: float = 30.0) -> dict:
        """Stop stepping, deliver everything stepped, close; returns final stats."""
        self._stop.set()
        self._thread.join(timeout)
        self.client.flush(timeout)
        stats = self.stats()
        self.client.close()
        self.stepper.close()
        return stats
