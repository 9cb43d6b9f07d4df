"""Env actors: step MuJoCo envs on CPUs, push transitions to the learner, follow its weights."""
