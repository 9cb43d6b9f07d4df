"""myrobot: a custom MuJoCo robot as a gymnasium env. Importing this package registers it:

    import gymnasium as gym
    import myrobot  # noqa: F401
    env = gym.make("MyRobot-v0")

A Herd job imports it in every process through `env.module: myrobot` in its config.
"""

import gymnasium

gymnasium.register(id="MyRobot-v0", entry_point="myrobot.arm:ArmEnv", max_episode_steps=100)
