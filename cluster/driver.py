"""The job driver (a Ray Job's entrypoint): wires learner, controller and actors in one place.

    python -m herd.driver --job-id ID --runs-dir DIR [--env-file FILE]

The config comes in $HERD_CONFIG_JSON: from the job's env_vars, or from FILE (JSON), which
`herd submit` writes when the cluster is on its own machine.

Writes runs/<job>/: config.yaml (resolved, token redacted), metrics.csv, tb/, checkpoint/,
summary.json.

Faults: env actors are restarted by Ray (actors.max_restarts). The learner is a Ray actor with
max_restarts on a fixed port; a restarted learner restores the job's latest checkpoint
(learner/learner.py) and actors reconnect to the same address. The driver rides out the gap,
and summary.json says what the gap cost (updates and transitions since that checkpoint).
"""

from __future__ import annotations

import time

DRIVER_STARTED = time.time()  # before the heavy imports: the start-up timeline counts them

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from herd.books import ControllerLink, ControllerLost, final_books
from herd.config import ConfigError, JobConfig, parse_config
from herd.control import NAMESPACE, controller_name
from herd.controller import Controller
from herd.curves import CURVE, write_curve
from herd.evaluation import Evaluator
from herd.grace import Grace
from herd.job_setup import (
    DriverEnvError,
    check_cluster,
    env_from_file,
    fixed_port,
    known_address,
    learner_gpus,
    redacted,
    secure,
    token_from_file,
    token_from_kv,
    within_capacity,
)
from herd.learner.learner import Learner
from herd.lineage import BUDGETS, Lineage
from herd.metrics import MetricsWriter
from herd.periodic_eval import BEST_CHECKPOINT, BEST_POLICY, EVAL_WAIT_S, PeriodicEvals
from herd.progress import RATE_WINDOW_S, actor_rates, actor_steps, format_row, progress_row
from herd.proto import codec
from herd.ray_errors import cause_line, init_error, one_line
from herd.startup import GRAPH_KEYS, Timeline, spec_from_env
from herd.tracking import open_wandb, provenance

IMPORTED = time.time()

try:
    from ray.exceptions import ActorUnavailableError
    LEARNER_DOWN = (RayActorError, ActorUnavailableError, GetTimeoutError)
except ImportError:  # older Ray
    LEARNER_DOWN = (RayActorError, GetTimeoutError)


def keep_history(ckpt_dir: Path, keep: int) -> None:
    """After a save: hard-link checkpoint/'s files into checkpoints/<updates>/ and prune to the
    `keep` newest (checkpoint/ itself counts as one). The next save renames new files over
    checkpoint/'s names, so the links go on naming this save's data: a policy that collapses
    later cannot overwrite the last good full state."""
    if keep <= 1:
        return
    history = ckpt_dir.parent / "checkpoints"
    import torch

    # mmap: the one count, without reading the networks and optimizers back in
    updates = int(torch.load(ckpt_dir / "model.pt", map_location="cpu", mmap=True,
                             weights_only=True)["updates"])
    snap = history / f"{updates:012d}"
    if not snap.exists():
        tmp = history / f".{updates:012d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in ("model.pt", "replay.pt"):
            if (ckpt_dir / name).exists():
                os.link(ckpt_dir / name, tmp / name)
        tmp.rename(snap)
    # the newest snapshot is checkpoint/'s own: keep-1 older ones beside it
    for old in sorted(p for p in history.iterdir() if not p.name.startswith("."))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


class LearnerStartError(Exception):
    """The learner's __init__ failed (a setting only it can check, a device, a checkpoint)."""


def start_actors(cfg: JobConfig, job_id: str, learner, address: str):
    """The job's controller and its first actors; returns (controller, ref of the scale call).
    The controller goes on this driver's node (the head, where `herd` finds its endpoint's
    record: cluster/control.py) while that node is alive."""
    from ray.util import get_current_placement_group
    from ray.util.scheduling_strategies import (
        NodeAffinitySchedulingStrategy,
        PlacementGroupSchedulingStrategy,
    )

    group = get_current_placement_group()
    if group is not None:  # a `herd tune` trial: the controller and the env actors it starts
        # go in the trial's group; outside it they would wait for CPUs the group holds
        here = PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)
    else:
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    controller = ray.remote(Controller).options(
        name=controller_name(job_id), namespace=NAMESPACE, num_cpus=0, max_concurrency=16,
        scheduling_strategy=here,
    ).remote(job_id, cfg.env, cfg.actors, learner, address, cfg.learner.server.token)
    return controller, controller.start.remote()


class LateMetrics:
    """The run's MetricsWriter, opened at the first update: its TensorBoard import (torch, a
    second or more of CPU) would otherwise run beside the learner's and the actors' start-up.
    The rows of the ticks before it wait here and go first, in order."""

    def __init__(self, open_writer):
        self._open, self._writer, self._rows = open_writer, None, []

    def write(self, row: dict, opened: bool) -> None:
        if self._writer is None and not opened:
            self._rows.append(row)
        else:
            self.writer().write(row)

    def writer(self) -> MetricsWriter:
        if self._writer is None:
            self._writer = self._open()
            for row in self._rows:
                self._writer.write(row)
            self._rows.clear()
        return self._writer

    def close(self, summary: dict) -> None:
        self.writer().close(summary)


class LearnerWatch:
    """Tells a slow learner from a dead one and keeps the books on restarts."""

    def __init__(self, learner, timeout_s: float, start: float):
        self.learner, self.timeout_s, self.start = learner, timeout_s, start
        self.learner_id: str | None = None
        self.last: dict = {}  # newest good status before a crash
        self.down_since: float | None = None
        self.restarts: list[dict] = []

    def observe(self, ls: dict, now: float) -> dict | None:
        """A usable learner status (`ls`, or a fresh one when the controller's call failed), or
        None while the learner is down; records a restart when the learner's id changed."""
        if "error" in ls:
            try:  # ask it directly: the controller may have hit the dying process
                ls = ray.get(self.learner.status_dict.remote(), timeout=10)
            except LEARNER_DOWN:
                if self.down_since is None:
                    self.down_since = now
                    print(f"[herd] learner unreachable ({ls['error']}); waiting for Ray to "
                          "restart it", flush=True)
                if now - self.down_since > self.timeout_s:
                    raise RuntimeError(f"the learner stayed down for {self.timeout_s:.0f}s") from None
                return None
            # anything else (its training thread failed) propagates: not a crash to ride out
        if self.learner_id is not None and ls["learner_id"] != self.learner_id:
            self._restarted(ls, now)
        self.learner_id, self.down_since = ls["learner_id"], None
        self.last = ls
        return ls

    def _restarted(self, ls: dict, now: float) -> None:
        ck = ls.get("restored") or {"updates": 0, "received": 0, "inserted": 0, "path": None}
        rec = {
            "at_s": round(now - self.start, 1),
            "down_s": round(now - (self.down_since or now), 1),
            "checkpoint": ck.get("path"),
            "replay": ck.get("replay", "absent"),
            "checkpoint_updates": ck["updates"],
            "checkpoint_received": ck["received"],
            "last_seen_updates": self.last.get("updates", 0),
            "last_seen_received": self.last.get("received", 0),
        }
        # Lower bounds: the learner may have gone on for up to one status poll after last_seen.
        rec["updates_lost"] = max(0, rec["last_seen_updates"] - ck["updates"])
        rec["transitions_lost"] = max(0, rec["last_seen_received"] - ck["received"])
        self.restarts.append(rec)
        print(f"[herd] learner restarted from {ck.get('path') or 'scratch'}: lost >= "
              f"{rec['updates_lost']} updates and >= {rec['transitions_lost']} transitions "
              "since that checkpoint", flush=True)

    def call(self, method: str, *args, timeout: float | None = None):
        """A learner call that waits out a restart (the restarted learner answers it)."""
        deadline = time.monotonic() + (timeout or self.timeout_s)
        while True:
            try:
                return ray.get(getattr(self.learner, method).remote(*args), timeout=30)
            except LEARNER_DOWN:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)


def run(cfg: JobConfig, job_id: str, run_dir: Path, resume: str | None = None,
        timeline: Timeline | None = None, env: dict | None = None,
        learner_bundle: int | None = None) -> dict:
    """`env`: config.check_env's spec when the caller has it (main: from `herd submit`).
    `learner_bundle`: in a placement group (a `herd tune` trial), the bundle that is the
    learner's, so that no env actor takes it first (the actors take the group's others)."""
    timeline = timeline or Timeline(DRIVER_STARTED)
    # ---- refuse what can never run, before any process starts ----
    if env is None:
        from herd.config import check_env

        env = check_env(cfg)
    d = env
    timeline.mark("env_spec")
    cfg, capped = within_capacity(cfg, ray.nodes())
    for warning in [capped] * bool(capped) + check_cluster(cfg, d):
        print(f"[herd] warning: {warning}", flush=True)
    gpus = learner_gpus(cfg)
    cfg = fixed_port(secure(cfg))
    if resume:  # the restored policy acts from the first step: no random warm-up
        cfg = cfg.model_copy(update={"actors": cfg.actors.model_copy(
            update={"warmup_steps": 0, "wait_for_policy": True})})
    timeline.mark("driver_ready")
    timeline.compiled = cfg.learner.compute.cuda_graph or cfg.learner.compute.compile
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(redacted(cfg))
    lineage = Lineage(resume)
    if resume:
        carried = lineage.carry_metrics(run_dir)
        print(f"[herd] resuming {resume}: {BUDGETS}" + (
            f"; metrics.csv and curve.png go on from {lineage.earlier}'s ({carried} rows)"
            if carried else ""), flush=True)
    start = time.monotonic()
    # ---- the env spec every component agrees on ----
    spec = codec.spec_to_proto(cfg.env.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"], frame_stack=d.get("frame_stack", 0),
                               state_dim=d.get("state_dim", 0))
    # ---- learner (GPU) -> controller -> env actors (CPU) ----
    ckpt_dir = str(run_dir / "checkpoint")
    placed = {}
    if learner_bundle is not None:
        from ray.util import get_current_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        placed["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            get_current_placement_group(), placement_group_bundle_index=learner_bundle)
    learner = ray.remote(Learner).options(
        name=f"{job_id}-learner", namespace=NAMESPACE, num_gpus=gpus,
        num_cpus=cfg.learner.placement.num_cpus, max_concurrency=16,
        max_restarts=cfg.learner.placement.max_restarts, **placed,
    ).remote(cfg.learner, spec, resume, ckpt_dir)
    # Actors boot (~10 s: Python, torch, MuJoCo) while the learner initialises CUDA and
    # compiles; they dial with backoff until it listens. Only an address the learner picks
    # itself (0.0.0.0 -> its node's IP) must be waited for.
    early = known_address(cfg)
    if early:
        controller, scaling = start_actors(cfg, job_id, learner, early)
    try:
        address = ray.get(learner.address.remote())
    except RayTaskError as e:  # its __init__ failed and kept the reason (learner/learner.py)
        ray.kill(learner, no_restart=True)
        raise LearnerStartError(f"the learner could not start: {cause_line(e)}") from None
    except RayActorError as e:  # its process died on the way
        raise LearnerStartError(f"the learner could not start: {init_error(e)}") from None
    timeline.mark("learner_listening")
    if not early:
        controller, scaling = start_actors(cfg, job_id, learner, address)
    watch = LearnerWatch(learner, cfg.learner.placement.down_timeout_s, start)
    timeline.watch(learner, controller)  # to the first update, 4 times a second
    try:
        ray.get(scaling)
    except RayActorError as e:  # the loop's first call to it finds it dead and winds down
        print(f"[herd] the controller died starting the actors ({one_line(e)})", flush=True)
    print(f"[herd] job {job_id}: learner at {address}, {cfg.actors.num_actors} actors, "
          f"results in {run_dir}", flush=True)

    record = run_record(cfg, job_id, run_dir)
    wandb_run = open_wandb(cfg.run.wandb, run_dir, job_id, record)
    metrics = LateMetrics(lambda: MetricsWriter(run_dir, record, wandb_run))

    def start_evaluator():
        return ray.remote(Evaluator).options(
            name=f"{job_id}-evaluator", namespace=NAMESPACE, num_cpus=0, max_restarts=-1,
            max_task_retries=2,
        ).remote(cfg.env, cfg.run.eval_episodes, cfg.eval_seed)

    checkpoint_errors: list[dict] = []
    # the evaluator starts at the first update: its process (torch, MuJoCo: seconds of CPU)
    # would otherwise boot beside the learner's and the actors' and slow the way to that update
    periodic = PeriodicEvals(start_evaluator, watch, run_dir, cfg.run.eval_every_s, start, timeline,
                          checkpoint_errors)
    last_ckpt, reason, grace = time.monotonic(), "max_seconds", Grace()
    # rates of the first row count from the counters this learner started with (a resumed
    # job's restored ones), not from zero
    restored = watch.call("status_dict").get("restored") or {}
    # the first window opens at the job's start: steps the actors delivered while the learner
    # started would otherwise count over the few seconds since this loop began
    recent = [(start, restored.get("received", 0), restored.get("updates", 0),
               restored.get("inserted", 0), {})]
    link = ControllerLink(controller)
    try:
        while True:
            time.sleep(cfg.run.log_every_s)
            st = link.status()
            if st is None:  # unavailable for a moment: the next tick asks again
                continue
            ls, now = st["learner"], time.monotonic()
            restarts = len(watch.restarts)
            ls = watch.observe(ls, now)
            if ls is None:
                continue
            st = {**st, "learner": ls}
            timeline.observe(st)
            if len(watch.restarts) > restarts:  # counters went back to the checkpoint's
                recent = [(now, ls["received"], ls["updates"], ls["inserted"], recent[-1][-1])]
            periodic.poll(ls, now)
            row = progress_row(st, periodic.last_return(), now - start, recent[0])
            row["eval_contact_cost"] = periodic.last_contact_cost()  # beside eval_return
            row["eval_heldout_return"] = periodic.last_heldout_return()
            steps = actor_steps(st["actors"])
            rates = actor_rates(steps, now, recent)
            recent.append((now, ls["received"], ls["updates"], ls["inserted"], steps))
            while len(recent) > 1 and now - recent[1][0] >= RATE_WINDOW_S:  # the oldest stays >= W old
                recent.pop(0)
            metrics.write(lineage.row(row), opened=ls["updates"] > 0)
            link.tell("set_progress", {**row, "max_env_steps": cfg.run.max_env_steps,
                                       "max_seconds": cfg.run.max_seconds,
                                       "actor_steps_per_s": rates, "unix_time": time.time(),
                                       "start_over": timeline.over(ls, now - start)})
            print(format_row(row), flush=True)
            if now - last_ckpt >= cfg.run.checkpoint_every_s:
                try:
                    ray.get(learner.save.remote(ckpt_dir, cfg.run.save_replay))
                    last_ckpt = now
                    keep_history(Path(ckpt_dir), cfg.run.keep_checkpoints)
                except LEARNER_DOWN:  # died while saving: the next poll sees it
                    pass
                except OSError as e:  # disk full, say: the learner cleaned up; retry next interval
                    last_ckpt = now
                    checkpoint_errors.append({"time_s": round(now - start, 1), "error": one_line(e)})
                    print(f"[herd] {one_line(e)}; training goes on, next try in "
                          f"{cfg.run.checkpoint_every_s:g}s", flush=True)
            target = cfg.run.target_return
            last = periodic.last_return()
            if cfg.run.stop_at_target and target is not None and last is not None and last >= target:
                reason = "target_return"
                break
            if ls["received"] >= cfg.run.max_env_steps:
                reason = "max_env_steps"
                break
            if now - start >= cfg.run.max_seconds:
                break
            if st["stop_requested"]:  # `herd stop`, or `herd down` with its grace
                reason = (st.get("stop_why") or {}).get("why") or "stopped by user"
                grace = Grace.of_status(st)
                break

    except ControllerLost as e:
        reason = "controller lost"
        print(f"[herd] {e}; the job winds down with the counts it last reported", flush=True)
    except Exception as e:  # whatever failed, the job still ends with its books
        if watch.down_since is not None:  # no learner to save or count: nothing to wind down
            raise
        reason = f"error: {one_line(e)}"
        print(f"[herd] supervising the job failed ({one_line(e)}); it winds down", flush=True)

    # ---- wind down: actors deliver what they stepped, then the learner saves and stops ----
    periodic.finish(grace.cap(EVAL_WAIT_S))  # the evaluation under way is kept, not dropped
    timeline.close()
    try:  # the replay ratio no longer holds inserts back: the stopping actors' last batches go in
        ray.get(learner.wind_down.remote(), timeout=30)
    except Exception as e:  # noqa: BLE001 -- a restarting learner: the actors' stop waits for it
        print(f"[herd] the learner did not answer the wind-down ({one_line(e)})", flush=True)
    try:
        link.call("scale", 0, grace.cap(60.0))  # each actor's stop() waited for at most this
    except Exception as e:  # noqa: BLE001 -- the checkpoint and summary must still be written
        print(f"[herd] removing the actors failed ({one_line(e)}); their last polled counts "
              "stand in", flush=True)
    try:
        link.tell("refill_pool")  # the cores are free now, if the start never was over
        relays = link.call("stop_relays")  # no actor is left to serve: their last counts
    except Exception as e:  # noqa: BLE001 -- they die with the controller in any case
        relays = {"error": one_line(e)}
    # every actor stopped or gone: the books, while the learner still serves its per-actor counts
    books = final_books(link, learner, restarted=bool(watch.restarts))
    final_learner = watch.call("stop")  # inserts everything staged before it returns
    timeline.observe_learner(final_learner)  # its start-up marks, had no poll seen them
    timeline.observe_graph(final_learner)  # a graph swapped in after the last poll
    try:
        grace.save(watch, learner, ckpt_dir, cfg.run.save_replay)  # so the checkpoint holds all of it
        keep_history(Path(ckpt_dir), cfg.run.keep_checkpoints)
    except OSError as e:
        checkpoint_errors.append({"time_s": round(time.monotonic() - start, 1), "error": one_line(e),
                                  "final": True})
        print(f"[herd] final {one_line(e)}; " + (
            f"{ckpt_dir} keeps the previous checkpoint" if (Path(ckpt_dir) / "model.pt").exists()
            else "the job has no checkpoint"), flush=True)
    # as save() left it: the checkpoint's own policy
    final_eval = grace.evaluate(periodic, watch.call("policy_for_eval"))
    actors_final = books["actors"]
    acked = int(sum(a.get("acked", 0) for a in actors_final))
    summary = {
        "job_id": job_id,
        "env": cfg.env.id,
        "stop_reason": reason,
        "wall_s": time.monotonic() - start,
        "final_eval": final_eval,
        "target_return": cfg.run.target_return,
        # SAC keeps learning after the evaluation that reached the target: the final
        # checkpoint's policy can score lower, so both are reported
        "best_eval": periodic.best(),
        "best_policy": str(run_dir / BEST_POLICY) if periodic.evals else None,
        # the full state (networks, optimizers, counters) of best_policy.pb's evaluation:
        # `herd submit --resume` takes it
        "best_checkpoint": (str(run_dir / BEST_CHECKPOINT)
                            if (run_dir / BEST_CHECKPOINT / "model.pt").exists() else None),
        # of the final policy (the checkpoint's); a resumed run's early evaluations are of the
        # restored policy, which the run may since have lost
        "reached_target": (cfg.run.target_return is not None and final_eval["mean_return"] is not None
                           and final_eval["mean_return"] >= cfg.run.target_return),
        # of best_policy.pb, the best periodic evaluation of this run
        "best_reached_target": (cfg.run.target_return is not None and bool(periodic.evals)
                                and periodic.best()["mean_return"] >= cfg.run.target_return),
        "resumed_from": resume,
        "lineage": lineage.record(),  # the run resumed, and how this one's budgets count
        "evaluations": periodic.evals,
        "learner": {k: v for k, v in final_learner.items() if k != "losses"},
        "actor_steps": int(sum(a.get("steps", 0) for a in actors_final)),
        "actor_acked": acked,
        # of them, steps with random warm-up actions (a resumed job takes none)
        "actor_random_steps": int(sum(a.get("random_steps", 0) for a in actors_final)),
        "relays": relays,  # by node id, with actors.weights_relay: their final stats
        "faults": {**faults_summary(watch.restarts, acked, final_learner, actors_final),
                   "controller_lost": link.lost, "killed_actor_processes": books["killed"],
                   "killed_steps_lost_at_least": books["lost_at_least"],
                   "nodes_lost": books["nodes_lost"]},
        "checkpoint": ckpt_dir if (Path(ckpt_dir) / "model.pt").exists() else None,
        "checkpoint_errors": checkpoint_errors,
        "wind_down": grace.record(),  # `herd down`'s grace and what did not fit in it
        "startup": timeline.seconds(**{k: final_learner.get(k) for k in GRAPH_KEYS}),
        # the resolved config, seeds, package versions and git commits (herd.tracking)
        "provenance": record,
    }
    metrics.close({"final_eval_return": final_eval["mean_return"], "stop_reason": reason,
                   "best_eval_return": (summary["best_eval"] or {}).get("mean_return")})
    try:  # before summary.json: a job whose summary is there has its picture too
        write_curve(run_dir, lineage.evaluations(periodic.evals))
    except Exception as e:  # noqa: BLE001 -- no evaluation, no matplotlib: a picture is no result
        print(f"[herd] no {CURVE}: {one_line(e)}", flush=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print("[herd] start-up, s since " + summary["startup"]["since"] + ": " + ", ".join(
        f"{k[:-2]} {v}" for k, v in summary["startup"].items() if k.endswith("_s")), flush=True)
    ev = final_eval["mean_return"]
    print(f"[herd] done ({reason}): final deterministic eval return "
          f"{'-' if ev is None else f'{ev:.1f}'} over {final_eval['episodes']} episodes; "
          f"results in {run_dir}", flush=True)
    try:  # its CLI endpoint and that endpoint's record go first (ray.kill runs no clean-up)
        link.call("close_endpoint", timeout=10)
    except Exception as e:  # noqa: BLE001 -- a record left behind only sends `herd status` to Ray
        print(f"[herd] the controller's endpoint did not close ({one_line(e)})", flush=True)
    ray.kill(controller)
    ray.kill(learner)
    return summary


def run_record(cfg: JobConfig, job_id: str, run_dir: Path) -> dict:
    """The run's provenance (resolved config as in config.yaml, seeds, versions, commits)."""
    import yaml

    return {"job_id": job_id, **provenance(cfg, yaml.safe_load(redacted(cfg)))}


def faults_summary(restarts: list[dict], acked: int, final: dict, actors: list[dict]) -> dict:
    """What crashes cost. Learner restarts lose what came after the checkpoint they restore;
    actors ack only what a learner accepted, so acked - received counts exactly the
    transitions a dead learner had accepted after its last checkpoint (exact while no env
    actor died; a dead actor process counts with its last polled figures, a lower bound)."""
    return {
        "learner_restarts": len(restarts),
        "restarts": restarts,
        "updates_lost": sum(r["updates_lost"] for r in restarts),
        "transitions_lost_at_least": sum(r["transitions_lost"] for r in restarts),
        "transitions_lost": max(0, acked - int(final["received"])),
        "env_errors": int(sum(a.get("env_errors", 0) for a in actors)),
        "actor_reconnects": int(sum(a.get("reconnects", 0) for a in actors)),
        "rejected_batches": int(final.get("rejected_batches", 0)),
        "duplicate_batches": int(final.get("duplicate_batches", 0)),
        "unknown_session_batches": int(final.get("unknown_session_batches", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="herd.driver")
    p.add_argument("--job-id", required=True)
    p.add_argument("--runs-dir", required=True)
    p.add_argument("--resume", default=None, help="checkpoint directory to continue from")
    p.add_argument("--env-file", default=None,
                   help="JSON of environment variables to set first (herd submit's; read once, deleted)")
    args = p.parse_args(argv)
    from herd.actors.envs import EnvError

    try:
        env_from_file(args.env_file)
        timeline = Timeline(DRIVER_STARTED)
        timeline.mark("driver_imported", IMPORTED)
        cfg = parse_config(json.loads(os.environ["HERD_CONFIG_JSON"]), "HERD_CONFIG_JSON")
        cfg = token_from_file(cfg, os.environ.get("HERD_TOKEN_FILE"))
        timeline.mark("config_parsed")
        # `herd submit` built the env and handed its spec over; without one (a job submitted
        # by hand), an unknown env fails here, before this process joins the cluster
        env = spec_from_env(cfg.env.id)
        if env is None:
            from herd.config import check_env

            env = check_env(cfg)
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE,
                 log_to_driver=True)
        timeline.mark("ray_joined")
        cfg = token_from_kv(cfg, os.environ.get("HERD_TOKEN_KV"))
        run(cfg, args.job_id, Path(args.runs_dir) / args.job_id, args.resume, timeline, env)
    except (ConfigError, EnvError, json.JSONDecodeError, DriverEnvError, LearnerStartError) as e:
        print(f"herd: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
