"""One wire code, a command per direction: ``names: {v: {to_server: A, to_client: B}}``.

``tests/data/directions`` is a PostgreSQL-like protocol whose code 0x44 ('D') is ``Describe``
from a client and ``DataRow`` from a server. It is generated with the ``protoframe`` command;
the frames are checked against bytes packed by hand with ``struct``, decoded both ways, and
each layout must be its own command everywhere a command shows: the command table, the
machines and their hooks, the typed request methods and the reference page. A case named once
(0x53, ``Sync``/``ParameterStatus``) keeps one command for both layouts.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import struct
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec import compiled, compiled_frames
from protoframe.runtime.errors import DecodeError, UnknownCommandTypeError
from tests.support.examples import scaled
from tests.support.generate import import_generated
from tests.support.generator_cli import run_cli
from tests.support.paths import DATA, ROOT

PACKAGE = "directions_pkg"


class Generated:
    def __init__(self, root: Path) -> None:
        self.root = root
        # One import of the package (import_generated starts it afresh), then its modules.
        self.client: ModuleType = import_generated(root, "directions.client", PACKAGE)
        self.frames = importlib.import_module(f"{PACKAGE}.directions.frames")
        self.commands = importlib.import_module(f"{PACKAGE}.directions.commands")
        self.machines = importlib.import_module(f"{PACKAGE}.directions.machines")
        self.docs = (root / "docs" / "directions.md").read_text()
        # Read, not imported: the Spark module needs pyspark.
        self.spark = (root / PACKAGE / "directions" / "spark.py").read_text()


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    root: Path = tmp_path_factory.mktemp("directions")
    shutil.copytree(DATA / "directions", root / "specs" / "directions")
    result = run_cli("generate", "--out", PACKAGE, "--outputs", "bindings,frames,spark,docs",
                     "--docs-out", "docs", cwd=root)
    assert result.returncode == 0, result.stderr
    return Generated(root)


# --- bytes packed by hand ---------------------------------------------------------------------


def message(code: bytes, body: bytes) -> bytes:
    """A frame: the code, the length of what follows, the body."""
    return code + struct.pack(">I", len(body)) + body


def text(value: str, prefix: str = ">H") -> bytes:
    raw = value.encode()
    return struct.pack(prefix, len(raw)) + raw


def describe(target: int, name: bytes) -> bytes:
    return message(b"D", struct.pack(">B", target) + name)


def data_row(cells: list[bytes]) -> bytes:
    return message(b"D", struct.pack(">H", len(cells))
                   + b"".join(struct.pack(">I", len(c)) + c for c in cells))


def close(target: int, ident: int) -> bytes:
    return message(b"C", struct.pack(">BI", target, ident))


def command_complete(rows: int, tag: bytes) -> bytes:
    return message(b"C", struct.pack(">QH", rows, len(tag)) + tag)


def error_response(code: str, msg: str) -> bytes:
    return message(b"E", code.encode() + text(msg))


def sync() -> bytes:
    return message(b"S", b"")


def parameter_status(key: str, value: str) -> bytes:
    return message(b"S", text(key) + text(value))


# --- decoding both ways -----------------------------------------------------------------------


def test_one_code_decodes_by_direction_into_two_commands(gen: Generated) -> None:
    f, m = gen.frames, gen.machines
    asked = f.Message.decode(describe(ord("S"), b"stmt"), to_server=True)
    assert asked == f.Message(body=f.Describe(target=ord("S"), name=b"stmt"))
    row = f.Message.decode(data_row([b"1", b""]))
    assert row == f.Message(body=f.DataRow(cells=[f.Cell(data=b"1"), f.Cell(data=b"")]))
    assert m.command_of(asked) == ("DESCRIBE", asked.body)
    assert m.command_of(row) == ("DATA_ROW", row.body)
    # The server's layout of 'C' keeps its default name; the client's is named in the spec.
    done = f.Message.decode(command_complete(1, b"SELECT 1"))
    assert m.command_of(done)[0] == "COMMAND_COMPLETE"
    assert m.command_of(f.Message.decode(close(ord("P"), 7), to_server=True))[0] == "CLOSE"
    # Named once, both layouts of 'S' are one command.
    assert m.command_of(f.Message.decode(sync(), to_server=True))[0] == "SYNC"
    assert m.command_of(f.Message.decode(parameter_status("a", "b")))[0] == "SYNC"


def test_a_code_only_one_direction_has_is_unknown_the_other_way(gen: Generated) -> None:
    query = message(b"Q", text("select 1", ">I"))
    assert gen.frames.Message.decode(query, to_server=True).body == gen.frames.Query(
        sql="select 1")
    with pytest.raises(UnknownCommandTypeError) as info:
        gen.frames.Message.decode(query)
    assert info.value.command_type == ord("Q")


def test_stream_decoders_split_each_direction(gen: Generated) -> None:
    f = gen.frames
    from_client = describe(ord("S"), b"a") + close(ord("S"), 1) + sync()
    from_server = data_row([b"x" * 3]) + error_response("42P01", "no such table") + \
        parameter_status("TimeZone", "UTC")
    to_server, to_client = f.StreamDecoder(to_server=True), f.StreamDecoder()
    got_server = [x for i in range(len(from_client)) for x in
                  to_server.feed(from_client[i : i + 1])]
    got_client = [x for i in range(len(from_server)) for x in
                  to_client.feed(from_server[i : i + 1])]
    assert [type(x.body) for x in got_server] == [f.Describe, f.Close, f.Sync]
    assert [type(x.body) for x in got_client] == [f.DataRow, f.ErrorResponse, f.ParameterStatus]
    assert [gen.machines.command_of(x)[0] for x in got_client] == ["DATA_ROW", "ERROR", "SYNC"]


# --- the command table, machines, hooks and requests -------------------------------------------


def test_each_direction_is_its_own_row_of_the_command_table(gen: Generated) -> None:
    f, c = gen.frames, gen.commands
    rows = {row.name: (row.hook, row.bodies) for row in c.COMMANDS}
    assert rows["DESCRIBE"] == ("on_describe", (f.Describe,))
    assert rows["DATA_ROW"] == ("on_data_row", (f.DataRow,))
    assert rows["CLOSE"] == ("on_close", (f.Close,))
    assert rows["COMMAND_COMPLETE"] == ("on_command_complete", (f.CommandComplete,))
    assert rows["ERROR"] == ("on_error", (f.ErrorResponse,))
    assert rows["SYNC"] == ("on_sync", (f.Sync, f.ParameterStatus))
    assert c.BY_BODY[f.Describe] == "DESCRIBE" and c.BY_BODY[f.DataRow] == "DATA_ROW"
    assert len(c.COMMANDS) == 9


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_describe(self, body: Any, frame: Any) -> None:
        self.seen.append(("describe", body))

    def on_data_row(self, body: Any, frame: Any) -> None:
        self.seen.append(("data_row", body))


def test_machines_and_hooks_see_the_command_of_each_side(gen: Generated) -> None:
    f, m = gen.frames, gen.machines
    client_hooks, server_hooks = Recorder(), Recorder()
    client = m.DirectionsProtocol(hooks=client_hooks)
    server = m.DirectionsProtocol(server=True, hooks=server_hooks)
    ask = f.Message(body=f.Describe(target=ord("S"), name=b"s1"))
    wire = client.send(ask)
    assert wire == describe(ord("S"), b"s1")
    assert client.state("session") == "describing"
    assert server.receive_data(wire) == [ask]
    assert server_hooks.seen == [("describe", ask.body)]
    row = f.Message(body=f.DataRow(cells=[f.Cell(data=b"42")]))
    answer = server.send(row)
    assert answer == data_row([b"42"])
    assert client.receive_data(answer) == [row]
    assert client_hooks.seen == [("data_row", row.body)]
    assert client.state("session") == server.state("session") == "ready"
    # The client's next DESCRIBE is allowed again: DATA_ROW, not DESCRIBE, answered it.
    client.send(ask)
    with pytest.raises(m.ProtocolViolation):
        client.send(ask)


class Wire:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send_frame(self, frame: Any) -> None:
        self.sent.append(frame)


def test_typed_request_methods_send_one_layout_and_return_the_other(gen: Generated) -> None:
    f, c = gen.frames, gen.client
    hints = typing.get_type_hints(c.DirectionsRequests.describe,
                                  globalns=vars(c), localns={"frames": f})
    assert hints["return"] is f.DataRow
    assert typing.get_type_hints(c.DirectionsRequests.close, globalns=vars(c),
                                 localns={"frames": f})["return"] is f.CommandComplete

    async def scenario() -> tuple[Any, Any]:
        wire = Wire()
        requests = c.DirectionsRequests(wire, timeout=30)
        task = asyncio.ensure_future(requests.describe(ord("P"), b"portal"))
        while not wire.sent:
            await asyncio.sleep(0)
        row = f.Message.decode(data_row([b"v"]))
        assert requests.handle_frame(row)
        failing = asyncio.ensure_future(requests.close(ord("P"), 3))
        while len(wire.sent) < 2:
            await asyncio.sleep(0)
        assert requests.handle_frame(f.Message.decode(error_response("34000", "gone")))
        with pytest.raises(c.RequestFailed) as info:
            await failing
        assert info.value.command == "ERROR"
        assert info.value.body == f.ErrorResponse(code="34000", message="gone")
        return wire.sent, await task

    sent, answer = asyncio.run(scenario())
    assert [x.encode() for x in sent] == [describe(ord("P"), b"portal"), close(ord("P"), 3)]
    assert answer == f.DataRow(cells=[f.Cell(data=b"v")])


def test_the_reference_page_lists_both_commands(gen: Generated) -> None:
    docs = gen.docs
    assert "| `DESCRIBE` to server, `DATA_ROW` to client | [`Describe`]" in docs
    # The value as the spec writes it ("'D'"), not as a number.
    assert "| `DESCRIBE` | `'D'` (`0x44`) | [`Describe`](#layout-describe) to server |" in docs
    assert "| `DATA_ROW` | `'D'` (`0x44`) | [`DataRow`](#layout-datarow) to client |" in docs
    assert "| `'D'` (`0x44`) | `DESCRIBE` to server, `DATA_ROW` to client |" in docs
    assert "| `DESCRIBE` | `DATA_ROW` | `ERROR` | — | `describe()` |" in docs


def test_the_spark_command_name_follows_the_body_class(gen: Generated) -> None:
    for body, name in (("Describe", "DESCRIBE"), ("DataRow", "DATA_ROW"), ("Sync", "SYNC"),
                       ("ParameterStatus", "SYNC")):
        assert f'if isinstance(body, frames.{body}):\n        return "{name}"' in gen.spark


@pytest.mark.slow  # mypy --strict in a subprocess
def test_the_generated_modules_pass_mypy_strict(gen: Generated) -> None:
    package = gen.root / PACKAGE / "directions"
    modules = [str(package / f"{m}.py") for m in ("frames", "commands", "machines", "client")]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
         "--config-file", str(ROOT / "pyproject.toml"), *modules],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=600)
    assert result.returncode == 0, result.stdout


# --- round trips, and the compiled codec -------------------------------------------------------

names = st.text(max_size=40)
blobs = st.binary(max_size=60)


@st.composite
def client_frames(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    kind = draw(st.sampled_from(["describe", "close", "sync"]))
    if kind == "sync":
        return kind, ()
    if kind == "close":
        return kind, (draw(st.integers(0, 255)), draw(st.integers(0, 2**32 - 1)))
    return kind, (draw(st.integers(0, 255)), draw(blobs))


@st.composite
def server_frames(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    kind = draw(st.sampled_from(["data_row", "command_complete", "error_response",
                                 "parameter_status"]))
    if kind == "data_row":
        return kind, (draw(st.lists(blobs, max_size=5)),)
    if kind == "command_complete":
        return kind, (draw(st.integers(0, 2**64 - 1)), draw(blobs))
    if kind == "error_response":
        return kind, (draw(st.text("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=5,
                                   max_size=5)), draw(names))
    return kind, (draw(names), draw(names))


def build(f: ModuleType, kind: str, args: tuple[Any, ...]) -> Any:
    match kind:
        case "describe":
            body = f.Describe(target=args[0], name=args[1])
        case "close":
            body = f.Close(target=args[0], id=args[1])
        case "sync":
            body = f.Sync()
        case "data_row":
            body = f.DataRow(cells=[f.Cell(data=c) for c in args[0]])
        case "command_complete":
            body = f.CommandComplete(rows=args[0], tag=args[1])
        case "error_response":
            body = f.ErrorResponse(code=args[0], message=args[1])
        case _:
            body = f.ParameterStatus(key=args[0], value=args[1])
    return f.Message(body=body)


BY_HAND: dict[str, Callable[..., bytes]] = {
    "describe": describe, "close": close, "sync": sync, "data_row": data_row,
    "command_complete": command_complete, "error_response": error_response,
    "parameter_status": parameter_status,
}
COMMAND = {"describe": "DESCRIBE", "close": "CLOSE", "sync": "SYNC", "data_row": "DATA_ROW",
           "command_complete": "COMMAND_COMPLETE", "error_response": "ERROR",
           "parameter_status": "SYNC"}


@given(sent=st.one_of(client_frames().map(lambda x: (True, x)),
                      server_frames().map(lambda x: (False, x))))
@settings(max_examples=scaled(200), deadline=None)
def test_round_trip_against_bytes_packed_by_hand(gen: Generated,
                                                 sent: tuple[bool, tuple[str, Any]]) -> None:
    to_server, (kind, args) = sent
    frame = build(gen.frames, kind, args)
    wire = frame.encode()
    assert wire == BY_HAND[kind](*args)
    assert gen.frames.Message.decode(wire, to_server=to_server) == frame
    assert gen.machines.command_of(frame) == (COMMAND[kind], frame.body)


def _outcome(fn: Any) -> tuple[str, str]:
    try:
        return "value", repr(fn())
    except DecodeError as exc:
        return "raised", f"{type(exc).__name__}: {exc}"


@pytest.mark.skipif(not compiled_frames.available(),
                    reason="the compiled frame codec is not built; the Python one runs alone")
@given(sent=st.one_of(client_frames().map(lambda x: (True, x)),
                      server_frames().map(lambda x: (False, x))),
       cut=st.integers(0, 12))
@settings(max_examples=scaled(150), deadline=None)
def test_compiled_and_python_codecs_agree(gen: Generated, sent: tuple[bool, tuple[str, Any]],
                                          cut: int) -> None:
    f = gen.frames
    # The frame switches on its code a different struct each way; its compiled decode methods
    # take the direction as the Python ones do; the bodies compile (ints,
    # sized bytes and, since issue #21, arrays counted by a count_of field), and the compiled
    # and Python codecs must agree on them below.
    assert all(compiled.is_compiled(cls) for cls in (f.Describe, f.Close, f.CommandComplete,
                                                     f.DataRow, f.Message))
    assert f.Message.__dict__["decode"] is not compiled._python_methods[f.Message][1]
    to_server, (kind, args) = sent
    frame = build(f, kind, args)
    wire = frame.encode()
    with compiled.pure_python():
        assert frame.encode() == wire
    for data in (wire, wire[: max(0, len(wire) - cut)]):
        fast = _outcome(lambda data=data: f.Message.decode(data, to_server=to_server))
        with compiled.pure_python():
            slow = _outcome(lambda data=data: f.Message.decode(data, to_server=to_server))
        assert fast == slow
