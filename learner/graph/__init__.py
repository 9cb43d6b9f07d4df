"""The graph machinery: the update captured as a CUDA graph (compiled in the background), and
what the update's running costs (pauses, CPU per thread)."""
