"""An evaluator actor for tests/cluster/test_periodic_eval.py, in a module Ray's workers can
import (`tests.cluster.stub_evaluator` with the repository on PYTHONPATH; a test module is not)."""

import time


class SlowEvaluator:
    """Returns the policy's version as its mean return after `seconds`."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def evaluate(self, weights) -> dict:
        time.sleep(self.seconds)
        return {"policy_version": weights.version, "mean_return": float(weights.version), "episodes": 1}
