"""Launch: the learner (GPU) as a Ray actor, then the job's controller and its first env actors
(CPU). The actors boot while the learner initialises CUDA and compiles; they dial with backoff
until it listens."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.exceptions import RayActorError, RayTaskError

from herd.books import ControllerLink
from herd.config import JobConfig
from herd.control import NAMESPACE, controller_name
from herd.controller import Controller
from herd.job.watch import LearnerWatch
from herd.job_setup import known_address
from herd.learner.learner import Learner
from herd.proto import codec
from herd.ray_errors import cause_line, init_error, one_line
from herd.startup import Timeline


class LearnerStartError(Exception):
    """The learner's __init__ failed (a setting only it can check, a device, a checkpoint)."""


@dataclass
class Launched:
    """A job whose learner listens and whose controller has started its first actors."""

    job_id: str
    run_dir: Path
    resume: str | None
    ckpt_dir: str
    start: float
    """time.monotonic() at the launch: the job's wall clock and its first rate window count from it."""
    learner: object
    controller: object
    address: str
    watch: LearnerWatch
    link: ControllerLink


def launch(cfg: JobConfig, job_id: str, run_dir: Path, resume: str | None, gpus: float, env: dict,
           timeline: Timeline, learner_bundle: int | None = None) -> Launched:
    """`learner_bundle`: in a placement group (a `herd tune` trial), the bundle that is the
    learner's, so that no env actor takes it first (the actors take the group's others)."""
    start = time.monotonic()
    spec = codec.spec_to_proto(cfg.env.id, env["obs_shape"], env["obs_dtype"], env["action_shape"],
                               env["action_low"], env["action_high"],
                               frame_stack=env.get("frame_stack", 0), state_dim=env.get("state_dim", 0))
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
    # Only an address the learner picks itself (0.0.0.0 -> its node's IP) must be waited for.
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
    return Launched(job_id, run_dir, resume, ckpt_dir, start, learner, controller, address, watch,
                    ControllerLink(controller))


def start_actors(cfg: JobConfig, job_id: str, learner, address: str):
    """The job's controller and its first actors; returns (controller, ref of the scale call).
    The controller goes on this driver's node (the head, where `herd` finds its endpoint's
    record: cluster/control.py) and nowhere else: on a worker node, that node's loss would take
    the controller, and with it the job's actors and live books."""
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
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    controller = ray.remote(Controller).options(
        name=controller_name(job_id), namespace=NAMESPACE, num_cpus=0, max_concurrency=16,
        scheduling_strategy=here,
    ).remote(job_id, cfg.env, cfg.actors, learner, address, cfg.learner.server.token)
    return controller, controller.start.remote()
