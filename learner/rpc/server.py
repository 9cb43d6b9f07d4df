"""The learner's gRPC server: grpc.aio on one event-loop thread of its own, keepalive, token
and TLS.

The synchronous server it replaces held one pool thread per open stream; with two streams per
actor its 128 threads stopped at 64 actors (the 65th could not even handshake). Here a stream
is a coroutine: the thread count does not grow with actors. Keepalive (proto/keepalive.py)
finds a dead node's half-open connections in seconds instead of TCP's minutes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import threading

import grpc

from herd.learner.rpc.handlers import Unparsable, parse_batch
from herd.proto import codec, keepalive
from herd.proto import herd_pb2 as pb


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call whose metadata lacks the job's token (UNAUTHENTICATED)."""

    def __init__(self, token: str):
        self._token = token.encode()

        async def deny(request, context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong herd token")

        self._deny = deny

    async def intercept_service(self, continuation, details):
        sent = dict(details.invocation_metadata or ()).get(codec.TOKEN_HEADER, "")
        if hmac.compare_digest(sent.encode(), self._token):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(self._deny)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(self._deny)
        return grpc.unary_unary_rpc_method_handler(self._deny)


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def tolerant(message):
    """message.FromString that never raises: garbage comes back as Unparsable, for `strict` to
    answer INVALID_ARGUMENT (gRPC answers a deserializer's exception with UNKNOWN)."""

    def parse(raw: bytes):
        try:
            return message.FromString(raw)
        except Exception as e:  # noqa: BLE001 -- protobuf's DecodeError and kin
            return Unparsable(len(raw), f"{type(e).__name__}: {e}")

    return parse


def strict(method, streaming: bool):
    """`method` behind a check that answers an unparsable request INVALID_ARGUMENT."""
    async def refuse(request, context):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                            f"request is not a valid message ({request.nbytes} bytes): {request.why}")

    if streaming:
        async def stream(request, context):
            if isinstance(request, Unparsable):
                await refuse(request, context)
            async for reply in method(request, context):
                yield reply

        return stream

    async def unary(request, context):
        if isinstance(request, Unparsable):
            await refuse(request, context)
        return await method(request, context)

    return unary


METHODS = {  # name: (handler kind, request parser, response serializer)
    "Handshake": (grpc.unary_unary_rpc_method_handler, tolerant(pb.HandshakeRequest),
                  pb.HandshakeReply.SerializeToString),
    # answered in-stream, batch by batch (LearnerServicer.PushTransitions)
    "PushTransitions": (grpc.stream_stream_rpc_method_handler, parse_batch,
                        pb.PushAck.SerializeToString),
    # WatchWeights yields the publisher's serialized bytes
    "WatchWeights": (grpc.unary_stream_rpc_method_handler, tolerant(pb.WatchRequest), bytes),
    "GetStatus": (grpc.unary_unary_rpc_method_handler, tolerant(pb.StatusRequest),
                  pb.LearnerStatus.SerializeToString),
}


def add_servicer(servicer, server: grpc.aio.Server) -> None:
    """The generated registration of the methods `servicer` has (a relay: WatchWeights alone),
    except that requests parse tolerantly: garbage is INVALID_ARGUMENT, never UNKNOWN."""
    handlers = {}
    for name, (kind, parse, serialize) in METHODS.items():
        if not hasattr(servicer, name):
            continue
        method = getattr(servicer, name)
        if kind is not grpc.stream_stream_rpc_method_handler:
            method = strict(method, streaming=kind is grpc.unary_stream_rpc_method_handler)
        handlers[name] = kind(method, request_deserializer=parse, response_serializer=serialize)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(codec.SERVICE, handlers),))


def server_credentials(tls_cert: str | None, tls_key: str | None) -> grpc.ServerCredentials | None:
    """TLS credentials from PEM files, or None for a plaintext port."""
    if not tls_cert and not tls_key:
        return None
    if not (tls_cert and tls_key):
        raise ValueError("learner.server.tls_cert and learner.server.tls_key go together")
    with open(tls_key, "rb") as k, open(tls_cert, "rb") as c:
        return grpc.ssl_server_credentials([(k.read(), c.read())])


class Server:
    """A grpc.aio server and the event loop it runs on, in a thread named herd-ingest."""

    def __init__(self, servicer_factory, host: str, port: int, token: str | None,
                 max_message_mb: int, tls_cert: str | None = None, tls_key: str | None = None):
        """`servicer_factory()` is called on the loop (asyncio objects belong to their loop)."""
        if not is_loopback(host) and not token:
            raise ValueError(
                f"learner.server.host={host!r} exposes the gRPC port beyond loopback: set learner.server.token"
            )
        self._creds = server_credentials(tls_cert, tls_key)
        self._args = (servicer_factory, f"{host}:{port}", token, max_message_mb)
        self.loop = asyncio.new_event_loop()
        started: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="herd-ingest",
                                        daemon=True)
        self._thread.start()
        self.servicer, self.port = started.result(timeout=60)

    def _run(self, started: concurrent.futures.Future) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start(started))
        except BaseException as e:  # noqa: BLE001  (the bind failed: the constructor raises it)
            started.set_exception(e)
            self.loop.close()
            return
        self.loop.run_forever()
        self.loop.close()

    async def _start(self, started: concurrent.futures.Future) -> None:
        factory, address, token, max_message_mb = self._args
        limit = max_message_mb * 1024 * 1024
        self.server = grpc.aio.server(
            interceptors=[TokenInterceptor(token)] if token else [],
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                # A port already held by a live process fails the bind, instead of two servers
                # (say, a restarted learner beside a stale one) sharing it silently.
                ("grpc.so_reuseport", 0),
                *keepalive.SERVER_OPTIONS,
            ],
        )
        servicer = factory()
        add_servicer(servicer, self.server)
        bound = (self.server.add_secure_port(address, self._creds) if self._creds is not None
                 else self.server.add_insecure_port(address))
        if bound == 0:
            raise OSError(f"could not bind the learner's gRPC port on {address}")
        await self.server.start()
        started.set_result((servicer, bound))

    def call(self, fn, *args) -> None:
        """Run `fn(*args)` on the loop, from any thread; nothing once the loop has ended."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # closed: no stream is left to tell
            pass

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving (open streams get `grace` seconds) and end the loop's thread."""
        if self.loop.is_closed() or not self._thread.is_alive():
            return
        self.servicer.stopping = True
        done = asyncio.run_coroutine_threadsafe(self.server.stop(grace), self.loop)
        done.result(timeout=grace + 30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
