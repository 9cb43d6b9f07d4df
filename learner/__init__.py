"""The learner: one GPU process that takes transitions off the wire and trains SAC on them.

    rpc/     the wire: gRPC server, handlers, batch validation, weight publisher, relay
    ingest/  batches from the wire to the training thread (this process or their own)
    replay/  the row layout, the ring and its writer, the frame replay, the rate limiter
    update/  the SAC update: losses, networks, normalizer, optimizer, state and pixel SAC
    graph/   the update as a CUDA graph, compiled in the background
    trainer.py runs the update; build.py chooses the ring and the update for an env;
    checkpoint.py writes and reads the learner's state; learner.py (the Learner) wires them all;
    config.py: the settings
"""
