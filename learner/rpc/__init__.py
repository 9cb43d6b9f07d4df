"""The learner's wire: the gRPC server, its handlers, the batch validation, the weight publisher
and the per-node weights relay."""
