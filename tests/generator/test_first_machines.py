"""``first:`` with machines and interactions: each first message is a command of its own (its
struct in UPPER_SNAKE) that transitions name and requests pair, ``command_of`` names and hooks
receive; the generated protocol returns it from ``receive_data`` before any frame and sends it
only as the first thing its side sends (``FirstMessageViolation`` otherwise); the generated
client sends a first-message request (PostgreSQL-style ``startup``) and awaits a server's
greeting (MySQL-style ``greeting``), over TCP on 127.0.0.1 against servers built with
``runtime.io.server.serve`` on the generated protocol with ``server=True``.

Wire bytes are packed by hand with ``struct``: PostgreSQL's StartupMessage (an Int32 length
counting itself, Int32 protocol version 196608, then NUL-terminated parameters, no type byte)
and MySQL's packet header (a 3-byte little-endian payload length and a sequence id; the
greeting's payload starts with protocol version 10).
"""

from __future__ import annotations

import asyncio
import importlib
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.generator.output import write_files
from protoframe.runtime.engine.first_gate import FirstGate, FirstMessageViolation
from protoframe.runtime.engine.machine import ProtocolViolation
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.endpoint import Endpoint
from protoframe.runtime.io.server import Session, serve
from tests.support.generate import assert_type_checks, import_generated, write_spec
from tests.support.paths import DATA

SPECS = DATA / "first_machines"
PG = (SPECS / "pgm.yaml").read_text()
MY = (SPECS / "myg.yaml").read_text()
AM = (SPECS / "amh.yaml").read_text()
PARAMS = b"user\x00postgres\x00database\x00db\x00\x00"
VERSION = 196608  # protocol 3.0


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("first_machines")
    write_spec(tmp, "pgm", PG)
    write_spec(tmp, "myg", MY)
    write_spec(tmp, "amh", AM)
    out = generate(tmp / "specs", "specs", ["pgm", "myg", "amh"])
    write_files(tmp / "first_pkg", out.files, out.protocols)
    return tmp


def modules(package: Path, protocol: str) -> SimpleNamespace:
    """The protocol's generated modules, by name (frames, commands, machines, client)."""
    import_generated(package, f"{protocol}.frames", "first_pkg")
    return SimpleNamespace(**{name: importlib.import_module(f"first_pkg.{protocol}.{name}")
                              for name in ("frames", "commands", "machines", "client")})


@pytest.fixture(scope="module")
def pg(package: Path) -> Any:
    return modules(package, "pgm")


@pytest.fixture(scope="module")
def my(package: Path, pg: Any) -> Any:
    return modules(package, "myg")


@pytest.fixture(scope="module")
def am(package: Path, my: Any) -> Any:
    return modules(package, "amh")


def startup(params: bytes, version: int = VERSION) -> bytes:
    body = struct.pack(">I", version) + params
    return struct.pack(">i", 4 + len(body)) + body


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack(">i", 4 + len(body)) + body


def packet(sequence: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([sequence]) + payload


def typed(kind: int, body: bytes) -> bytes:
    return struct.pack(">BH", kind, len(body)) + body


# -- the commands ---------------------------------------------------------------------------------

def test_the_first_messages_are_commands(pg: Any, my: Any) -> None:
    names = [c.name for c in pg.commands.COMMANDS]
    assert names == ["AUTH_OK", "QUERY", "READY", "TERMINATE", "STARTUP"]
    assert pg.commands.BY_BODY[pg.frames.Startup] == "STARTUP"
    assert pg.commands.HOOKS["STARTUP"] == "on_startup"
    first = pg.frames.Startup(version=VERSION, params=PARAMS)
    assert pg.machines.command_of(first) == ("STARTUP", first)
    assert [c.name for c in my.commands.COMMANDS][-2:] == ["LOGIN", "GREETING"]


# -- the protocol: receiving ----------------------------------------------------------------------

class Seen:
    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def on_startup(self, body: Any, frame: Any) -> None:
        self.log.append(("STARTUP", body))

    def on_query(self, body: Any, frame: Any) -> None:
        self.log.append(("QUERY", body))


def test_a_server_receives_the_startup_message_then_frames(pg: Any) -> None:
    hooks = Seen()
    server = pg.machines.PgmProtocol(server=True, hooks=hooks)
    wire = startup(PARAMS) + message(b"Q", b"SELECT 1\x00")
    # The client's StartupMessage arrives before the server answered it: QUERY is refused by
    # the machine (state starting), not by the decoder, which has read the startup message.
    with pytest.raises(ProtocolViolation) as info:
        server.receive_data(wire)
    assert info.value.command == "QUERY" and info.value.state == "starting"
    assert hooks.log == [("STARTUP", pg.frames.Startup(version=VERSION, params=PARAMS))]

    server = pg.machines.PgmProtocol(server=True, hooks=hooks)
    got = [m for i in range(len(wire[:35])) for m in server.receive_data(wire[i:i + 1])]
    assert got == [pg.frames.Startup(version=VERSION, params=PARAMS)]
    assert server.state("session") == "starting"
    assert server.send(pg.frames.Message(body=pg.frames.AuthOk(code=0))) == \
        message(b"R", struct.pack(">I", 0))
    assert server.receive_data(wire[35:]) == [pg.frames.Message(body=pg.frames.Query(
        sql=b"SELECT 1\x00"))]


def test_the_client_sends_the_startup_message_first_and_once(pg: Any) -> None:
    client = pg.machines.PgmProtocol()
    query = pg.frames.Message(body=pg.frames.Query(sql=b"SELECT 1\x00"))
    with pytest.raises(FirstMessageViolation) as info:
        client.send(query)
    assert isinstance(info.value, ProtocolViolation)
    assert info.value.command == "QUERY" and info.value.expected == "Startup"
    assert client.first.pending
    assert client.send(pg.frames.Startup(version=VERSION, params=PARAMS)) == startup(PARAMS)
    assert not client.first.pending and client.state("session") == "starting"
    with pytest.raises(FirstMessageViolation, match="first message goes once"):
        client.send(pg.frames.Startup(version=VERSION, params=b""))
    assert client.receive_data(message(b"R", struct.pack(">I", 0))) == [
        pg.frames.Message(body=pg.frames.AuthOk(code=0))]
    assert client.send(query) == message(b"Q", b"SELECT 1\x00")


def test_a_server_never_sends_the_clients_first_message(pg: Any) -> None:
    server = pg.machines.PgmProtocol(server=True)
    assert not server.first.pending  # its direction declares no first message
    with pytest.raises(FirstMessageViolation):
        server.send(pg.frames.Startup(version=VERSION, params=b""))


def test_only_the_direction_with_a_first_message_starts_in_the_handshake(pg: Any,
                                                                        my: Any) -> None:
    assert pg.machines.PgmProtocol(server=True).decoder.in_handshake
    assert not pg.machines.PgmProtocol().decoder.in_handshake  # to_client declares none
    assert my.machines.MygProtocol(server=True).decoder.in_handshake
    assert my.machines.MygProtocol().decoder.in_handshake


def test_the_server_first_protocol(my: Any) -> None:
    greeting = my.frames.Greeting(sequence=0, server_version=b"10.11.6-MariaDB")
    wire = packet(0, b"\x0a" + b"10.11.6-MariaDB")
    server = my.machines.MygProtocol(server=True)
    with pytest.raises(FirstMessageViolation, match="before the first message Greeting"):
        server.send(my.frames.Packet(body=my.frames.Ok(info=b"")))
    assert server.send(greeting) == wire
    client = my.machines.MygProtocol()
    # Nothing but the greeting may come first from the client's side of the machine.
    with pytest.raises(ProtocolViolation) as info:
        client.send(my.frames.Login(sequence=1, user=b"root"))
    assert not isinstance(info.value, FirstMessageViolation)
    assert info.value.state == "connecting"
    # An OK right after the greeting, before the client logged in, is the machine's to refuse;
    # the greeting before it was handled and is kept.
    client = my.machines.MygProtocol()
    with pytest.raises(ProtocolViolation) as info:
        client.receive_data(wire + typed(0, b"hi"))
    assert info.value.command == "OK" and client.state("session") == "greeted"


def test_the_server_first_protocol_in_order(my: Any) -> None:
    greeting = my.frames.Greeting(sequence=0, server_version=b"8.0.36")
    client = my.machines.MygProtocol()
    assert client.receive_data(packet(0, b"\x0a8.0.36")) == [greeting]
    assert client.state("session") == "greeted"
    with pytest.raises(FirstMessageViolation):  # the client's first message is LOGIN
        client.send(my.frames.Packet(body=my.frames.Ping()))
    assert client.send(my.frames.Login(sequence=1, user=b"root")) == packet(1, b"root")
    with pytest.raises(FirstMessageViolation):
        client.send(my.frames.Greeting(sequence=0, server_version=b""))
    assert client.receive_data(typed(0, b"")) == [my.frames.Packet(body=my.frames.Ok(info=b""))]
    assert client.send(my.frames.Packet(body=my.frames.Ping())) == typed(14, b"")


@settings(max_examples=50, deadline=None)
@given(params=st.binary(max_size=100), sqls=st.lists(st.binary(max_size=40), max_size=4),
       cut=st.integers(1, 20))
def test_any_split_reaches_the_server_protocol(pg: Any, params: bytes, sqls: list[bytes],
                                               cut: int) -> None:
    client = pg.machines.PgmProtocol()
    server = pg.machines.PgmProtocol(server=True)
    first = pg.frames.Startup(version=VERSION, params=params)
    wire = client.send(first)
    got: list[Any] = []
    for i in range(0, len(wire), cut):
        got += server.receive_data(wire[i:i + cut])
    assert got == [first]
    client.receive_data(server.send(pg.frames.Message(body=pg.frames.AuthOk(code=0))))
    frames = [pg.frames.Message(body=pg.frames.Query(sql=s)) for s in sqls]
    wire = b"".join(client.send(f) for f in frames)
    got = []
    for i in range(0, len(wire), cut):
        got += server.receive_data(wire[i:i + cut])
    assert got == frames


def test_the_gate_changes_only_once_the_message_went_out() -> None:
    class A:
        pass

    class B:
        pass

    gate = FirstGate(A, (A, B))
    gate.check("A", A())  # the machines may still refuse it: nothing changes yet
    assert gate.pending
    with pytest.raises(FirstMessageViolation):
        gate.check("B", B())
    gate.sent(A())
    assert not gate.pending
    with pytest.raises(FirstMessageViolation):
        gate.check("A", A())
    gate.check("FRAME", object())


def test_a_header_answered_by_the_servers_first_message(am: Any) -> None:
    f = am.frames
    header = f.ProtocolHeader(major=0, minor=9, revision=1)
    client = am.machines.AmhProtocol()
    server = am.machines.AmhProtocol(server=True)
    assert client.send(header) == b"AMQP\x00\x00\x09\x01"
    assert server.receive_data(b"AMQP\x00\x00\x09\x01") == [header]
    start = f.Start(mechanisms=b"PLAIN")
    wire = server.send(start)
    assert wire == struct.pack(">I", 5) + b"PLAIN"
    assert client.receive_data(wire + struct.pack(">BI", 8, 0)) == [
        start, f.Frame(body=f.Heartbeat())]
    assert client.state("connection") == "open"
    assert not hasattr(am.client.AmhRequests, "start")  # START answers a request


# -- the client over TCP --------------------------------------------------------------------------

def run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_the_startup_request_over_tcp(pg: Any) -> None:
    f = pg.frames
    seen: list[Any] = []

    class Backend(Session[Any]):
        def __init__(self) -> None:
            super().__init__(pg.machines.PgmProtocol(server=True))

        def frame_received(self, frame: Any) -> None:
            seen.append(frame)
            if isinstance(frame, f.Startup):
                self.connection.write(f.Message(body=f.AuthOk(code=0)))
            elif isinstance(frame.body, f.Query):
                self.connection.write(f.Message(body=f.Ready(status=ord("I"))))

    async def scenario() -> None:
        server = await serve("127.0.0.1", 0, Backend)
        endpoint = Endpoint(pg.machines.PgmProtocol(),
                            lambda c: pg.client.PgmRequests(c, timeout=5.0))
        try:
            await endpoint.connect("127.0.0.1", server.port, timeout=5.0)
            assert await endpoint.requests.startup(VERSION, PARAMS) == f.AuthOk(code=0)
            assert await endpoint.requests.query(b"SELECT 1\x00") == f.Ready(status=ord("I"))
        finally:
            endpoint.close()
            await server.stop()
        assert seen == [f.Startup(version=VERSION, params=PARAMS),
                        f.Message(body=f.Query(sql=b"SELECT 1\x00"))]

    run(scenario)


def test_the_greeting_over_tcp(my: Any) -> None:
    f = my.frames

    class Server(Session[Any]):
        def __init__(self) -> None:
            super().__init__(my.machines.MygProtocol(server=True))

        def connection_made(self) -> None:
            self.connection.write(f.Greeting(sequence=0, server_version=b"8.0.36"))

        def frame_received(self, frame: Any) -> None:
            info = b"welcome " + frame.user if isinstance(frame, f.Login) else b"pong"
            self.connection.write(f.Packet(body=f.Ok(info=info)))

    async def scenario() -> None:
        server = await serve("127.0.0.1", 0, Server)
        endpoint = Endpoint(my.machines.MygProtocol(),
                            lambda c: my.client.MygRequests(c, timeout=5.0))
        try:
            await endpoint.connect("127.0.0.1", server.port, timeout=5.0)
            greeting = await endpoint.requests.greeting()
            assert greeting == f.Greeting(sequence=0, server_version=b"8.0.36")
            assert await endpoint.requests.greeting() is greeting  # kept, asked again
            assert await endpoint.requests.login(1, b"root") == f.Ok(info=b"welcome root")
            assert await endpoint.requests.ping() == f.Ok(info=b"pong")
        finally:
            endpoint.close()
            await server.stop()

    run(scenario)


def test_a_connection_that_ends_before_the_greeting_fails_the_wait(my: Any) -> None:
    class Silent(Session[Any]):
        def __init__(self) -> None:
            super().__init__(my.machines.MygProtocol(server=True))

        def connection_made(self) -> None:
            self.connection.close()

    async def scenario() -> None:
        server = await serve("127.0.0.1", 0, Silent)
        endpoint = Endpoint(my.machines.MygProtocol(),
                            lambda c: my.client.MygRequests(c, timeout=5.0))
        try:
            await endpoint.connect("127.0.0.1", server.port, timeout=5.0)
            with pytest.raises(ConnectionClosed):
                await endpoint.requests.greeting()
            with pytest.raises(TimeoutError):
                await my.client.MygRequests(endpoint.connection).greeting(timeout=0.05)
        finally:
            endpoint.close()
            await server.stop()

    run(scenario)


def test_the_header_request_over_tcp(am: Any) -> None:
    f = am.frames

    class Broker(Session[Any]):
        def __init__(self) -> None:
            super().__init__(am.machines.AmhProtocol(server=True))

        def frame_received(self, frame: Any) -> None:
            if isinstance(frame, f.ProtocolHeader):
                self.connection.write(f.Start(mechanisms=b"PLAIN AMQPLAIN"))

    async def scenario() -> None:
        server = await serve("127.0.0.1", 0, Broker)
        endpoint = Endpoint(am.machines.AmhProtocol(),
                            lambda c: am.client.AmhRequests(c, timeout=5.0))
        try:
            await endpoint.connect("127.0.0.1", server.port, timeout=5.0)
            start = await endpoint.requests.protocol_header(0, 9, 1)
            assert start == f.Start(mechanisms=b"PLAIN AMQPLAIN")
        finally:
            endpoint.close()
            await server.stop()

    run(scenario)


# -- types, docs and specs that cannot be said ----------------------------------------------

APP = '''\
"""A typed application on the generated first-message protocols; must pass mypy --strict."""

from __future__ import annotations

from first_pkg.myg import frames as myf
from first_pkg.myg.client import MygRequests
from first_pkg.myg.machines import MygHooks, MygProtocol
from first_pkg.pgm import frames
from first_pkg.pgm.client import PgmRequests
from first_pkg.pgm.machines import PgmHooks, PgmProtocol
from protoframe.runtime.io.endpoint import Endpoint


class Hooks(PgmHooks):
    def on_startup(self, body: frames.Startup, frame: frames.Startup) -> None:
        print(body.version)


class MyHooks(MygHooks):
    def on_greeting(self, body: myf.Greeting, frame: myf.Greeting) -> None:
        print(body.server_version)


async def main() -> None:
    pg = Endpoint(PgmProtocol(hooks=Hooks()), PgmRequests)
    ok: frames.AuthOk = await pg.requests.startup(196608, b"")
    sent: bytes = PgmProtocol().send(frames.Startup(version=196608, params=b""))
    got: list[frames.Message | frames.Startup] = PgmProtocol(server=True).receive_data(sent)
    my = Endpoint(MygProtocol(hooks=MyHooks()), MygRequests)
    greeting: myf.Greeting = await my.requests.greeting(timeout=1.0)
    print(ok, got, greeting)
'''


@pytest.mark.slow
def test_the_generated_packages_type_check(package: Path) -> None:
    (package / "app_first.py").write_text(APP)
    assert_type_checks(package, "first_pkg", "app_first.py")


def test_the_reference_page_names_the_first_messages_commands(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "pgm", PG), "specs", ["pgm"]).docs["pgm.md"]
    assert ("| `STARTUP` | first message | [`Startup`](#layout-startup) | the first message to "
            "server | request, answered by `AUTH_OK` | `session` |") in page
    assert "idle --> starting: send STARTUP" in page


FLAGS = ("    - {name: type, type: u8}\n",
         "    - {name: type, type: u8}\n    - {name: flags, type: u8}\n")


@pytest.mark.parametrize(("edits", "line_has", "token", "message"), [
    ([FLAGS, ("    - {request: STARTUP, response: AUTH_OK}\n",
              "    - {request: STARTUP, response: AUTH_OK, frame_fields: [flags]}\n")],
     "request: STARTUP", "flags]",
     "frame_fields: 'flags' is a field of the frame, which the first message STARTUP is sent "
     "without"),
    ([FLAGS, ("    - {request: STARTUP, response: AUTH_OK}\n",
              "    - {request: STARTUP, response: AUTH_OK, correlate: [flags]}\n")],
     "request: STARTUP", "flags]",
     "correlate: 'flags' is a field of the frame, which the first message STARTUP is sent "
     "without"),
    ([("    - {request: STARTUP, response: AUTH_OK}\n",
       "    - {request: STARTUP, response: AUTH_OK}\n    - {request: QUERY, response: READY, "
       "method: greeting}\n"), ("  to_server: Startup\n",
                                "  to_server: Startup\n  to_client: Greeting\n"),
      ("structs:\n", "structs:\n  Greeting:\n    fields:\n      - {name: x, type: u8}\n")],
     "method: greeting", "{request: QUERY",
     "the method 'greeting' awaits the server's first message"),
    ([("  to_server: Startup\n", "  to_server: AuthOk\n")], "to_server: AuthOk", "AuthOk",
     "first: AuthOk is the command AUTH_OK, which the frame's switch names too"),
])
def test_what_a_first_message_with_machines_cannot_say(tmp_path: Path,
                                                       edits: list[tuple[str, str]],
                                                       line_has: str, token: str,
                                                       message: str) -> None:
    text = PG
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "pgm", text), "specs", ["pgm"])
    errors = [str(e) for e in info.value.errors]
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if line_has in ln)
    column = text.splitlines()[line - 1].index(token) + 1
    found = next((e for e in errors if message in e), errors)
    assert found == errors[0], errors
    assert found.startswith(f"specs/pgm/pgm.yaml:{line}:{column}: "), errors
