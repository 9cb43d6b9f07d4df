"""Ingest: batches from the wire to the training thread, in this process or in processes of
their own."""
