"""gRPC keepalive, agreed by both ends of the contract: the actors' pings must come no more
often than the learner accepts, or it closes their connections (GOAWAY too_many_pings).

An idle connection is pinged every KEEPALIVE_MS and closed after KEEPALIVE_TIMEOUT_MS without
an answer: a peer whose node died without a FIN (half-open streams) is noticed in half a
minute, instead of when TCP gives up (minutes to hours).
"""

KEEPALIVE_MS = 20_000
KEEPALIVE_TIMEOUT_MS = 10_000

CLIENT_OPTIONS = [
    ("grpc.keepalive_time_ms", KEEPALIVE_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
SERVER_OPTIONS = [
    *CLIENT_OPTIONS,  # the learner pings its actors too
    # accept the clients' pings at up to twice the agreed rate
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
    ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
]
