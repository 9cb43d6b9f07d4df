"""Herd's wire contract: the generated gRPC stubs of herd.proto and the array codec."""
