"""Wind-down: the evaluation under way is kept, the actors deliver what they stepped and stop,
the books are settled while the learner still serves its per-actor counts, then the learner
inserts what it staged, saves (within `herd down`'s grace) and stops, and the final evaluation
runs on the checkpoint's own policy. release() lets the job's actors go once the summary is
written."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import ray

from herd.books import final_books
from herd.config import JobConfig
from herd.job.launch import Launched
from herd.job.supervise import Supervised, keep_history
from herd.periodic_eval import EVAL_WAIT_S
from herd.ray_errors import one_line
from herd.startup import Timeline


@dataclass
class Ended:
    """What the wind-down leaves to the summary."""

    final_learner: dict
    """The learner's last status (its stop() answer)."""
    books: dict
    """herd.books.final_books: per-actor counts, killed actors, lost nodes."""
    relays: dict
    """By node id, with actors.weights_relay: their final stats."""
    final_eval: dict


def wind_down(cfg: JobConfig, job: Launched, sup: Supervised, timeline: Timeline) -> Ended:
    sup.periodic.finish(sup.grace.cap(EVAL_WAIT_S))  # the evaluation under way is kept, not dropped
    timeline.close()
    try:  # the replay ratio no longer holds inserts back: the stopping actors' last batches go in
        ray.get(job.learner.wind_down.remote(), timeout=30)
    except Exception as e:  # noqa: BLE001 -- a restarting learner: the actors' stop waits for it
        print(f"[herd] the learner did not answer the wind-down ({one_line(e)})", flush=True)
    try:
        job.link.call("scale", 0, sup.grace.cap(60.0))  # each actor's stop() waited for at most this
    except Exception as e:  # noqa: BLE001 -- the checkpoint and summary must still be written
        print(f"[herd] removing the actors failed ({one_line(e)}); their last polled counts "
              "stand in", flush=True)
    try:
        job.link.tell("refill_pool")  # the cores are free now, if the start never was over
        relays = job.link.call("stop_relays")  # no actor is left to serve: their last counts
    except Exception as e:  # noqa: BLE001 -- they die with the controller in any case
        relays = {"error": one_line(e)}
    # every actor stopped or gone: the books, while the learner still serves its per-actor counts
    books = final_books(job.link, job.learner, restarted=bool(job.watch.restarts))
    final_learner = job.watch.call("stop")  # inserts everything staged before it returns
    timeline.observe_learner(final_learner)  # its start-up marks, had no poll seen them
    timeline.observe_graph(final_learner)  # a graph swapped in after the last poll
    final_checkpoint(cfg, job, sup)
    # as save() left it: the checkpoint's own policy
    final_eval = sup.grace.evaluate(sup.periodic, job.watch.call("policy_for_eval"))
    return Ended(final_learner, books, relays, final_eval)


def final_checkpoint(cfg: JobConfig, job: Launched, sup: Supervised) -> None:
    """The last save, so that the checkpoint holds everything inserted; a failed one is
    recorded, and the previous checkpoint stays."""
    try:
        sup.grace.save(job.watch, job.learner, job.ckpt_dir, cfg.run.save_replay)
        keep_history(Path(job.ckpt_dir), cfg.run.keep_checkpoints)
    except OSError as e:
        sup.checkpoint_errors.append({"time_s": round(time.monotonic() - job.start, 1), "error": one_line(e),
                                      "final": True})
        print(f"[herd] final {one_line(e)}; " + (
            f"{job.ckpt_dir} keeps the previous checkpoint" if (Path(job.ckpt_dir) / "model.pt").exists()
            else "the job has no checkpoint"), flush=True)


def release(job: Launched) -> None:
    """The controller's endpoint closed, the controller and the learner killed."""
    try:  # its CLI endpoint and that endpoint's record go first (ray.kill runs no clean-up)
        job.link.call("close_endpoint", timeout=10)
    except Exception as e:  # noqa: BLE001 -- a record left behind only sends `herd status` to Ray
        print(f"[herd] the controller's endpoint did not close ({one_line(e)})", flush=True)
    ray.kill(job.controller)
    ray.kill(job.learner)

