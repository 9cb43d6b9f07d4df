"""Preflight: what can never run is refused before any process starts; the config the job runs
with (capped to the cluster, secured, a fixed port, a resumed job's warm-up off) is written to
runs/<job>/config.yaml. The checks themselves are herd.job_setup's."""

from __future__ import annotations

from pathlib import Path

import ray

from herd.config import JobConfig
from herd.job_setup import check_cluster, fixed_port, learner_gpus, redacted, secure, within_capacity
from herd.lineage import BUDGETS, Lineage
from herd.startup import Timeline


def preflight(cfg: JobConfig, run_dir: Path, resume: str | None, timeline: Timeline,
              env: dict | None = None) -> tuple[JobConfig, float, dict, Lineage]:
    """(the config the job runs with, the learner's GPUs, the env spec, the run's lineage).
    `env`: config.check_env's spec when the caller has it (from `herd submit`)."""
    if env is None:
        from herd.config import check_env

        env = check_env(cfg)
    timeline.mark("env_spec")
    cfg, capped = within_capacity(cfg, ray.nodes())
    for warning in [capped] * bool(capped) + check_cluster(cfg, env):
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
    return cfg, gpus, env, lineage
