"""Interactions through generated code (tests/data/interact): answers are matched only in the
direction answers travel, over the sans-IO protocol and over TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protoframe.generator.build import generate
from protoframe.generator.output import write_files
from protoframe.runtime.errors import (
    ConnectionClosed,
    RequestFailed,
    RequestTimeout,
    StreamOverflow,
)
from protoframe.runtime.io.connection import open_connection
from tests.support.generate import generate_package, import_generated, write_spec
from tests.support.paths import DATA

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
    assert client.state("traffic") == "busy"
    client.receive_data(frames.Packet(body=frames.Ack(msg_id=7)).encode())
    assert client.state("delivery", 7) == "acked"
    # A keyless machine that took the request sees its answer too, not only the first one.
    assert client.state("traffic") == "quiet"


async def _serve_deliveries(frames: ModuleType, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
    """A peer that, for each DELIVER, first pushes a message with the same id, waits for the
    client's ACK of it, and only then answers the DELIVER with its own ACK."""
    decoder = frames.StreamDecoder(to_server=True)
    waiting: list[int] = []
    while data := await reader.read(65536):
        for frame in decoder.feed(data):
            body = frame.body
            if isinstance(body, frames.Deliver | frames.Submit) and body.level == 0:
                continue  # fire-and-forget: no answer
            if isinstance(body, frames.Query):
                for i in range(1, body.rows + 1):
                    writer.write(frames.Packet(body=frames.Row(msg_id=body.msg_id,
                                                               value=i)).encode())
                    if i == body.fail_after:
                        writer.write(frames.Packet(body=frames.Failure(msg_id=body.msg_id,
                                                                       code=7)).encode())
                writer.write(frames.Packet(body=frames.Done(msg_id=body.msg_id,
                                                            count=body.rows)).encode())
                continue
            if isinstance(body, frames.Submit):
                writer.write(frames.Packet(body=frames.Ack(msg_id=body.msg_id)
                                           if body.level == 1 else
                                           frames.Receipt(msg_id=body.msg_id,
                                                          stored_at=1000 + body.msg_id)).encode())
                continue
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
            assert sorted(a.msg_id for a in answers) == [1, 2, 3, 4, 5]
            assert sorted(acked) == [1, 2, 3, 4, 5]
            assert protocol.machines.pending == 0
            assert all(protocol.state("delivery", i) == "acked" for i in range(1, 6))
            assert all(protocol.state("inbox", i) == "done" for i in range(1, 6))
            assert protocol.state("traffic") == "quiet"
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
            assert answer.msg_id == 201  # ids start at 1
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


class _Recorder:
    """A transport that keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send_frame(self, frame: Any) -> None:
        self.sent.append(frame)


def test_allocated_ids_start_at_1_and_a_request_that_opts_out_takes_its_id(
        gen: dict[str, ModuleType]) -> None:
    frames, client_mod = gen["frames"], gen["client"]

    async def main() -> None:
        transport = _Recorder()
        requests = client_mod.InteractRequests(transport, timeout=TIMEOUT)
        for _ in range(3):
            assert await requests.deliver(level=0, data=b"") is None
        assert [f.body.msg_id for f in transport.sent] == [1, 2, 3]
        resend = asyncio.ensure_future(requests.resend(2, data=b"again"))
        while len(transport.sent) < 4:
            await asyncio.sleep(0)
        assert transport.sent[3].body == frames.Resend(msg_id=2, data=b"again")
        assert requests.handle_frame(frames.Packet(body=frames.Ack(msg_id=2)))
        assert (await resend).msg_id == 2
        assert await requests.deliver(level=0, data=b"") is None
        assert transport.sent[4].body.msg_id == 4  # the resend used no id of the counter

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    tmp: Path = tmp_path_factory.mktemp("routed_alloc")
    generate_package(tmp, "routed_alloc", package="gen_routed_alloc")
    client = import_generated(tmp, "routed_alloc.client", package="gen_routed_alloc")
    return {"client": client, "frames": client.frames, "rt": client.rt,
            "machines": importlib.import_module("gen_routed_alloc.routed_alloc.machines")}


async def _serve_gets(gen: dict[str, ModuleType], reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
    """Answers each GET with a GOT echoing its call id and key."""
    machines, rt = gen["machines"], gen["rt"]
    decoder = gen["frames"].StreamDecoder()
    while data := await reader.read(65536):
        for frame in decoder.feed(data):
            name, body = machines.command_of(frame)
            assert name == "GET"
            answer = rt.GetResponse(call_id=body.call_id, value=f"{body.call_id}:{body.key}")
            writer.write(machines.frame_of_got(answer).encode())
        await writer.drain()
    writer.close()


def test_a_routed_request_gets_its_allocated_id_in_the_body_it_is_given(
        routed: dict[str, ModuleType]) -> None:
    machines, rt = routed["machines"], routed["rt"]

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _serve_gets(routed, r, w),
                                            "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        protocol = machines.RoutedAllocProtocol()
        requests: Any = None

        def on_frame(frame: Any) -> None:
            assert requests.handle_frame(frame, protocol.command(frame))

        connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                           connect_timeout=TIMEOUT)
        requests = routed["client"].RoutedAllocRequests(connection, timeout=TIMEOUT)
        try:
            # Without the allocation every call would go out with the id the caller left (0,
            # which the protocol reserves), and the answers could not be told apart.
            answers = await asyncio.gather(
                *(requests.get(rt.GetRequest(call_id=0, key=k)) for k in "abc"))
            assert [a.value for a in answers] == ["1:a", "2:b", "3:c"]
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_the_level_of_a_submit_chooses_its_answer_over_tcp(gen: dict[str, ModuleType]) -> None:
    frames, machines, client_mod = gen["frames"], gen["machines"], gen["client"]

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_deliveries(frames, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        protocol = machines.InteractProtocol()
        requests: Any = None

        def on_frame(frame: Any) -> None:
            assert requests.handle_frame(frame, protocol.command(frame))

        connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                           connect_timeout=TIMEOUT)
        requests = client_mod.InteractRequests(connection, timeout=TIMEOUT)
        try:
            answers = await asyncio.gather(*(requests.submit(level) for level in (1, 2, 0, 2)))
            assert [type(a) for a in answers] == [frames.Ack, frames.Receipt, type(None),
                                                  frames.Receipt]
            assert [a.msg_id for a in answers if a is not None] == [1, 2, 4]
            assert answers[1].stored_at == 1002
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
            assert [protocol.state("delivery", i) for i in (1, 2, 3, 4)] == \
                ["acked", "acked", "sent", "acked"]
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_an_answer_the_submit_did_not_choose_fails_it(gen: dict[str, ModuleType]) -> None:
    frames, client_mod = gen["frames"], gen["client"]

    async def main() -> None:
        transport = _Recorder()
        requests = client_mod.InteractRequests(transport, timeout=TIMEOUT)
        submit = asyncio.ensure_future(requests.submit(2))
        while not transport.sent:
            await asyncio.sleep(0)
        msg_id = transport.sent[0].body.msg_id
        assert requests.handle_frame(frames.Packet(body=frames.Ack(msg_id=msg_id)))
        with pytest.raises(RequestFailed) as failed:
            await submit
        assert failed.value.command == "ACK"  # a level-2 submit is answered by a RECEIPT

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_a_query_collects_its_rows_and_an_error_inside_does_not_leak_its_end(
        gen: dict[str, ModuleType]) -> None:
    frames, machines, client_mod = gen["frames"], gen["machines"], gen["client"]

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_deliveries(frames, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        protocol = machines.InteractProtocol()
        requests: Any = None

        def on_frame(frame: Any) -> None:
            assert requests.handle_frame(frame, protocol.command(frame))

        connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                           connect_timeout=TIMEOUT)
        requests = client_mod.InteractRequests(connection, timeout=TIMEOUT)
        try:
            got = await requests.query(3, 0)
            assert got == [frames.Row(msg_id=1, value=1), frames.Row(msg_id=1, value=2),
                           frames.Row(msg_id=1, value=3), frames.Done(msg_id=1, count=3)]
            with pytest.raises(RequestFailed) as failed:
                await requests.query(4, 2)
            assert failed.value.command == "FAILURE"
            assert failed.value.body == frames.Failure(msg_id=2, code=7)
            assert len(requests.pending) == 0  # the failed query's DONE was its own
            # Requests sent together: each gets its own stream, ended by its own DONE.
            many = await asyncio.gather(*(requests.query(n, 0) for n in (0, 2, 1)))
            assert [[type(a).__name__ for a in answers] for answers in many] == \
                [["Done"], ["Row", "Row", "Done"], ["Row", "Done"]]
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
        finally:
            connection.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


async def _connected(gen: dict[str, ModuleType]) -> tuple[Any, Any, Any, asyncio.Server]:
    """A client of ``_serve_deliveries`` over TCP on 127.0.0.1: (requests, protocol,
    connection, server)."""
    frames, machines, client_mod = gen["frames"], gen["machines"], gen["client"]
    server = await asyncio.start_server(
        lambda r, w: _serve_deliveries(frames, r, w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    protocol = machines.InteractProtocol()
    requests: Any = None

    def on_frame(frame: Any) -> None:
        assert requests.handle_frame(frame, protocol.command(frame))

    connection = await open_connection("127.0.0.1", port, protocol, on_frame,
                                       connect_timeout=TIMEOUT)
    requests = client_mod.InteractRequests(connection, timeout=TIMEOUT)
    return requests, protocol, connection, server


async def _close(connection: Any, server: asyncio.Server) -> None:
    connection.close()
    server.close()
    await server.wait_closed()


def test_a_query_iterated_yields_the_same_bodies_as_its_list(gen: dict[str, ModuleType]) -> None:
    frames = gen["frames"]

    async def main() -> None:
        requests, protocol, connection, server = await _connected(gen)
        try:
            got = [row async for row in requests.query_iter(3, 0)]
            assert got == [frames.Row(msg_id=1, value=1), frames.Row(msg_id=1, value=2),
                           frames.Row(msg_id=1, value=3), frames.Done(msg_id=1, count=3)]
            listed = await requests.query(3, 0)
            assert [type(a) for a in listed] == [type(a) for a in got]
            # Streams read together each get their own messages, ended by their own DONE.
            async def read(n: int) -> list[str]:
                return [type(a).__name__ async for a in requests.query_iter(n, 0)]
            many = await asyncio.gather(*(read(n) for n in (0, 2, 1)))
            assert many == [["Done"], ["Row", "Row", "Done"], ["Row", "Done"]]
            assert protocol.machines.pending == 0 and len(requests.pending) == 0
        finally:
            await _close(connection, server)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_an_error_inside_an_iterated_stream_is_raised_where_it_comes(
        gen: dict[str, ModuleType]) -> None:
    frames = gen["frames"]

    async def main() -> None:
        requests, _, connection, server = await _connected(gen)
        try:
            seen: list[Any] = []
            with pytest.raises(RequestFailed) as failed:
                async for row in requests.query_iter(4, 2):
                    seen.append(row)
            # The two rows before the FAILURE were given, the ones after it were not.
            assert seen == [frames.Row(msg_id=1, value=1), frames.Row(msg_id=1, value=2)]
            assert failed.value.command == "FAILURE"
            assert failed.value.body == frames.Failure(msg_id=1, code=7)
            # Rows 3 and 4 and the DONE of the failed query are swallowed, not given on.
            assert await requests.query(1, 0) == [frames.Row(msg_id=2, value=1),
                                                  frames.Done(msg_id=2, count=1)]
            assert len(requests.pending) == 0 and not requests.pending._abandoned
        finally:
            await _close(connection, server)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_breaking_out_of_a_stream_early_leaves_the_next_request_answered(
        gen: dict[str, ModuleType]) -> None:
    frames = gen["frames"]

    async def main() -> None:
        requests, protocol, connection, server = await _connected(gen)
        try:
            first: list[Any] = []
            async for row in requests.query_iter(200, 0, max_buffered=1000):
                first.append(row)
                if len(first) == 2:
                    break
            assert first == [frames.Row(msg_id=1, value=1), frames.Row(msg_id=1, value=2)]
            # The next query, on the same connection, gets its own rows only, though 198 rows
            # and the DONE of the first one are still on their way or buffered.
            got = [row async for row in requests.query_iter(2, 0)]
            assert got == [frames.Row(msg_id=2, value=1), frames.Row(msg_id=2, value=2),
                           frames.Done(msg_id=2, count=2)]
            assert await requests.submit(1) == frames.Ack(msg_id=3)
            assert len(requests.pending) == 0 and not requests.pending._abandoned
            assert protocol.machines.pending == 0
        finally:
            await _close(connection, server)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_a_stream_read_too_slowly_overflows_and_the_connection_stays_usable(
        gen: dict[str, ModuleType]) -> None:
    frames = gen["frames"]

    async def main() -> None:
        requests, _, connection, server = await _connected(gen)
        try:
            rows = requests.query_iter(200, 0, max_buffered=5)
            assert await rows.__anext__() == frames.Row(msg_id=1, value=1)
            # The reader stops; the server sends the rest. The next request's answer comes
            # after all of them, so once it is in the first stream has overflowed.
            assert await requests.submit(1) == frames.Ack(msg_id=2)
            seen = []
            with pytest.raises(StreamOverflow, match="more than 5 messages"):
                async for row in rows:
                    seen.append(row.value)
            # What the buffer held, then the overflow: five messages, row 1 among them if it
            # was not read before the rest arrived.
            assert seen == list(range(2, 2 + len(seen))) and len(seen) in (4, 5)
            assert len(requests.pending) == 0 and not requests.pending._abandoned
            assert [type(a).__name__ for a in await requests.query(1, 0)] == ["Row", "Done"]
        finally:
            await _close(connection, server)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def test_an_iterated_stream_times_out_between_messages(gen: dict[str, ModuleType]) -> None:
    frames, client_mod = gen["frames"], gen["client"]

    async def main() -> None:
        transport = _Recorder()
        requests = client_mod.InteractRequests(transport, timeout=TIMEOUT)
        rows = requests.query_iter(5, 0, timeout=0.05)
        reader = asyncio.ensure_future(rows.__anext__())
        while not transport.sent:
            await asyncio.sleep(0)
        msg_id = transport.sent[0].body.msg_id
        assert requests.handle_frame(frames.Packet(body=frames.Row(msg_id=msg_id, value=1)))
        assert await reader == frames.Row(msg_id=msg_id, value=1)
        with pytest.raises(RequestTimeout, match="QUERY: no message of the stream"):
            await rows.__anext__()
        # The late rest of the timed-out stream is swallowed, not taken for another request.
        assert requests.handle_frame(frames.Packet(body=frames.Row(msg_id=msg_id, value=2)))
        assert requests.handle_frame(frames.Packet(body=frames.Done(msg_id=msg_id, count=2)))
        assert len(requests.pending) == 0 and not requests.pending._abandoned
        assert not requests.handle_frame(frames.Packet(body=frames.Done(msg_id=msg_id,
                                                                        count=2)))

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_a_lost_connection_ends_an_iterated_stream(gen: dict[str, ModuleType]) -> None:
    frames, client_mod = gen["frames"], gen["client"]

    async def main() -> None:
        transport = _Recorder()
        requests = client_mod.InteractRequests(transport, timeout=TIMEOUT)
        rows = requests.query_iter(5, 0)
        reader = asyncio.ensure_future(rows.__anext__())
        while not transport.sent:
            await asyncio.sleep(0)
        requests.connection_lost(ConnectionClosed("peer went away"))
        with pytest.raises(ConnectionClosed, match="peer went away"):
            await reader
        assert frames  # the module is the fixture's

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_a_streamed_request_that_is_one_way_yields_nothing(tmp_path: Path) -> None:
    # QUERY answered only when it asks for rows: its iterator sends it and yields nothing.
    text = (DATA / "interact" / "interact.yaml").read_text()
    old = "until: DONE, correlate: [msg_id]}"
    assert old in text
    out = generate(write_spec(tmp_path, "interact", text.replace(
        old, 'until: DONE, correlate: [msg_id], when: "rows > 0"}')), "specs", ["interact"])
    write_files(tmp_path / "gen_oneway_stream", out.files, out.protocols)
    client_mod = import_generated(tmp_path, "interact.client", package="gen_oneway_stream")

    async def main() -> None:
        transport = _Recorder()
        requests = client_mod.InteractRequests(transport, timeout=TIMEOUT)
        assert [body async for body in requests.query_iter(0, 0)] == []
        assert await requests.query(0, 0) is None
        assert [f.body.rows for f in transport.sent] == [0, 0]
        assert len(requests.pending) == 0

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
