"""Herd's figures as Ray custom metrics (`ray.util.metrics`), exported by the job's controller.

Ray's metrics agent on each node serves them in Prometheus format on the node's metrics export
port (`ray start --metrics-export-port`), the Ray dashboard charts them, and Prometheus scrapes
them (deploy/prometheus.yml). Every metric carries a `job` tag; per-actor ones an `actor` tag.
Ray prefixes custom metric names with `ray_`, so the series are `ray_herd_*`.

Totals (env steps, updates, bytes) are gauges holding the current absolute value: a restarted
controller resumes them from the learner's counters instead of from zero, and Prometheus'
`rate()`/`deriv()` turns them into rates.
"""

from __future__ import annotations

# progress-row key (from the driver, once per log tick) -> (metric name, description)
JOB_GAUGES = {
    "env_steps": ("herd_env_steps", "Transitions received by the learner (env steps)"),
    "env_steps_per_s": ("herd_env_steps_per_s", "Env steps per second into the learner"),
    "updates": ("herd_updates", "SAC updates done by the learner"),
    "updates_per_s": ("herd_updates_per_s", "SAC updates per second"),
    "inserted": ("herd_inserted", "Transitions inserted into the replay buffer"),
    "replay_size": ("herd_replay_size", "Transitions held by the replay buffer"),
    "policy_version": ("herd_policy_version", "Latest published policy version"),
    "policy_lag": ("herd_policy_lag", "Mean policy lag of received batches (versions)"),
    "actors": ("herd_actors", "Env actors running"),
    "train_return": ("herd_train_return", "Mean episode return of the actors (exploring)"),
    "eval_return": ("herd_eval_return", "Mean deterministic evaluation return"),
    "rejected_batches": ("herd_rejected_batches", "Batches the learner rejected (invalid)"),
    "gpu_mem_allocated": ("herd_gpu_mem_allocated_bytes", "Learner GPU memory allocated"),
    "gpu_mem_reserved": ("herd_gpu_mem_reserved_bytes", "Learner GPU memory reserved"),
    "critic_loss": ("herd_critic_loss", "Critic loss"),
    "actor_loss": ("herd_actor_loss", "Actor loss"),
    "alpha": ("herd_alpha", "SAC temperature"),
}
# learner status key -> metric (read straight from the learner's status, not the row)
LEARNER_GAUGES = {
    "bytes_received": ("herd_bytes_received", "Transition bytes the learner's gRPC received"),
}
# per-actor stats key -> metric
ACTOR_GAUGES = {
    "steps": ("herd_actor_steps", "Env steps taken by the actor"),
    "recent_steps_per_s": ("herd_actor_steps_per_s", "Env steps per second of the actor"),
    "acked": ("herd_actor_acked", "Transitions the learner acknowledged to the actor"),
    "bytes_sent": ("herd_actor_bytes_sent", "Bytes the actor pushed over gRPC"),
    "push_latency_ms": ("herd_actor_push_latency_ms", "Mean push round trip (ms)"),
    "policy_lag": ("herd_actor_policy_lag", "Policy versions the actor lags behind"),
    "env_us_per_step": ("herd_actor_env_us_per_step", "Stepping-thread time in the envs per env step (us)"),
    "policy_us_per_step": ("herd_actor_policy_us_per_step", "Stepping-thread time in the policy per env step (us)"),
    "in_flight": ("herd_actor_in_flight", "Unacknowledged batches in flight"),
    "reconnects": ("herd_actor_reconnects", "gRPC reconnects of the actor"),
    "episodes": ("herd_actor_episodes", "Episodes finished by the actor"),
    "mean_return": ("herd_actor_return", "Mean recent episode return of the actor"),
}
ALL_NAMES = sorted({n for table in (JOB_GAUGES, LEARNER_GAUGES, ACTOR_GAUGES) for n, _ in table.values()})


class HerdMetrics:
    """The gauges of one job; create inside a Ray worker (the controller actor)."""

    def __init__(self, job_id: str):
        from ray.util.metrics import Gauge

        self.job_id = job_id
        self._job = {k: Gauge(n, d, tag_keys=("job",)).set_default_tags({"job": job_id})
                     for k, (n, d) in {**JOB_GAUGES, **LEARNER_GAUGES}.items()}
        self._actor = {k: Gauge(n, d, tag_keys=("job", "actor")).set_default_tags({"job": job_id})
                       for k, (n, d) in ACTOR_GAUGES.items()}

    def record_progress(self, row: dict) -> None:
        for key, gauge in self._job.items():
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                gauge.set(float(value))

    def record_learner(self, status: dict) -> None:
        for key in LEARNER_GAUGES:
            value = status.get(key)
            if isinstance(value, (int, float)):
                self._job[key].set(float(value))

    def record_actor(self, stats: dict) -> None:
        tags = {"actor": str(stats.get("actor_id", "?"))}
        for key, gauge in self._actor.items():
            value = stats.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                gauge.set(float(value), tags=tags)

    def retire_actor(self, actor_id: str) -> None:
        """A scaled-away actor's rate and in-flight gauges drop to zero (its totals stay)."""
        for key in ("recent_steps_per_s", "in_flight"):
            self._actor[key].set(0.0, tags={"actor": actor_id})
