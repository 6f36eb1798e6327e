"""The real servers of ``make peers`` as the tests get them (tests/support/mariadb_server.py,
rabbitmq_server.py, websocket_server.py, server_fixtures.py): each starts on 127.0.0.1, speaks
its protocol's first bytes, takes the credentials it was given, and stops, by ``stop`` or,
should the test process be killed, by the watchdog, leaving no process and no files behind.

The byte checks here are the smallest that tell the right server answered; the example projects
speak these protocols with generated code.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Protocol

import pytest

from tests.support import mariadb_server, rabbitmq_server, websocket_server
from tests.support.mariadb_server import MariaDB
from tests.support.orphan_watchdog import group_alive
from tests.support.paths import ROOT
from tests.support.rabbitmq_server import RabbitMQ
from tests.support.server_process import ServerProcess, find_program
from tests.support.websocket_server import WebSocketServer

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD = 1
FRAME_END = 0xCE
WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3
TIMEOUT = 30.0


class _Started(Protocol):
    host: str
    port: int
    server: ServerProcess

    def stop(self, timeout: float = 60) -> None: ...


SERVERS = {"mariadb": mariadb_server, "rabbitmq": rabbitmq_server,
           "websocket": websocket_server}


def skip_unless_available(module: ModuleType) -> None:
    reason = module.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def receive_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def mariadb_greeting(host: str, port: int) -> bytes:
    """The payload of the packet a MariaDB server sends first (3-byte length, sequence id 0)."""
    with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
        header = receive_exactly(sock, 4)
        length = int.from_bytes(header[:3], "little")
        assert header[3] == 0  # the first packet of the exchange
        return receive_exactly(sock, length)


def amqp_frame(sock: socket.socket) -> tuple[int, int, bytes]:
    """One AMQP 0-9-1 frame: (type, channel, payload), its frame-end octet checked."""
    kind, channel, size = struct.unpack(">BHI", receive_exactly(sock, 7))
    payload = receive_exactly(sock, size + 1)
    assert payload[-1] == FRAME_END
    return kind, channel, payload[:-1]


def amqp_start(host: str, port: int) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection((host, port), timeout=TIMEOUT)
    sock.sendall(AMQP_HEADER)
    kind, channel, payload = amqp_frame(sock)
    assert (kind, channel) == (FRAME_METHOD, 0)
    return sock, payload


def websocket_upgrade(host: str, port: int) -> tuple[socket.socket, bytes, bytes]:
    """A connection upgraded by hand: (socket, the response's head, the key sent)."""
    key = base64.b64encode(os.urandom(16))
    sock = socket.create_connection((host, port), timeout=TIMEOUT)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n" % (host.encode(), port, key))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1024)
        assert chunk, f"connection closed in the response's head: {head!r}"
        head += chunk
    return sock, head.split(b"\r\n\r\n", 1)[0], key


def assert_speaks(name: str, host: str, port: int) -> None:
    """The first bytes of each server's protocol, from a fresh connection."""
    if name == "mariadb":
        greeting = mariadb_greeting(host, port)
        assert greeting[0] == 10  # protocol version 10: the handshake packet
        version = greeting[1:greeting.index(b"\x00", 1)]
        assert b"MariaDB" in version
    elif name == "rabbitmq":
        sock, payload = amqp_start(host, port)
        with sock:
            # Connection.Start (class 10, method 10) for protocol version 0-9.
            assert payload[:6] == struct.pack(">HHBB", 10, 10, 0, 9)
    else:
        sock, head, key = websocket_upgrade(host, port)
        sock.close()
        status, *fields = head.split(b"\r\n")
        assert status.startswith(b"HTTP/1.1 101 ")
        accept = base64.b64encode(hashlib.sha1(key + WEBSOCKET_GUID).digest())
        assert b"sec-websocket-accept: " + accept in (line.lower()[:22] + line[22:]
                                                      for line in fields)


def processes_mentioning(directory: Path) -> list[str]:
    """Command lines of the processes that name ``directory`` in their arguments or their
    environment: a server left behind would, and so would a daemon it started in a session of
    its own (an epmd: RabbitMQ's processes all have HOME there)."""
    found = []
    needle = str(directory).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environment = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in command or needle in environment:
            words = command.replace(b"\x00", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {words}")
    return found


def wait_until_gone(groups: list[int], directory: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while (any(group_alive(group) for group in groups) or directory.exists()
           or processes_mentioning(directory)):
        assert time.monotonic() < deadline, (
            f"still there after {timeout:.0f} s: groups "
            f"{[group for group in groups if group_alive(group)]}, directory "
            f"{directory.exists()}, processes {processes_mentioning(directory)}")
        time.sleep(0.5)


@pytest.mark.parametrize("name", SERVERS)
def test_server_starts_speaks_first_and_stops_leaving_nothing(name: str) -> None:
    module = SERVERS[name]
    skip_unless_available(module)
    started: _Started = module.start()
    try:
        assert started.host == "127.0.0.1"
        assert started.server.alive() == started.server.groups() != []
        assert_speaks(name, started.host, started.port)
        running = processes_mentioning(started.server.directory)
        if name == "rabbitmq":  # found by their environment: the check below can see them
            assert any("beam.smp" in line for line in running), running
            assert any("epmd" in line for line in running), running
    finally:
        started.stop()
    assert started.server.alive() == []
    assert not started.server.directory.exists()
    assert processes_mentioning(started.server.directory) == []
    with pytest.raises(OSError), socket.create_connection((started.host, started.port), 5):
        pass


# A test process that starts a server, says where, and waits to be SIGKILLed.
KILLED_STARTER = """
import sys, time
from tests.support import {name}_server as module
started = module.start()
print(started.port, started.server.directory, *started.server.groups(), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("name", SERVERS)
def test_server_of_a_killed_test_process_is_ended_by_the_watchdog(name: str) -> None:
    skip_unless_available(SERVERS[name])
    starter = subprocess.Popen([sys.executable, "-c", KILLED_STARTER.format(name=name)],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        port, directory, *groups = starter.stdout.readline().split()
        assert groups and all(group_alive(int(group)) for group in groups)
        assert_speaks(name, "127.0.0.1", int(port))
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
    wait_until_gone([int(group) for group in groups], Path(directory))


def test_mariadb_fixture_lets_its_user_into_its_database(mariadb_server: MariaDB) -> None:
    client = find_program("mariadb")
    if client is None:
        pytest.skip("the mariadb client is not installed (it comes with mariadb-server)")
    assert mariadb_greeting(mariadb_server.host, mariadb_server.port)[0] == 10
    common = [client, "--no-defaults", "-h", mariadb_server.host, "-P", str(mariadb_server.port),
              "-u", mariadb_server.user, "--batch", "--skip-column-names"]
    query = "SELECT DATABASE(), CURRENT_USER()"
    done = subprocess.run([*common, f"-p{mariadb_server.password}", mariadb_server.database,
                           "-e", query], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [mariadb_server.database, f"{mariadb_server.user}@%"]
    refused = subprocess.run([*common, "-pnot-the-password", "-e", query], capture_output=True,
                             text=True, timeout=TIMEOUT)
    assert refused.returncode != 0 and "Access denied" in refused.stderr


def amqp_start_ok(user: str, password: str) -> bytes:
    """Connection.Start-Ok, PLAIN, as one method frame on channel 0."""
    def short(text: bytes) -> bytes:
        return bytes([len(text)]) + text

    response = b"\x00" + user.encode() + b"\x00" + password.encode()
    payload = (struct.pack(">HH", 10, 11) + struct.pack(">I", 0) + short(b"PLAIN")
               + struct.pack(">I", len(response)) + response + short(b"en_US"))
    return struct.pack(">BHI", FRAME_METHOD, 0, len(payload)) + payload + bytes([FRAME_END])


def amqp_login_answer(node: RabbitMQ, password: str) -> tuple[int, int] | None:
    """The (class, method) the node answers a Start-Ok with, None if it just closes."""
    sock, _ = amqp_start(node.host, node.port)
    with sock:
        sock.sendall(amqp_start_ok(node.user, password))
        try:
            kind, _, payload = amqp_frame(sock)
        except (AssertionError, ConnectionResetError):  # closed, with or without a reset
            return None
        assert kind == FRAME_METHOD
        found: tuple[int, int] = struct.unpack(">HH", payload[:4])
        return found


def test_rabbitmq_fixture_lets_its_user_in(rabbitmq_server: RabbitMQ) -> None:
    # Connection.Tune (class 10, method 30) follows a login the node accepts.
    assert amqp_login_answer(rabbitmq_server, rabbitmq_server.password) == (10, 30)
    # A refused one is closed: RabbitMQ drops the socket, or says Connection.Close (10, 50).
    assert amqp_login_answer(rabbitmq_server, "not-the-password") in (None, (10, 50))


def test_websocket_fixture_echoes_a_masked_message(websocket_server: WebSocketServer) -> None:
    sock, head, _ = websocket_upgrade(websocket_server.host, websocket_server.port)
    with sock:
        assert head.startswith(b"HTTP/1.1 101 ")
        message, mask = b"hello, protoframe", os.urandom(4)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(message))
        # FIN + text; the client's frames are masked (RFC 6455, section 5.3).
        sock.sendall(bytes([0x81, 0x80 | len(message)]) + mask + masked)
        # The server's are not: FIN + text, the length, the payload as sent.
        assert receive_exactly(sock, 2 + len(message)) == bytes([0x81, len(message)]) + message
