"""Replay on the learner's device: the packed row layout, the ring and its writer, the frame
replay of pixel envs and the table that paces inserts against updates."""
