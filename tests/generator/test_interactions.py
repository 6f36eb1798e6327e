"""Interactions through generated code (tests/data/interact): answers are matched only in the
direction answers travel, over the sans-IO protocol and over TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protoframe.runtime.io.connection import open_connection
from tests.support.generate import generate_package, import_generated

TIMEOUT = 30.0  # generous: the machine is shared


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    tmp: Path = tmp_path_factory.mktemp("interact")
    generate_package(tmp, "interact", package="gen_interact")
    # One import of the package: importing again would make new classes that the first
    # modules' lookups do not know.
    client = import_generated(tmp, "interact.client", package="gen_interact")
    return {"client": client, "frames": client.frames,
            "machines": importlib.import_module("gen_interact.interact.machines")}


def test_our_own_ack_of_a_push_does_not_answer_our_delivery(gen: dict[str, ModuleType]) -> None:
    frames, machines = gen["frames"], gen["machines"]
    client = machines.InteractProtocol()
    server = frames.StreamDecoder(to_server=True)
    sent = client.send(frames.Packet(body=frames.Deliver(msg_id=7, level=1, data=b"x")))
    assert [type(f.body) for f in server.feed(sent)] == [frames.Deliver]
    push = frames.Packet(body=frames.Push(msg_id=7, data=b"y")).encode()
    client.receive_data(push)
    client.send(frames.Packet(body=frames.Ack(msg_id=7)))  # acks the push, same id
    assert client.state("inbox", 7) == "done"
    assert client.state("delivery", 7) == "sent"
    client.receive_data(frames.Packet(body=frames.Ack(msg_id=7)).encode())
    assert client.state("delivery", 7) == "acked"


async def _serve_deliveries(frames: ModuleType, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
    """A peer that, for each DELIVER, first pushes a message with the same id, waits for the
    client's ACK of it, and only then answers the DELIVER with its own ACK."""
    decoder = frames.StreamDecoder(to_server=True)
    waiting: list[int] = []
    while data := await reader.read(65536):
        for frame in decoder.feed(data):
            body = frame.body
            if isinstance(body, frames.Deliver) and body.level == 0:
                continue  # fire-and-forget: no answer
            if isinstance(body, frames.Deliver):
                waiting.append(body.msg_id)
                writer.write(frames.Packet(body=frames.Push(msg_id=body.msg_id,
                                                            data=b"p")).encode())
            elif isinstance(body, frames.Ack) and body.msg_id in waiting:
                waiting.remove(body.msg_id)
                writer.write(frames.Packet(body=frames.Ack(msg_id=body.msg_id)).encode())
        await writer.drain()
    writer.close()


def test_over_tcp_a_delivery_completes_only_with_the_peers_ack(
        gen: dict[str, ModuleType]) -> None:
    frames, machines, client_mod = gen["frames"], gen["machines"], gen["client"]

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_deliveries(frames, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        protocol = machines.InteractProtocol()
        requests: Any = None
        acked: list[int] = []

        def on_frame(frame: Any) -> None:
            if requests.handle_frame(frame, protocol.command(frame)):
                return
            if isinstance(frame.body, frames.Push):
                acked.append(frame.body.msg_id)
                connection.write(frames.Packet(body=frames.Ack(msg_id=frame.body.msg_id)))

        connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                           connect_timeout=TIMEOUT)
        requests = client_mod.InteractRequests(connection, timeout=TIMEOUT)
        try:
            answers = await asyncio.gather(
                *(requests.deliver(level=1, data=b"d") for _ in range(5)))
            assert sorted(a.msg_id for a in answers) == [0, 1, 2, 3, 4]
            assert sorted(acked) == [0, 1, 2, 3, 4]
            assert protocol.machines.pending == 0
            assert all(protocol.state("delivery", i) == "acked" for i in range(5))
            assert all(protocol.state("inbox", i) == "done" for i in range(5))
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_deliveries_at_level_0_are_one_way_and_leave_nothing_pending(
        gen: dict[str, ModuleType]) -> None:
    frames, machines, client_mod = gen["frames"], gen["machines"], gen["client"]

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_deliveries(frames, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        protocol = machines.InteractProtocol()
        requests: Any = None

        def on_frame(frame: Any) -> None:
            if not requests.handle_frame(frame, protocol.command(frame)):
                connection.write(frames.Packet(body=frames.Ack(msg_id=frame.body.msg_id)))

        connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                           connect_timeout=TIMEOUT)
        requests = client_mod.InteractRequests(connection, timeout=TIMEOUT)
        try:
            for _ in range(200):
                assert await requests.deliver(level=0, data=b"f") is None
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
            # The connection still pairs an answered delivery with its answer after them.
            answer = await requests.deliver(level=1, data=b"a")
            assert answer.msg_id == 200
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))
