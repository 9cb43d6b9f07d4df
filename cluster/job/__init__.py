"""A job's run on the cluster, phase by phase, as the driver (herd.driver.run) calls them:
preflight (refuse what can never run), launch (learner, controller, env actors), supervise
(progress, evaluations, checkpoints, the stop rule), wind-down (actors deliver, the learner
saves and stops, the final evaluation), summary (summary.json, metrics, curve)."""
