"""The test controller served over gRPC (HTTP/2) with grpcio's asyncio server.

No protoc-generated stubs: each RPC of ``ControllerService`` is a generic method handler whose
(de)serializers are the ``decode``/``encode`` of our generated message classes, and whose
behaviour is the ``ControllerState`` method of the same name. Every call's method name is
recorded in ``calls`` (unimplemented ones too), which is how tests see what a client needs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import grpc  # type: ignore[import-untyped]

from protoframe.generated.pravega import controller as pb

from ..store.segments import SegmentTable
from .state import ControllerState

__all__ = ["RPCS", "SERVICE", "ControllerServer"]

log = logging.getLogger(__name__)

SERVICE = "io.pravega.controller.stream.api.grpc.v1.ControllerService"

# RPC name -> request message class; the response class is what the state method returns.
RPCS: dict[str, type[Any]] = {
    "getControllerServerList": pb.ServerRequest,
    "createStream": pb.StreamConfig,
    "updateStream": pb.StreamConfig,
    "truncateStream": pb.StreamCut,
    "sealStream": pb.StreamInfo,
    "deleteStream": pb.StreamInfo,
    "getCurrentSegments": pb.StreamInfo,
    "getEpochSegments": pb.GetEpochSegmentsRequest,
    "getSegments": pb.GetSegmentsRequest,
    "getSegmentsImmediatlyFollowing": pb.SegmentId,
    "getSegmentsImmediatelyFollowing": pb.SegmentId,
    "scale": pb.ScaleRequest,
    "checkScale": pb.ScaleStatusRequest,
    "getURI": pb.SegmentId,
    "isSegmentValid": pb.SegmentId,
    "createScope": pb.ScopeInfo,
    "listScopes": pb.ScopesRequest,
    "checkScopeExists": pb.ScopeInfo,
    "checkStreamExists": pb.StreamInfo,
    "listStreamsInScope": pb.StreamsInScopeRequest,
    "deleteScope": pb.ScopeInfo,
    "getDelegationToken": pb.StreamInfo,
    "removeWriter": pb.RemoveWriterRequest,
    "noteTimestampFromWriter": pb.TimestampFromWriter,
    "createReaderGroup": pb.ReaderGroupConfiguration,
    "getReaderGroupConfig": pb.ReaderGroupInfo,
    "deleteReaderGroup": pb.ReaderGroupInfo,
    "updateReaderGroup": pb.ReaderGroupConfiguration,
    "getStreamConfiguration": pb.StreamInfo,
}


def _encode(message: Any) -> bytes:
    data: bytes = message.encode()
    return data


class _RecordingHandler:
    """A generic RPC handler (grpc only needs its ``service`` method) that notes each call."""

    def __init__(self, inner: Any, calls: list[str]) -> None:
        self.inner = inner
        self.calls = calls

    def service(self, details: Any) -> Any:
        method: str = details.method
        self.calls.append(method.rsplit("/", 1)[-1])
        handler = self.inner.service(details)
        if handler is None:
            log.warning("controller: %s is not implemented", method)
        return handler


class ControllerServer:
    """``async with ControllerServer(table, store_address) as uri``: ``tcp://127.0.0.1:PORT``.

    ``after_call``, when given, is awaited after each RPC has changed the state and before it
    is answered; a controller whose ``table`` mirrors a store in another process sends the
    changes there with it (see ``remote``), so a client that is told a stream exists finds its
    segments in the store.
    """

    def __init__(self, table: SegmentTable, store: tuple[str, int], *,
                 host: str = "127.0.0.1", port: int = 0,
                 after_call: Callable[[], Awaitable[None]] | None = None) -> None:
        self.host = host
        self.port = port
        self.state = ControllerState(table, store)
        self.after_call = after_call
        self.calls: list[str] = []
        self._server: Any = None

    @property
    def uri(self) -> str:
        """The controller URI a Pravega client is given."""
        return f"tcp://{self.host}:{self.port}"

    async def start(self) -> str:
        """Listen (on a free port when ``port`` is 0) and return the URI."""
        server = grpc.aio.server()
        handlers = {name: grpc.unary_unary_rpc_method_handler(
                        self._behaviour(name), request_deserializer=request.decode,
                        response_serializer=_encode)
                    for name, request in RPCS.items()}
        generic = grpc.method_handlers_generic_handler(SERVICE, handlers)
        server.add_generic_rpc_handlers([_RecordingHandler(generic, self.calls)])
        self.port = server.add_insecure_port(f"{self.host}:{self.port}")
        await server.start()
        self._server = server
        self.state.controller = (self.host, self.port)
        log.info("controller listening on %s", self.uri)
        return self.uri

    async def stop(self) -> None:
        """Stop at once; calls in progress are cancelled."""
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def _behaviour(self, name: str) -> Callable[[Any, Any], Any]:
        method = getattr(self.state, name)

        async def behaviour(request: Any, context: Any) -> Any:
            response = method(request)
            if self.after_call is not None:
                await self.after_call()
            return response

        return behaviour
