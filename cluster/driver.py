"""The job driver (a Ray Job's entrypoint): runs a job in its phases (herd.job: preflight, launch,
supervise, wind-down, summary).

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
import sys
from pathlib import Path

import ray

from herd.config import ConfigError, JobConfig, parse_config
from herd.control import NAMESPACE
from herd.job.launch import LearnerStartError, launch
from herd.job.preflight import preflight
from herd.job.summary import write_summary
from herd.job.supervise import supervise
from herd.job.wind_down import release, wind_down
from herd.job_setup import DriverEnvError, env_from_file, token_from_file, token_from_kv
from herd.startup import GCS_ENV, Timeline, spec_from_env

IMPORTED = time.time()


def run(cfg: JobConfig, job_id: str, run_dir: Path, resume: str | None = None,
        timeline: Timeline | None = None, env: dict | None = None,
        learner_bundle: int | None = None) -> dict:
    """The job, phase by phase (herd.job); its summary. `env`: config.check_env's spec when the
    caller has it (main: from `herd submit`). `learner_bundle`: in a placement group (a `herd
    tune` trial), the bundle that is the learner's."""
    timeline = timeline or Timeline(DRIVER_STARTED)
    cfg, gpus, env, lineage = preflight(cfg, run_dir, resume, timeline, env)
    job = launch(cfg, job_id, run_dir, resume, gpus, env, timeline, learner_bundle)
    supervised = supervise(cfg, job, lineage, timeline)
    ended = wind_down(cfg, job, supervised, timeline)
    summary = write_summary(cfg, job, supervised, ended, lineage, timeline)
    release(job)
    return summary


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
        ray.init(address=os.environ.get(GCS_ENV) or os.environ.get("RAY_ADDRESS", "auto"),
                 namespace=NAMESPACE,
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
