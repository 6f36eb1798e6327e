"""The pieces of the broker's ``kill -9`` harness (tests/interop/test_pulsar_kill_harness.py):
a broker subprocess that can be killed while it recovers its log, and the official and our
synchronous client behind one small interface, so that one workload runs on both."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pulsar

from protoframe.clients.pulsar import sync
from protoframe.clients.pulsar.broker import BrokerProcess
from protoframe.clients.pulsar.broker.storage import LOG_NAME
from protoframe.clients.pulsar.errors import Timeout

# Long enough for a producer's pending sends to outlive a restart of the broker (under load).
SEND_TIMEOUT_MS = 30_000
OPERATION_TIMEOUT_S = 5


@dataclass
class Launch:
    """How one start of the broker went."""

    url: str  # "" if the process was killed before it listened
    opened_log: float | None  # seconds from spawn until it opened its log (None: not seen)
    ready: float | None  # seconds from spawn until it listened (None: killed before)


class CrashingBroker:
    """The broker as a child process on one data directory, a free port each start unless
    told which.

    ``launch(kill_after=s)`` SIGKILLs it ``s`` seconds after it opened its log to recover it
    (seen in /proc, so that a kill lands in the recovery rather than in Python's imports;
    without /proc, ``s`` seconds after the spawn).
    """

    def __init__(self, data_dir: Path, stderr_path: Path) -> None:
        self.data_dir = data_dir
        self.stderr_path = stderr_path
        self.process: BrokerProcess | None = None

    def launch(self, kill_after: float | None = None, port: int = 0,
               timeout: float = 60.0) -> Launch:
        # The child keeps its own copy of this descriptor: it is closed here once started.
        stderr = open(self.stderr_path, "a")
        broker = BrokerProcess(port=port, data_dir=self.data_dir, stderr=stderr,
                               extra_args=("--log-level", "WARNING"))
        self.process = broker
        outcome: dict[str, Any] = {}

        def start() -> None:
            try:
                outcome["url"] = broker.start(timeout)
            except Exception as exc:  # killed on purpose, or a real failure: the caller says
                outcome["error"] = exc
            outcome["ready"] = time.monotonic()

        spawned = time.monotonic()
        starter = threading.Thread(target=start, name="broker-start", daemon=True)
        starter.start()
        opened = self._wait_for_log(broker, starter, spawned + timeout)
        if kill_after is not None:
            time.sleep(kill_after)
            broker.kill()
        starter.join(timeout)
        stderr.close()
        assert not starter.is_alive(), "the broker neither started nor exited"
        url: str = outcome.get("url", "")
        if not url and kill_after is None:
            raise AssertionError(f"the broker did not start: {outcome.get('error')!r}; "
                                 f"its stderr: {self.stderr_tail()}")
        return Launch(url=url, opened_log=None if opened is None else opened - spawned,
                      ready=outcome["ready"] - spawned if url else None)

    def _wait_for_log(self, broker: BrokerProcess, starter: threading.Thread,
                      deadline: float) -> float | None:
        log_path = str((self.data_dir / LOG_NAME).resolve())
        while broker.process is None and starter.is_alive():
            time.sleep(0.001)
        if broker.process is None or not os.path.isdir("/proc/self/fd"):
            return None
        fds = f"/proc/{broker.process.pid}/fd"
        while starter.is_alive() and time.monotonic() < deadline:
            try:
                for fd in os.listdir(fds):
                    if os.readlink(f"{fds}/{fd}") == log_path:
                        return time.monotonic()
            except OSError:  # it exited, or an fd closed while being looked at
                pass
            time.sleep(0.002)
        return None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def stop(self) -> int:
        return self.process.stop() if self.process is not None else 0

    def stderr_tail(self, lines: int = 20) -> str:
        text = self.stderr_path.read_text() if self.stderr_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


SendDone = Callable[[bool], None]


@dataclass
class Delivery:
    data: bytes
    redelivery_count: int


class Side(Protocol):
    """One client library, as the harness drives it."""

    name: str

    def connect(self, url: str) -> Any: ...
    def producer(self, client: Any, topic: str, name: str, batch: int) -> Any:
        """A producer batching up to ``batch`` messages (1: no batching)."""
    def send_async(self, producer: Any, data: bytes, done: SendDone) -> None: ...
    def subscribe(self, client: Any, topic: str, subscription: str) -> Any: ...
    def receive(self, consumer: Any, timeout_ms: int) -> tuple[Delivery, Any] | None: ...


def close_quietly(thing: Any) -> None:
    """Close a producer, consumer or client whose broker may be gone (errors expected)."""
    try:
        thing.close()
    except Exception:
        pass


class OfficialSide:
    """The official ``pulsar-client``."""

    name = "official"

    def connect(self, url: str) -> Any:
        quiet = logging.getLogger("pulsar.official.kills")
        quiet.setLevel(logging.CRITICAL)
        return pulsar.Client(url, logger=quiet, operation_timeout_seconds=OPERATION_TIMEOUT_S)

    def producer(self, client: Any, topic: str, name: str, batch: int) -> Any:
        return client.create_producer(topic, producer_name=name,
                                      send_timeout_millis=SEND_TIMEOUT_MS,
                                      batching_enabled=batch > 1,
                                      batching_max_messages=max(batch, 2),
                                      batching_max_publish_delay_ms=5)

    def send_async(self, producer: Any, data: bytes, done: SendDone) -> None:
        producer.send_async(data, lambda result, _id: done(result == pulsar.Result.Ok))

    def subscribe(self, client: Any, topic: str, subscription: str) -> Any:
        return client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                batch_index_ack_enabled=True, receiver_queue_size=200)

    def receive(self, consumer: Any, timeout_ms: int) -> tuple[Delivery, Any] | None:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            return None
        return Delivery(msg.data(), msg.redelivery_count()), msg


class OurSide:
    """Our client, through its synchronous facade (the official client's calls)."""

    name = "ours"

    def connect(self, url: str) -> Any:
        return sync.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT_S)

    def producer(self, client: Any, topic: str, name: str, batch: int) -> Any:
        return client.create_producer(topic, name, send_timeout_millis=SEND_TIMEOUT_MS,
                                      batching_enabled=batch > 1,
                                      batching_max_messages=max(batch, 2),
                                      batching_max_publish_delay_ms=5)

    def send_async(self, producer: Any, data: bytes, done: SendDone) -> None:
        producer.send_async(data, lambda error, _id: done(error is None))

    def subscribe(self, client: Any, topic: str, subscription: str) -> Any:
        return client.subscribe(topic, subscription, consumer_type="Shared",
                                initial_position="earliest", batch_index_ack_enabled=True,
                                receiver_queue_size=200)

    def receive(self, consumer: Any, timeout_ms: int) -> tuple[Delivery, Any] | None:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except Timeout:
            return None
        return Delivery(msg.data(), msg.redelivery_count()), msg


SIDES: dict[str, Side] = {"ours": OurSide(), "official": OfficialSide()}
