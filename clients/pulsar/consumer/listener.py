"""Message listeners: the official client's callback style, ``listener(consumer, message)``.

A listener may be a plain function or a coroutine function; it runs on the consumer's event
loop, one message at a time and in order, from subscribe until close. An exception it raises
is logged with the message's id and the next message goes on: the message itself is neither
acknowledged nor negatively acknowledged (the listener's to decide, as in the official
client; an ack timeout or a dead-letter policy still applies).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.message import Message

__all__ = ["Receiver", "start_listener"]

log = logging.getLogger(__name__)


class Receiver(Protocol):
    """What a listener needs of its consumer (a ``consumer.Consumer``)."""

    async def receive(self, timeout_millis: int | None = None) -> Message[Any]: ...


R = TypeVar("R", bound=Receiver)


async def _listen(consumer: R, listener: Callable[[R, Message[Any]], object],
                  running: asyncio.Event) -> None:
    while True:
        # Paused: messages wait in the queue (and flow control stops the broker).
        await running.wait()
        try:
            msg = await consumer.receive()
        except errors.AlreadyClosed:
            return
        # Paused while this receive waited: the message waits too.
        await running.wait()
        try:
            result = listener(consumer, msg)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%r: the message listener failed on %s", consumer, msg.message_id())


def start_listener(consumer: R, listener: Callable[[R, Message[Any]], object],
                   running: asyncio.Event) -> asyncio.Task[None]:
    """Run ``listener`` on every message ``consumer`` receives, until it is closed, while
    ``running`` is set."""
    return asyncio.get_running_loop().create_task(
        _listen(consumer, listener, running), name=f"listener of {consumer!r}")
