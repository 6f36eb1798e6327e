"""The command-line runners of the embedded peers, as the processes a user starts.

Each test starts ``python -m protoframe.clients.<protocol> <command> ...`` with free ports on
127.0.0.1, reads the ready line(s) from its stdout, does a real round trip with our own client
(and, for Pravega, with the real ``pravega`` client when it is installed), then sends SIGTERM
(or SIGINT) and expects exit status 0. Bad options must exit with argparse's status 2, an
address in use with status 1 and a one-line reason. Every wait is bounded; every process started
is killed, by its own handle, if it is still running at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import grpc  # type: ignore[import-untyped]
import pytest

from protoframe.clients.pravega import (
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
    SegmentWriter,
)
from protoframe.clients.pravega.controller import SERVICE, RemoteSegmentTable, segment_name
from protoframe.clients.tank import FIRST_AVAILABLE, Message, TankClient
from protoframe.clients.tubemq import Consumer, Producer
from protoframe.generated.pravega import controller as pb
from protoframe.runtime.errors import ConnectionClosed
from tests.support.paths import ROOT
from tests.support.peer_clients import needs_pravega

pytestmark = pytest.mark.slow  # starts every embedded peer as a subprocess

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
CLIENT_TIMEOUT = 20.0
READY_LINE = re.compile(r"(?:(?P<service>\w+) )?listening on (?P<url>tcp://\S+)")

T = TypeVar("T")


class Runner:
    """One runner process; a thread per pipe keeps them drained (a full pipe would block it)."""

    def __init__(self, package: str, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"protoframe.clients.{package}", *args], cwd=ROOT, env=env,
            text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(self.process.stdout, self.lines.put),
                             daemon=True),
            threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append),
                             daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pump(pipe: Any, sink: Any) -> None:
        for line in pipe:
            sink(line)
        sink("")

    def ready(self, *services: str | None) -> dict[str | None, tuple[str, int]]:
        """Wait for one ready line per service; each service's (host, port)."""
        wanted = set(services)
        found: dict[str | None, tuple[str, int]] = {}
        deadline = time.monotonic() + READY_TIMEOUT
        while wanted - found.keys():
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                raise AssertionError(f"no ready line for {sorted(map(str, wanted))} within "
                                     f"{READY_TIMEOUT} s; stderr:\n{self.stderr_text()}") from None
            if not line:
                raise AssertionError(f"the runner exited with {self.process.wait(STOP_TIMEOUT)} "
                                     f"before it was ready; stderr:\n{self.stderr_text()}")
            match = READY_LINE.fullmatch(line.strip())
            assert match is not None, f"unexpected output {line!r}"
            url = urlsplit(match["url"])
            assert url.hostname is not None and url.port is not None
            found[match["service"]] = (url.hostname, url.port)
        assert set(found) == wanted
        return found

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig``; the exit status, which must come within ``STOP_TIMEOUT``."""
        self.process.send_signal(sig)
        return self.process.wait(STOP_TIMEOUT)

    def finish(self, timeout: float = STOP_TIMEOUT) -> int:
        """The exit status of a runner expected to exit by itself."""
        status = self.process.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        return status

    def stderr_text(self) -> str:
        return "".join(self.stderr)[-4000:]

    def close(self) -> None:
        """Kill the process if it still runs, and release its pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)
        for thread in self._threads:
            thread.join(STOP_TIMEOUT)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@contextmanager
def running(package: str, *args: str) -> Iterator[Runner]:
    runner = Runner(package, *args)
    try:
        yield runner
    finally:
        runner.close()


def run_client(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one client scenario with a hard timeout."""
    return asyncio.run(asyncio.wait_for(coroutine, CLIENT_TIMEOUT))


# ---- TANK -----------------------------------------------------------------------------------


def test_tank_broker_serves_the_tank_client() -> None:
    with running("tank", "broker", "--port", "0", "--topic", "events=2", "--auto-create", "3",
                 "--log-level", "warning") as runner:
        host, port = runner.ready(None)[None]
        assert host == "127.0.0.1"

        async def scenario() -> None:
            async with TankClient(host, port, operation_timeout=5.0,
                                  connect_timeout=5.0) as tank:
                await tank.produce("events", 1, [Message(b"hello", key=b"k")])
                result = await tank.consume("events", 1, FIRST_AVAILABLE)
                assert [(m.seq_num, m.key, m.value) for m in result.messages] == \
                    [(1, b"k", b"hello")]
                # --auto-create: a topic nobody declared has three partitions on first use.
                await tank.produce("fresh", 2, [Message(b"auto")])
                fresh = await tank.consume("fresh", 2, FIRST_AVAILABLE)
                assert [m.value for m in fresh.messages] == [b"auto"]

        run_client(scenario())
        assert runner.stop() == 0, runner.stderr_text()


# ---- Pravega --------------------------------------------------------------------------------


async def write_and_read(store: tuple[str, int], segment: str, payloads: list[bytes], *,
                         create: bool) -> list[bytes]:
    """Append ``payloads`` to ``segment`` with our writer; every event our reader then reads."""
    async with await PravegaConnection.connect(*store, request_timeout=5.0,
                                               connect_timeout=5.0) as connection:
        if create:
            await connection.requests.create_segment(segment, 0, 0, "")
        writer = await SegmentWriter.open(connection, segment)
        for payload in payloads:
            await writer.write(payload)
        return [event.data for event in await SegmentReader(connection, segment).read_all()]


async def read_events(store: tuple[str, int], segment: str) -> list[bytes]:
    async with await PravegaConnection.connect(*store, request_timeout=5.0,
                                               connect_timeout=5.0) as connection:
        return [event.data for event in await SegmentReader(connection, segment).read_all()]


async def rpc(controller: tuple[str, int], name: str, request: Any, answer: type[T]) -> T:
    """Call one ControllerService RPC with our generated messages as the (de)serializers."""
    decoder: Any = answer  # every generated message class has ``decode``
    async with grpc.aio.insecure_channel(f"{controller[0]}:{controller[1]}") as channel:
        method = channel.unary_unary(f"/{SERVICE}/{name}",
                                     request_serializer=lambda m: m.encode(),
                                     response_deserializer=decoder.decode)
        response: T = await method(request, timeout=10.0)
        return response


async def create_stream(controller: tuple[str, int], scope: str, stream: str,
                        segments: int) -> None:
    status = await rpc(controller, "createScope", pb.ScopeInfo(scope=scope), pb.CreateScopeStatus)
    assert status.status == pb.CreateScopeStatus.Status.SUCCESS
    config = pb.StreamConfig(streamInfo=pb.StreamInfo(scope=scope, stream=stream),
                             scalingPolicy=pb.ScalingPolicy(minNumSegments=segments))
    created = await rpc(controller, "createStream", config, pb.CreateStreamStatus)
    assert created.status == pb.CreateStreamStatus.Status.SUCCESS


async def store_of(controller: tuple[str, int], scope: str, stream: str,
                   number: int) -> tuple[str, int]:
    """Where the controller sends a client for one segment (``getURI``)."""
    segment_id = pb.SegmentId(streamInfo=pb.StreamInfo(scope=scope, stream=stream),
                              segmentId=number)
    uri = await rpc(controller, "getURI", segment_id, pb.NodeUri)
    return uri.endpoint, uri.port


def test_pravega_store_serves_our_writer_and_reader_and_keeps_its_directory(
        tmp_path: Path) -> None:
    segment = "scope/stream/0.#epoch.0"
    with running("pravega", "store", "--port", "0", "--data-dir", str(tmp_path),
                 "--log-level", "WARNING") as runner:
        store = runner.ready(None)[None]
        assert run_client(write_and_read(store, segment, [b"one", b"two"], create=True)) == \
            [b"one", b"two"]
        assert runner.stop() == 0, runner.stderr_text()
    with running("pravega", "store", "--port", "0", "--data-dir", str(tmp_path)) as runner:
        store = runner.ready(None)[None]
        assert run_client(read_events(store, segment)) == [b"one", b"two"]
        assert runner.stop(signal.SIGINT) == 0, runner.stderr_text()


@pytest.mark.parametrize("advertised", [None, "localhost"])
def test_pravega_standalone_controller_sends_clients_to_its_store(advertised: str | None
                                                                  ) -> None:
    extra = ("--advertised-host", advertised) if advertised else ()
    with running("pravega", "standalone", "--controller-port", "0", "--store-port", "0",
                 *extra, "--log-level", "WARNING") as runner:
        ready = runner.ready("store", "controller")
        host = advertised or "127.0.0.1"

        async def scenario() -> None:
            await create_stream(ready["controller"], "demo", "events", 1)
            assert await store_of(ready["controller"], "demo", "events", 0) == \
                (host, ready["store"][1])
            servers = await rpc(ready["controller"], "getControllerServerList",
                                pb.ServerRequest(), pb.ServerResponse)
            assert [(n.endpoint, n.port) for n in servers.nodeURI] == \
                [(host, ready["controller"][1])]
            # The controller created the segment in the store: no create_segment here.
            assert await write_and_read(ready["store"], segment_name("demo", "events", 0),
                                        [b"e1"], create=False) == [b"e1"]

        run_client(scenario())
        assert runner.stop() == 0, runner.stderr_text()


def test_pravega_controller_creates_and_seals_segments_in_a_separate_store() -> None:
    with running("pravega", "store", "--port", "0", "--log-level", "WARNING") as store_runner:
        store = store_runner.ready(None)[None]
        with running("pravega", "controller", "--port", "0", "--store", f"{store[0]}:{store[1]}",
                     "--log-level", "WARNING") as controller_runner:
            controller = controller_runner.ready(None)[None]

            async def scenario() -> None:
                await create_stream(controller, "split", "events", 2)
                for number in range(2):
                    assert await store_of(controller, "split", "events", number) == store
                    assert await write_and_read(store, segment_name("split", "events", number),
                                                [b"n%d" % number], create=False) == \
                        [b"n%d" % number]
                sealed = await rpc(controller, "sealStream",
                                   pb.StreamInfo(scope="split", stream="events"),
                                   pb.UpdateStreamStatus)
                assert sealed.status == pb.UpdateStreamStatus.Status.SUCCESS
                async with await PravegaConnection.connect(
                        *store, request_timeout=5.0, connect_timeout=5.0) as connection:
                    info = await connection.requests.get_stream_segment_info(
                        segment_name("split", "events", 1), "")
                    assert info.exists and info.is_sealed and info.write_offset > 0

            run_client(scenario())
            assert controller_runner.stop() == 0, controller_runner.stderr_text()
        assert store_runner.stop() == 0, store_runner.stderr_text()


def test_the_separate_controller_keeps_changes_the_store_could_not_take_yet() -> None:
    """What ``controller --store`` relies on, in process: a change made while the store is
    down stays queued and fails the call; the next sync sends it; "already there" is done."""

    async def scenario() -> None:
        store = EmbeddedSegmentStore()
        await store.start()
        table = RemoteSegmentTable(store.address, timeout=2.0)
        try:
            store.table.create("s/t/0.#epoch.0")  # e.g. kept on disk by a store that restarted
            table.create("s/t/0.#epoch.0")
            await table.sync()
            assert not table.pending
            await store.stop()
            table.create("s/t/1.#epoch.0")
            with pytest.raises(ConnectionClosed):
                await table.sync()
            assert list(table.pending) == [("create", "s/t/1.#epoch.0")]
            await store.start()  # the same port again
            table.seal(table.segments["s/t/1.#epoch.0"])
            await table.sync()
            assert not table.pending
            segment = store.table.get("s/t/1.#epoch.0")
            assert segment is not None and segment.sealed
        finally:
            await table.close()
            await store.stop()

    run_client(scenario())


# The real client in a subprocess of its own (it can block holding the GIL): argv = controller
# URI, scope, stream, then the events to write, each routed by its own text.
REAL_WRITER = r"""
import json, sys
import pravega_client
from tests.support.paths import ROOT

uri, scope, stream, *events = sys.argv[1:]
manager = pravega_client.StreamManager(uri, False, False)
result = {"scope": manager.create_scope(scope), "stream": manager.create_stream(scope, stream, 1)}
writer = manager.create_writer(scope, stream)
for event in events:
    writer.write_event_bytes(event.encode(), routing_key=event)
writer.flush()
print(json.dumps(result), flush=True)
"""


@contextmanager
def pravega(deployment: str) -> Iterator[tuple[tuple[str, int], tuple[str, int], list[Runner]]]:
    """Store and controller addresses, as one ``standalone`` runner or as two (``split``); the
    runners come last first, the order to stop them in."""
    with ExitStack() as stack:
        if deployment == "standalone":
            runner = stack.enter_context(running(
                "pravega", "standalone", "--controller-port", "0", "--store-port", "0",
                "--log-level", "WARNING"))
            ready = runner.ready("store", "controller")
            yield ready["store"], ready["controller"], [runner]
        else:
            store_runner = stack.enter_context(running(
                "pravega", "store", "--port", "0", "--log-level", "WARNING"))
            store = store_runner.ready(None)[None]
            controller_runner = stack.enter_context(running(
                "pravega", "controller", "--port", "0", "--store", f"{store[0]}:{store[1]}",
                "--log-level", "WARNING"))
            controller = controller_runner.ready(None)[None]
            yield store, controller, [controller_runner, store_runner]


@needs_pravega
@pytest.mark.parametrize("deployment", ["standalone", "split"])
def test_the_real_pravega_client_writes_through_the_runners(deployment: str) -> None:
    events = ["first", "second", "third"]
    with pravega(deployment) as (store, controller, runners):
        peer = subprocess.run(
            [sys.executable, "-c", REAL_WRITER, f"tcp://{controller[0]}:{controller[1]}",
             "real", "events", *events],
            capture_output=True, text=True, timeout=CLIENT_TIMEOUT + 10)
        assert peer.returncode == 0, peer.stderr[-3000:]
        assert json.loads(peer.stdout.splitlines()[-1]) == {"scope": True, "stream": True}
        assert run_client(read_events(store, segment_name("real", "events", 0))) == \
            [e.encode() for e in events]
        for runner in runners:
            assert runner.stop() == 0, runner.stderr_text()


# ---- TubeMQ ---------------------------------------------------------------------------------


def test_tubemq_peer_serves_our_producer_and_consumer() -> None:
    with running("tubemq", "peer", "--partitions", "3", "--log-level", "WARNING") as runner:
        ready = runner.ready("master", "broker")
        master = "{}:{}".format(*ready["master"])

        async def scenario() -> None:
            producer = await Producer.create(master, "orders", heartbeat_interval=None)
            try:
                assert [(p.topic, p.partitions) for p in producer.partitions] == [("orders", 3)]
                assert {p.broker.address for p in producer.partitions} == \
                    {"{}:{}".format(*ready["broker"])}
                sent = await producer.send(b"hello", partition=2)
            finally:
                await producer.close()
            consumer = await Consumer.create(master, "orders", "group",
                                             heartbeat_interval=None)
            try:
                assert sorted(consumer.partitions) == [0, 1, 2]
                got = await consumer.get_messages(sent.partition)
                assert [(m.partition, m.data) for m in got] == [(2, b"hello")]
                assert await consumer.commit(2) == 1
            finally:
                await consumer.close()

        run_client(scenario())
        assert runner.stop(signal.SIGINT) == 0, runner.stderr_text()


# ---- bad options and addresses in use -------------------------------------------------------


@pytest.mark.parametrize(("package", "args", "complaint"), [
    ("tank", ["broker", "--topic", "events"], "expected NAME=PARTITIONS"),
    ("tank", ["broker", "--port", "65536"], "expected a port 0..65535"),
    ("tank", ["broker", "--auto-create", "0"], "expected 1..65530 partitions"),
    ("pravega", ["store", "--port", "-1"], "expected a port 0..65535"),
    ("pravega", ["controller", "--port", "0"], "the following arguments are required: --store"),
    ("pravega", ["controller", "--store", "nowhere"], "expected HOST:PORT"),
    ("pravega", ["standalone", "--log-level", "loud"], "invalid choice: 'LOUD'"),
    ("tubemq", ["peer", "--partitions", "0"], "expected a positive integer"),
    ("tubemq", ["peer", "--master-port", "65536"], "expected a port 0..65535"),
])
def test_a_bad_option_exits_with_status_2(package: str, args: list[str],
                                          complaint: str) -> None:
    with running(package, *args) as runner:
        assert runner.finish() == 2
        assert runner.lines.get(timeout=STOP_TIMEOUT) == ""  # nothing on stdout
        assert complaint in runner.stderr_text()


@pytest.mark.parametrize(("package", "args", "complaint"), [
    ("tank", ["broker", "--port"], "cannot listen on 127.0.0.1:"),
    ("pravega", ["store", "--port"], "the segment store cannot listen on 127.0.0.1:"),
    ("pravega", ["standalone", "--store-port", "0", "--controller-port"],
     "the controller cannot listen on 127.0.0.1:"),
])
def test_an_address_in_use_exits_with_status_1_and_says_so(package: str, args: list[str],
                                                           complaint: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with running(package, *args, str(port)) as runner:
            assert runner.finish() == 1
            assert runner.lines.get(timeout=STOP_TIMEOUT) == ""  # never ready
            assert f"{complaint}{port}" in runner.stderr_text()


@pytest.mark.parametrize("option", ["--master-port", "--broker-port"])
def test_tubemq_peer_listens_on_the_ports_it_is_given(option: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with running("tubemq", "peer", option, str(port)) as runner:
            assert runner.finish() == 1
            assert runner.lines.get(timeout=STOP_TIMEOUT) == ""  # never ready
            assert "cannot listen on 127.0.0.1" in runner.stderr_text()
            assert str(port) in runner.stderr_text()
