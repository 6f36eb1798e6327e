"""Producer access modes of one topic, as Pulsar decides them (``AbstractTopic``'s
``incrementTopicEpochIfNeeded``):

* Shared: refused (ProducerBusy) while an exclusive producer holds the topic or one waits.
* Exclusive: refused (ProducerFenced) if any producer is connected or waiting, or if it comes
  back with a topic epoch older than the topic's (it was fenced meanwhile).
* WaitForExclusive: queued while any producer is connected; granted, in arrival order, when the
  topic has no producer left.
* ExclusiveWithFencing: takes the topic at once; every connected producer is disconnected and
  every waiting one refused (ProducerFenced).

Each exclusive grant moves the topic epoch on; a producer that reconnects after its topic was
taken from it carries the older epoch and is refused, which is how the client learns it was
fenced.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from protoframe.generated.pulsar.pulsar_api import ProducerAccessMode, ServerError

__all__ = ["AccessRefused", "Grant", "ProducerAccess", "Waiting"]

Mode = ProducerAccessMode


class AccessRefused(Exception):
    def __init__(self, code: ServerError, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(eq=False)
class Grant:
    """A producer admitted: the topic epoch to answer with (None for a Shared producer)."""

    epoch: int | None


@dataclass(eq=False)
class Waiting:
    """A WaitForExclusive producer queued: ``granted`` runs with its epoch when its turn comes,
    ``refused`` if it is fenced out first."""

    name: str
    granted: Callable[[int], None]
    refused: Callable[[AccessRefused], None]
    fence: Callable[[], None]  # disconnects it once granted


@dataclass(eq=False)
class ProducerAccess:
    """Which producers (by a key their session chooses) write to one topic, and in which mode."""

    epoch: int = -1  # no exclusive producer yet
    exclusive: object | None = None  # key of the exclusive producer
    exclusive_name: str = ""
    connected: dict[object, Callable[[], None]] = field(default_factory=dict)  # key -> fence
    waiting: deque[tuple[object, Waiting]] = field(default_factory=deque)

    def admit(self, key: object, name: str, mode: Mode, epoch: int | None,
              fence: Callable[[], None], waiting: Waiting | None = None) -> Grant | None:
        """Admit a producer (``fence`` disconnects it), or queue it (WaitForExclusive: None is
        returned and ``waiting`` is told later); raise ``AccessRefused``."""
        busy = self.exclusive is not None or bool(self.waiting)
        if mode == Mode.Shared:
            if busy:
                raise AccessRefused(ServerError.ProducerBusy,
                                    f"Topic has an existing exclusive producer: "
                                    f"{self._holder()}")
            self.connected[key] = fence
            return Grant(None)
        if mode == Mode.Exclusive:
            if busy:
                raise AccessRefused(ServerError.ProducerFenced,
                                    f"Topic has an existing exclusive producer: "
                                    f"{self._holder()}")
            if self.connected:
                raise AccessRefused(ServerError.ProducerFenced,
                                    "Topic has existing shared producers")
            if epoch is not None and epoch < self.epoch:
                raise AccessRefused(ServerError.ProducerFenced,
                                    f"Topic epoch has already moved. Current epoch: "
                                    f"{self.epoch}, Producer epoch: {epoch}")
            return self._take(key, name, fence)
        if mode == Mode.ExclusiveWithFencing:
            queued, self.waiting = list(self.waiting), deque()
            for _, other in queued:
                other.refused(AccessRefused(ServerError.ProducerFenced, "Fenced out"))
            fenced, self.connected = list(self.connected.values()), {}
            self.exclusive = None
            for disconnect in fenced:
                disconnect()
            return self._take(key, name, fence)
        # WaitForExclusive
        if self.connected or busy:
            assert waiting is not None, "a WaitForExclusive producer needs its callbacks"
            self.waiting.append((key, waiting))
            return None
        return self._take(key, name, fence)

    def _holder(self) -> str:
        return self.exclusive_name or (self.waiting[0][1].name if self.waiting else "")

    def _take(self, key: object, name: str, fence: Callable[[], None]) -> Grant:
        self.epoch += 1
        self.exclusive, self.exclusive_name = key, name
        self.connected[key] = fence
        return Grant(self.epoch)

    def release(self, key: object) -> None:
        """A producer left (closed, disconnected or fenced), or a waiting one gave up; the next
        waiting producer gets the topic once no producer is left."""
        self.connected.pop(key, None)
        self.waiting = deque((k, w) for k, w in self.waiting if k is not key)
        if self.exclusive is key:
            self.exclusive, self.exclusive_name = None, ""
        if self.connected or not self.waiting:
            return
        next_key, next_waiting = self.waiting.popleft()
        self.epoch += 1
        self.exclusive, self.exclusive_name = next_key, next_waiting.name
        self.connected[next_key] = next_waiting.fence
        next_waiting.granted(self.epoch)
