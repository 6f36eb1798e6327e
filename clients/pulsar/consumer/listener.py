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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.message import Message

if TYPE_CHECKING:
    from protoframe.clients.pulsar.consumer.consumer import Consumer

__all__ = ["MessageListener", "start_listener"]

log = logging.getLogger(__name__)

MessageListener = Callable[["Consumer", Message], "Awaitable[Any] | Any"]


async def _listen(consumer: Consumer, listener: MessageListener) -> None:
    while True:
        try:
            msg = await consumer.receive()
        except errors.AlreadyClosed:
            return
        try:
            result = listener(consumer, msg)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%r: the message listener failed on %s", consumer, msg.message_id())


def start_listener(consumer: Consumer, listener: MessageListener) -> asyncio.Task[None]:
    """Run ``listener`` on every message ``consumer`` receives, until it is closed."""
    return asyncio.get_running_loop().create_task(
        _listen(consumer, listener), name=f"listener of {consumer!r}")
