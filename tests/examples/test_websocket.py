"""examples/websocket, WebSocket (RFC 6455) described as a user project: its generated package
is in sync with its spec (``protoframe check`` run in the example's folder), its layouts
match bytes packed by hand from RFC 6455 (sections 1.3, 4.1, 4.2.2, 5.2, 5.5.1, 5.7) and
round-trip, the example passes ``mypy --strict``, and its client talks to the ``websockets``
package's server (tests/support/websocket_server.py, on 127.0.0.1) over TCP: the upgrade,
text and binary echoes of every length form, a message in three fragments, ping and pong,
and the closing handshake with a status code. Those tests record the transport and check
that every byte written is a generated ``encode`` and every byte read was consumed by the
generated ``StreamDecoder``: the example holds no framing of its own.
"""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.errors import (
    FrameTooLargeError,
    RequirementError,
    RequirementUnmetError,
    ReservedBitsError,
    UnknownEnumValueError,
    ValueNotAllowedError,
)
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.paths import ROOT
from tests.support.websocket_server import WebSocketServer

EXAMPLE = ROOT / "examples" / "websocket"
sys.path.insert(0, str(EXAMPLE / "src"))

from websocket_app.client import Message, WebSocketClient, Wire, accept_for  # noqa: E402
from websocket_app.proto.websocket import frames  # noqa: E402
from websocket_app.proto.websocket.frames import (  # noqa: E402
    Accepted,
    CloseBody,
    Frame,
    Opcode,
    StreamDecoder,
    Upgrade,
)

# ---------------------------------------------------------------------------------------------
# the project and its generated package


def test_the_generated_package_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "-m", "protoframe", "check"], cwd=EXAMPLE,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "generated code is up to date" in result.stdout


@pytest.mark.slow
def test_the_example_passes_mypy_strict() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"], cwd=EXAMPLE, capture_output=True,
        text=True, timeout=600, check=False,
        env={"MYPYPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found in 5 source files" in result.stdout


# ---------------------------------------------------------------------------------------------
# the spec against RFC 6455, bytes packed by hand

# RFC 6455 4.1 and 4.2.2: the sample key and the accept value the RFC works out from it.
SAMPLE_KEY = "dGhlIHNhbXBsZSBub25jZQ=="
SAMPLE_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_the_upgrade_request_and_its_answer() -> None:
    headers = ("Host: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {SAMPLE_KEY}\r\nSec-WebSocket-Version: 13")
    wire = b"GET /chat HTTP/1.1\r\n" + headers.encode() + b"\r\n\r\n"
    request = Upgrade(target="/chat", headers=headers)
    assert request.encode() == wire
    assert StreamDecoder(to_server=True).feed(wire) == [request]
    answer = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + SAMPLE_ACCEPT.encode()
              + b"\r\n\r\n")
    decoder = StreamDecoder()
    [accepted] = decoder.feed(answer + b"\x81\x05Hel")
    assert isinstance(accepted, Accepted) and accepted.status == "101"
    assert accepted.reason == "Switching Protocols" and accepted.encode() == answer
    assert decoder.feed(b"lo") == [Frame(fin=True, opcode=Opcode.TEXT, masking_key=None,
                                         payload=b"Hello")]
    assert accept_for(SAMPLE_KEY) == SAMPLE_ACCEPT


def header(opcode: int, size: int, key: int | None, fin: bool = True) -> bytes:
    b0 = (0x80 if fin else 0) | opcode
    mask = 0x80 if key is not None else 0
    if size < 126:
        head = struct.pack(">BB", b0, mask | size)
    elif size < 65536:
        head = struct.pack(">BBH", b0, mask | 126, size)
    else:
        head = struct.pack(">BBQ", b0, mask | 127, size)
    return head + (struct.pack(">I", key) if key is not None else b"")


def masked(data: bytes, key: int) -> bytes:
    k = struct.pack(">I", key)
    return bytes(b ^ k[i % 4] for i, b in enumerate(data))


@pytest.mark.parametrize(("value", "wire"), [
    # RFC 6455 5.7's examples.
    (Frame(fin=True, opcode=Opcode.TEXT, masking_key=None, payload=b"Hello"),
     bytes.fromhex("810548656c6c6f")),
    (Frame(fin=True, opcode=Opcode.TEXT, masking_key=0x37FA213D, payload=b"Hello"),
     bytes.fromhex("818537fa213d7f9f4d5158")),
    (Frame(fin=False, opcode=Opcode.TEXT, masking_key=None, payload=b"Hel"),
     bytes.fromhex("010348656c")),
    (Frame(fin=True, opcode=Opcode.CONTINUATION, masking_key=None, payload=b"lo"),
     bytes.fromhex("80026c6f")),
    (Frame(fin=True, opcode=Opcode.PONG, masking_key=0x37FA213D, payload=b"Hello"),
     bytes.fromhex("8a8537fa213d7f9f4d5158")),
    (Frame(fin=True, opcode=Opcode.BINARY, masking_key=None, payload=bytes(256)),
     bytes.fromhex("827e0100") + bytes(256)),
    (Frame(fin=True, opcode=Opcode.BINARY, masking_key=None, payload=bytes(65536)),
     bytes.fromhex("827f0000000000010000") + bytes(65536)),
    # A close with status 1000 and a reason, masked (5.5.1, 7.4.1).
    (Frame(fin=True, opcode=Opcode.CLOSE, masking_key=0x01020304,
           payload=struct.pack(">H", 1000) + b"bye"),
     header(8, 5, 0x01020304) + masked(struct.pack(">H", 1000) + b"bye", 0x01020304)),
])
def test_frames_against_rfc_6455(value: Frame, wire: bytes) -> None:
    assert value.encode() == wire
    assert Frame.decode(wire) == value
    assert StreamDecoder(handshake=False).feed(wire) == [value]


def test_a_close_body() -> None:
    assert CloseBody(code=1001, reason="going").encode() == struct.pack(">H", 1001) + b"going"
    assert CloseBody.decode(b"\x03\xe8") == CloseBody(code=1000, reason="")
    with pytest.raises(ValueNotAllowedError, match="CloseBody.code"):
        CloseBody.decode(b"\x00\x01")  # 7.4.2: codes below 1000 are not used


def test_bad_frames_raise_their_own_errors() -> None:
    with pytest.raises(ReservedBitsError):
        StreamDecoder(handshake=False).feed(b"\x91\x00")  # RSV3 without an extension
    with pytest.raises(UnknownEnumValueError):
        StreamDecoder(handshake=False).feed(b"\x8b\x00")  # opcode 0xB is reserved
    with pytest.raises(FrameTooLargeError):
        StreamDecoder(1000, handshake=False).feed(header(2, 1 << 20, None))
    # RFC 6455 5.5: control frames are never fragmented and carry at most 125 bytes.
    with pytest.raises(RequirementError, match="opcode < 8 or fin") as info:
        StreamDecoder(handshake=False).feed(header(9, 1, None, fin=False) + b"x")
    assert info.value.rule == "opcode < 8 or fin"
    with pytest.raises(RequirementError, match="len\\(payload\\) <= 125"):
        Frame.decode(header(8, 126, None) + bytes(126))
    with pytest.raises(RequirementUnmetError, match="opcode < 8 or fin"):
        Frame(fin=False, opcode=Opcode.PONG, masking_key=None, payload=b"").encode()
    big = Frame(fin=True, opcode=Opcode.BINARY, masking_key=None, payload=bytes(126))
    assert Frame.decode(big.encode()) == big  # data frames may be longer


@settings(max_examples=100, deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(size=st.sampled_from([0, 125, 126, 65535, 65536]) | st.integers(0, 300),
       key=st.none() | st.integers(0, 2**32 - 1), fin=st.booleans(),
       opcode=st.sampled_from(list(Opcode)), cut=st.integers(1, 64))
def test_frames_round_trip_through_the_stream(either_codec: str, size: int, key: int | None,
                                              fin: bool, opcode: Opcode, cut: int) -> None:
    if opcode >= Opcode.CLOSE:  # a control frame: whole, at most 125 bytes (5.5)
        fin, size = True, min(size, 125)
    value = Frame(fin=fin, opcode=opcode, masking_key=key, payload=bytes([size % 256]) * size)
    wire = value.encode()
    assert wire[: len(header(opcode, size, key, fin))] == header(opcode, size, key, fin)
    decoder = StreamDecoder(handshake=False)
    got: list[object] = []
    for i in range(0, len(wire), cut):
        got += decoder.feed(wire[i : i + cut])
    assert got == [value] and decoder.buffered == 0


# ---------------------------------------------------------------------------------------------
# against the websockets package's server


def check_wire(wire: Wire, client: WebSocketClient) -> None:
    """Every byte written is a generated encode; every byte read was taken by the generated
    decoder and encodes back to itself (server frames are unmasked: one form per value)."""
    written, read = b"".join(wire.written), b"".join(wire.read)
    sent = StreamDecoder(to_server=True).feed(written)
    assert isinstance(sent[0], Upgrade) and all(isinstance(m, Frame) for m in sent[1:])
    assert b"".join(m.encode() for m in sent) == written
    assert all(isinstance(m, Frame) and m.masking_key is not None for m in sent[1:])
    got = StreamDecoder().feed(read)
    assert isinstance(got[0], Accepted)
    assert b"".join(m.encode() for m in got) == read
    assert client.decoder.buffered == 0


def run(server: WebSocketServer,
        body: Callable[[WebSocketClient], Awaitable[None]]) -> Wire:
    async def main() -> Wire:
        wire = Wire()
        async with asyncio.timeout(60):
            client = await WebSocketClient.connect(server.host, server.port, wire=wire)
            async with client:
                await body(client)
            check_wire(wire, client)
        return wire
    return asyncio.run(main())


@pytest.mark.interop
def test_the_upgrade(websocket_server: WebSocketServer) -> None:
    async def body(client: WebSocketClient) -> None:
        assert client.accepted is not None
        assert client.accepted.reason == "Switching Protocols"
    wire = run(websocket_server, body)
    assert wire.written[0].startswith(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"".join(wire.read).startswith(b"HTTP/1.1 101 Switching Protocols\r\n")


@pytest.mark.interop
def test_echoes_of_text_and_binary_messages(websocket_server: WebSocketServer) -> None:
    sizes = [0, 5, 125, 126, 1000, 65535, 65536, 200_000]  # 7-, 16- and 64-bit lengths

    async def body(client: WebSocketClient) -> None:
        await client.send_text("héllo, protoframe")
        assert await client.receive() == Message(Opcode.TEXT, "héllo, protoframe".encode())
        for size in sizes:
            data = os.urandom(size)
            await client.send_binary(data)
            assert await client.receive() == Message(Opcode.BINARY, data)
        await client.send_text("x" * 70_000)
        assert (await client.receive()).text == "x" * 70_000
    wire = run(websocket_server, body)
    lengths = [b[1] & 0x7F for b in wire.written[1:]]
    assert {125, 126, 127} <= set(lengths)


@pytest.mark.interop
def test_a_message_in_three_fragments(websocket_server: WebSocketServer) -> None:
    async def body(client: WebSocketClient) -> None:
        await client.send_fragments(Opcode.TEXT, [b"frag", b"ment", b"ed"])
        assert await client.receive() == Message(Opcode.TEXT, b"fragmented")
        await client.send_fragments(Opcode.BINARY, [b"\x00" * 200, b"\x01", b"\x02" * 70_000])
        got = await client.receive()
        assert got == Message(Opcode.BINARY, b"\x00" * 200 + b"\x01" + b"\x02" * 70_000)
    wire = run(websocket_server, body)
    sent = StreamDecoder(to_server=True).feed(b"".join(wire.written))[1:]
    assert [(f.fin, f.opcode) for f in sent if isinstance(f, Frame)][:3] == [
        (False, Opcode.TEXT), (False, Opcode.CONTINUATION), (True, Opcode.CONTINUATION)]


@pytest.mark.interop
def test_a_ping_is_answered_by_a_pong(websocket_server: WebSocketServer) -> None:
    async def body(client: WebSocketClient) -> None:
        assert await client.ping(b"are you there?") == b"are you there?"
        assert await client.ping(b"\xff" * 125) == b"\xff" * 125
        with pytest.raises(RequirementUnmetError, match="len\\(payload\\) <= 125"):
            await client.ping(b"x" * 126)  # the spec's require: refuses it before a byte is sent
    run(websocket_server, body)


@pytest.mark.interop
def test_a_close_is_answered_by_the_servers_close(websocket_server: WebSocketServer) -> None:
    async def body(client: WebSocketClient) -> None:
        answer = await client.close(1001, "going away")
        assert answer.code == 1001  # the websockets server echoes the code (RFC 6455 5.5.1)
    wire = run(websocket_server, body)
    got = StreamDecoder().feed(b"".join(wire.read))
    last = got[-1]
    assert isinstance(last, Frame) and last.opcode == Opcode.CLOSE
    assert CloseBody.decode(last.payload).code == 1001


def test_the_module_is_the_generated_one() -> None:
    assert frames.__name__ == "websocket_app.proto.websocket.frames"
    assert "DO NOT EDIT" in open(frames.__file__, encoding="utf-8").readline()
