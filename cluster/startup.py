"""A job's start-up: the timeline summary.json reports, and the env spec worked out once.

Timeline phases, in seconds since `herd submit` ($HERD_SUBMIT_UNIX; else since the driver
process began), keys `<phase>_s` in summary.json's "startup":

    submitted        `herd submit` checked the config, built the env and sent the job to Ray
    driver_exec      the driver's process began (Ray Jobs' supervisor actor started it)
    driver_process   the driver's Python reached herd.driver (interpreter, site, `import herd`)
    driver_imported  herd.driver's imports done (ray, the config models, the actor classes)
    config_parsed    the job's config read and validated
    ray_joined       the driver joined the cluster
    env_spec         the env's spec known (from `herd submit`, or built here)
    driver_ready     the cluster checked; the learner is asked for next
    learner_process  the learner actor's worker process began; `submitted` when Ray
                     prestarted it (a job without runtime_env env_vars takes those workers)
    learner_init     Learner.__init__ entered (Ray's worker booted, herd.learner.learner imported)
    learner_torch    torch and the learner's modules imported
    learner_device   the device ready (on CUDA, its context opened)
    learner_buffer   the replay ring allocated
    learner_sac      the SAC networks and optimizers built
    learner_listening  the learner's gRPC server answers (as the driver sees it); after
                     learner_sac it waits for its ingest: on CUDA, processes of its own,
                     booted first thing in learner_init (learner/ingest/processes.py)
    actors_process   the last env actor's worker process began
    actors_init      the last env actor's EnvActor.__init__ entered
    actors_ready     every env actor answered
    first_rows       the replay ring took its first rows (the training thread's own time)
    first_update     the first SAC update was made (on CUDA, by the uncompiled graph while the
                     compiled one is built: learner.compute.graph_in_background), the training
                     thread's own time; a learner without it: when a poll first saw it
    first_compiled_update  the first update of the compiled/captured graph, at the time the
                     learner reports (first_compiled_unix, its clock); null on the CPU and
                     when the learner gave the graph up (its graph_error says why)
    first_eval       the first periodic evaluation came back

The learner_* and actors_* marks are those processes' own clocks (`startup_unix` in their
status; on another node, as far apart as the clocks are). Until the first update the driver
polls the learner and the actors every quarter second (its supervise loop looks only every
run.log_every_s). bench/startup.py prints them side by side.
"""

from __future__ import annotations

import json
import os
import threading
import time

from herd.proto.timing import process_started

SUBMIT_ENV = "HERD_SUBMIT_UNIX"
SPEC_ENV = "HERD_ENV_SPEC"  # the env's spec as `herd submit` built it: the driver builds no env
SENT_ENV = "HERD_SUBMIT_SENT_UNIX"  # when `herd submit` handed the job to Ray
GCS_ENV = "HERD_GCS_ADDRESS"  # the GCS of the cluster `herd up` recorded, which the driver joins
START_OVER_S = 180.0
"""Seconds after which a job's start counts as over even without a compiled graph."""
PHASES = ("submitted", "driver_exec", "driver_process", "driver_imported", "config_parsed",
          "ray_joined", "env_spec", "driver_ready", "learner_process", "learner_init",
          "learner_torch", "learner_device", "learner_buffer", "learner_sac", "learner_listening",
          "actors_process", "actors_init", "actors_ready", "first_rows", "first_update",
          "first_compiled_update", "first_eval")

GRAPH_KEYS = ("capture_s", "graph_swap_s", "uncompiled_capture_s", "prepare_cpu_s",
              "prepare_compile_s", "prepare_kernel_wait_s", "prepare_threads_cpu_s", "eager_updates",
              "graph_error", "startup_update_gap_s", "startup_update_gap_at_s", "max_update_gap_s")
"""The learner status's graph fields (learner/graph/capture.py graph_stats, which says what each
means) and its update stream's longest pauses (learner/graph/update_gaps.py: in the first 90 s after
the first update, and over the whole run) that summary.json's "startup" carries after the
phases: one list for the driver and bench/startup.py (both torch-free, so not their modules)."""


def spec_to_env(env_id: str, spec: dict) -> str:
    """config.check_env's dict for `env_id` as JSON, for $HERD_ENV_SPEC."""
    return json.dumps({"env_id": env_id, "obs_shape": list(spec["obs_shape"]),
                       "obs_dtype": spec["obs_dtype"], "frame_stack": int(spec.get("frame_stack", 0)),
                       "state_dim": int(spec.get("state_dim", 0)),
                       "action_shape": list(spec["action_shape"]),
                       "action_low": [float(x) for x in spec["action_low"]],
                       "action_high": [float(x) for x in spec["action_high"]]})


def spec_from_env(env_id: str) -> dict | None:
    """The spec `herd submit` handed over for `env_id` ($HERD_ENV_SPEC), as check_env returns
    it; None when there is none (then the driver makes the env itself)."""
    raw = os.environ.get(SPEC_ENV)
    if not raw:
        return None
    import numpy as np

    d = json.loads(raw)
    if d.get("env_id") != env_id:
        return None
    return {"obs_shape": tuple(d["obs_shape"]), "obs_dtype": d["obs_dtype"],
            "frame_stack": int(d.get("frame_stack", 0)), "state_dim": int(d.get("state_dim", 0)),
            "action_shape": tuple(d["action_shape"]),
            "action_low": np.asarray(d["action_low"], np.float32),
            "action_high": np.asarray(d["action_high"], np.float32)}


class Timeline:
    """Marks of the start-up phases (time.time()), first one wins; see the module docstring."""

    def __init__(self, started: float):
        self.zero = float(os.environ.get(SUBMIT_ENV) or started)
        self.marks = {"driver_process": started}
        for name, at in (("submitted", os.environ.get(SENT_ENV)), ("driver_exec", process_started())):
            if at:
                self.marks[name] = float(at)
        self.compiled = False  # set by the driver: the learner runs a compiled/captured graph
        self.poll_errors, self.last_poll_error = 0, None  # the start-up poll's (a learner booting)
        self._stop = threading.Event()

    def mark(self, name: str, at: float | None = None) -> None:
        if name not in self.marks:
            self.marks[name] = time.time() if at is None else at
            if name in ("first_update", "first_compiled_update"):
                print(f"[herd] {name.replace('_', ' ')} {self.marks[name] - self.zero:.1f} s "
                      f"after {self.since()}", flush=True)

    def observe(self, st: dict) -> None:
        """A status (the controller's, or the start-up poll's: learner and actors)."""
        actors, ls = st.get("actors", []), st["learner"]
        self.observe_learner(ls)
        if actors and not any(a.get("error") for a in actors):
            for part in ("process", "init"):  # the last actor's
                ats = [a["startup_unix"][part] for a in actors if (a.get("startup_unix") or {}).get(part)]
                if len(ats) == len(actors):
                    self.mark(f"actors_{part}", self._joined(max(ats)) if part == "process" else max(ats))
            self.mark("actors_ready")
        own = ls.get("startup_unix") or {}  # the learner's own times, where it has them
        if ls.get("inserted"):
            self.mark("first_rows", own.get("first_rows"))
        if ls.get("updates"):  # not after the compiled one, which may be this very update
            now = own.get("first_update") or time.time()
            self.mark("first_update", min(now, ls.get("first_compiled_unix") or now))
        self.observe_graph(ls)

    def observe_learner(self, ls: dict) -> None:
        """learner_process .. learner_sac at the learner's own times of them (its status's
        startup_unix: process, init, device, buffer, sac)."""
        for part, at in (ls.get("startup_unix") or {}).items():
            if at and f"learner_{part}" in PHASES:
                self.mark(f"learner_{part}", self._joined(at) if part == "process" else at)

    def _joined(self, began: float) -> float:
        """A process's start as the job's: a worker Ray prestarted began before the job was
        submitted, and counts from the submission (not a negative time before it)."""
        return max(began, self.marks.get("submitted", self.zero))

    def observe_graph(self, ls: dict) -> None:
        """first_compiled_update at the learner's own time of it (first_compiled_unix), so a
        late poll is fine: the driver also hands over the learner's final status."""
        if ls.get("first_compiled_unix"):
            self.mark("first_compiled_update", ls["first_compiled_unix"])
        elif ("first_compiled_unix" not in ls and "first_update" in self.marks and self.compiled
              and str(ls.get("device", "")).startswith("cuda")):
            # a status without the field (a learner from before it): compiled from the start
            self.mark("first_compiled_update", self.marks["first_update"])

    def over(self, ls: dict, elapsed: float) -> bool:
        """The job's start is over: its first update came and, where a compiled graph is being
        built in the background on the GPU, that graph took over (or the job has run
        START_OVER_S, whatever became of the compile). Work that only helps the next job (the
        spare workers, herd/pool.py) waits for it: a fully booked node's cores are the start's."""
        if "first_update" not in self.marks:
            return False
        background = self.compiled and str(ls.get("device", "")).startswith("cuda")
        return (not background or "first_compiled_update" in self.marks
                or bool(ls.get("graph_error")) or elapsed >= START_OVER_S)

    def watch(self, learner, controller, every_s: float = 0.25) -> None:
        """Poll the learner (and, until all answered, the actors) on a thread of its own until
        the first update or close()."""
        import ray

        def poll():
            while not self._stop.is_set() and "first_update" not in self.marks:
                try:
                    ls = ray.get(learner.status_dict.remote(), timeout=10)
                    actors = ([] if "actors_ready" in self.marks
                              else ray.get(controller.actor_stats.remote(1.0), timeout=10))
                    self.observe({"learner": ls, "actors": actors})
                except Exception as e:  # noqa: BLE001 -- booting or restarting: the next poll sees it
                    self.poll_errors += 1
                    self.last_poll_error = repr(e)
                self._stop.wait(every_s)

        threading.Thread(target=poll, name="herd-startup", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def since(self) -> str:
        return "herd submit" if os.environ.get(SUBMIT_ENV) else "driver start"

    def seconds(self, **extra) -> dict:
        """Every phase (null: not reached, or not on this learner), then `extra` (the
        learner's GRAPH_KEYS)."""
        out = {f"{k}_s": (round(self.marks[k] - self.zero, 2) if k in self.marks else None)
               for k in PHASES}
        out["since"], out["zero_unix"] = self.since(), self.zero
        return {**out, **{k: v for k, v in extra.items() if v is not None}}
