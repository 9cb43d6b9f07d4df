"""The graph machinery: the update captured as a CUDA graph (compiled in the background), the
compile cache filled ahead of a job, and what the update's running costs (pauses, CPU per thread)."""
