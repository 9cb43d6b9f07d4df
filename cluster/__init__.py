"""Herd's control plane: configs, the `herd` CLI, the job driver and the per-job controller."""
