"""The learner: GPU replay ring, SAC update, gRPC ingest and the weight publisher."""
