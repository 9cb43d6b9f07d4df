"""A MuJoCo env that raises inside `step` every `fail_every` steps: a simulator that breaks.

Imported through EnvConfig.module, which registers it with gymnasium as HerdFaulty-v0.
"""

import gymnasium as gym

ENV_ID = "HerdFaulty-v0"


class FaultyStep(gym.Wrapper):
    def __init__(self, env, fail_every: int = 50):
        super().__init__(env)
        self.fail_every, self.calls = fail_every, 0

    def step(self, action):
        self.calls += 1
        if self.calls % self.fail_every == 0:
            raise RuntimeError(f"simulated MuJoCo instability at step {self.calls}")
        return self.env.step(action)


def make(fail_every: int = 50, **kwargs):
    return FaultyStep(gym.make("InvertedPendulum-v5", **kwargs), fail_every)


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=make)
