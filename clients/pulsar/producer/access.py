"""A WaitForExclusive producer's wait: the broker answers PRODUCER at once with
``producer_ready=false`` while another producer holds the topic, then answers the same request
again (PRODUCER_SUCCESS, or ERROR if an ExclusiveWithFencing producer fenced the queue out) once
this one has the topic. Creating the producer completes only then, however long that takes: the
wait ends with the connection, which fails the waiting request."""

from __future__ import annotations

from typing import Any

from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.runtime.errors import RequestFailed

__all__ = ["wait_for_exclusive_access"]


async def wait_for_exclusive_access(cnx: ClientConnection,
                                    queued: pb.CommandProducerSuccess) -> pb.CommandProducerSuccess:
    """The second answer to the PRODUCER request ``queued`` answered as not ready."""
    pending = cnx.requests.pending
    key = ("PRODUCER", (queued.request_id,))
    future = pending.expect(key)
    try:
        answer: tuple[str, Any] = await future
    finally:
        pending.forget(key, future)
    name, body = answer
    if name != "PRODUCER_SUCCESS":
        raise RequestFailed(name, body)
    assert isinstance(body, pb.CommandProducerSuccess)
    return body
