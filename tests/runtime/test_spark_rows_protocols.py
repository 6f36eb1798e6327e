"""Spark rows for Pravega, TANK and TubeMQ (generated/<protocol>/spark.py), as for Pulsar.

- hypothesis frames (from the strategies of the protocols' own frame tests) survive
  frame -> row -> frame (dict rows and Row objects as Spark returns them) and
  frames -> RecordBatch -> frames, the batch having ``FRAME.arrow_schema``; columns with null
  rows stay valid for a strict cast;
- every message of TubeMQ's .proto files and of Pravega's controller.proto survives the same
  round trips, with values driven by the official descriptors (tests/support/proto_values.py);
- a real local Spark session decodes a capture of each protocol with
  ``decode_captures``: row counts, command types, errors and decoded fields, and the rows
  come back as the frames that were captured.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from protoframe.generated.pravega import controller as pravega_controller  # noqa: E402
from protoframe.generated.pravega import frames as pravega_frames  # noqa: E402
from protoframe.generated.pravega import machines as pravega_machines  # noqa: E402
from protoframe.generated.pravega import spark as pravega_spark  # noqa: E402
from protoframe.generated.tank import frames as tank_frames  # noqa: E402
from protoframe.generated.tank import machines as tank_machines  # noqa: E402
from protoframe.generated.tank import spark as tank_spark  # noqa: E402
from protoframe.generated.tubemq import broker_service, master_service, rpc  # noqa: E402
from protoframe.generated.tubemq import frames as tubemq_frames  # noqa: E402
from protoframe.generated.tubemq import machines as tubemq_machines  # noqa: E402
from protoframe.generated.tubemq import spark as tubemq_spark  # noqa: E402
from protoframe.pipeline.capture_decode import (  # noqa: E402
    capture_schema,
    decode_captures,
)
from protoframe.runtime.codec.capture import CaptureWriter, Direction  # noqa: E402
from protoframe.runtime.spark.rows import RowCodec  # noqa: E402
from tests.support.official import official_module  # noqa: E402
from tests.support.pravega_frames import COMMANDS as PRAVEGA_COMMANDS  # noqa: E402
from tests.support.pravega_frames import VECTORS as PRAVEGA_VECTORS  # noqa: E402
from tests.support.pravega_frames import struct_strategy as pravega_struct  # noqa: E402
from tests.support.proto_values import build_ours, class_index, message_values  # noqa: E402
from tests.support.spark_rows import spark_shaped  # noqa: E402
from tests.support.tank_frames import PRODUCE, REQUESTS, RESPONSES, TO_CLIENT, TO_SERVER  # noqa: E402
from tests.support.tubemq_commands import COMMANDS as TUBEMQ_COMMANDS  # noqa: E402
from tests.support.tubemq_commands import messages as tubemq_messages  # noqa: E402

pytestmark = pytest.mark.spark  # needs the spark extra; some tests start a Spark session

SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]

# --- frame strategies (the protocols' own, wrapped in their frames) --------------------------

PRAVEGA_FRAMES: st.SearchStrategy[Any] = st.one_of(
    [pravega_struct(s) for s in PRAVEGA_COMMANDS]).map(lambda b: pravega_frames.Frame(body=b))
TANK_FRAMES: st.SearchStrategy[Any] = st.one_of(REQUESTS, RESPONSES).map(
    lambda b: tank_frames.Frame(body=b))


@st.composite
def tubemq_frame_values(draw: st.DrawFn) -> tubemq_frames.Frame:
    _, build, cls = draw(st.sampled_from(TUBEMQ_COMMANDS))
    frame: tubemq_frames.Frame = build(draw(tubemq_messages(cls)),
                                       serial_no=draw(st.integers(0, 2**32 - 1)))
    return frame


# (spark module, machines module, frames)
FRAME_CASES: dict[str, tuple[ModuleType, ModuleType, st.SearchStrategy[Any]]] = {
    "pravega": (pravega_spark, pravega_machines, PRAVEGA_FRAMES),
    "tank": (tank_spark, tank_machines, TANK_FRAMES),
    "tubemq": (tubemq_spark, tubemq_machines, tubemq_frame_values()),
}


def _check_column(codec: RowCodec[Any], values: list[Any]) -> None:
    """Null rows keep their place, and the column passes a strict cast to its own type."""
    column = codec.to_arrow([None, *values, None])
    assert codec.from_arrow(column) == [None, *values, None]
    column.validate(full=True)
    pa.table({"c": column}).cast(pa.schema([pa.field("c", codec.arrow_type)]))


@pytest.mark.parametrize("protocol", FRAME_CASES)
@settings(max_examples=200, deadline=None, suppress_health_check=SLOW)
@given(data=st.data())
def test_frame_row_frame(protocol: str, data: st.DataObject) -> None:
    module, machines, frames_strategy = FRAME_CASES[protocol]
    codec: RowCodec[Any] = module.FRAME
    frame = data.draw(frames_strategy)
    row = codec.to_row(frame)
    assert list(row) == codec.spark_schema.fieldNames()
    assert codec.from_row(row) == frame
    assert codec.from_row(spark_shaped(row, codec.spark_schema)) == frame
    # The capture pipeline's command_type is the name the state machines use.
    assert module.command_name(frame) == machines.command_of(frame)[0]


@pytest.mark.parametrize("protocol", FRAME_CASES)
@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(data=st.data())
def test_frames_record_batch_frames(protocol: str, data: st.DataObject) -> None:
    module, _, frames_strategy = FRAME_CASES[protocol]
    codec: RowCodec[Any] = module.FRAME
    values = data.draw(st.lists(frames_strategy, max_size=5))
    batch = codec.to_record_batch(values)
    assert batch.schema.equals(codec.arrow_schema)
    assert batch.num_rows == len(values)
    assert codec.from_record_batch(batch) == values
    _check_column(codec, values)


def test_tubemq_command_name_of_an_undeclared_method_is_its_number() -> None:
    body = master_service.CloseRequestP2M(clientId="c")
    frame = tubemq_machines.frame_of_close_p2m(body, serial_no=1)
    assert frame.content.request is not None
    frame.content.request.body.method = 99
    assert tubemq_spark.command_name(frame) == "99"
    assert tubemq_spark.decode_frame(frame.encode()) == (frame, None)


def test_frame_structs_have_codecs() -> None:
    for module in (pravega_spark, tank_spark, tubemq_spark):
        assert module.FRAME is module.STRUCTS["Frame"]
        for name, codec in module.STRUCTS.items():
            assert codec.python_type.__name__ == name.split(".")[-1]
    assert {s.name for s in PRAVEGA_COMMANDS} <= set(pravega_spark.STRUCTS)


# --- every protobuf message -------------------------------------------------------------------


@dataclass(frozen=True)
class ProtoFile:
    protocol: str
    file: str
    spark: ModuleType
    ours: dict[str, type]


PROTO_FILES = [
    ProtoFile("tubemq", "RPC.proto", tubemq_spark, class_index(rpc)),
    ProtoFile("tubemq", "BrokerService.proto", tubemq_spark, class_index(broker_service)),
    ProtoFile("tubemq", "MasterService.proto", tubemq_spark, class_index(master_service)),
    ProtoFile("pravega", "controller.proto", pravega_spark, class_index(pravega_controller)),
]


def _descriptors(proto: ProtoFile) -> list[Any]:
    out: list[Any] = []

    def walk(desc: Any) -> None:
        if desc.GetOptions().map_entry:
            return
        out.append(desc)
        for nested in desc.nested_types:
            walk(nested)

    module = official_module(proto.protocol, proto.file)
    for desc in module.DESCRIPTOR.message_types_by_name.values():
        walk(desc)
    return out


MESSAGE_CASES = [(proto, desc) for proto in PROTO_FILES for desc in _descriptors(proto)]


def _message_id(case: Any) -> str:
    if isinstance(case, ProtoFile):
        return case.file.split(".")[0]
    return str(case.full_name).rsplit(".", 1)[-1] if "." in case.full_name else case.full_name


def _message(proto: ProtoFile, desc: Any, tree: dict[str, Any]) -> Any:
    """Our message for a value tree, normalized as decoding makes it (enum members, not ints)."""
    msg = build_ours(proto.ours, desc, tree)
    return type(msg).decode(msg.encode())


def test_every_message_has_a_codec() -> None:
    for module in (tubemq_spark, pravega_spark):
        names = {d.full_name for p, d in MESSAGE_CASES if p.spark is module}
        assert set(module.MESSAGES) == names
        for name, codec in module.MESSAGES.items():
            assert codec.python_type.FULL_NAME == name
    # The command bodies are among them.
    bodies = {cast(Any, cls).FULL_NAME for _, _, cls in TUBEMQ_COMMANDS}
    assert bodies <= set(tubemq_spark.MESSAGES)


@pytest.mark.parametrize(("proto", "desc"), MESSAGE_CASES, ids=_message_id)
@settings(max_examples=10, deadline=None, suppress_health_check=SLOW)
@given(data=st.data())
def test_message_row_message(proto: ProtoFile, desc: Any, data: st.DataObject) -> None:
    msg = _message(proto, desc, data.draw(message_values(desc)))
    codec: RowCodec[Any] = proto.spark.MESSAGES[desc.full_name]
    row = codec.to_row(msg)
    assert list(row) == codec.spark_schema.fieldNames()
    assert codec.from_row(row) == msg
    assert codec.from_row(spark_shaped(row, codec.spark_schema)) == msg


@pytest.mark.parametrize(("proto", "desc"), MESSAGE_CASES, ids=_message_id)
@settings(max_examples=6, deadline=None, suppress_health_check=SLOW)
@given(data=st.data())
def test_messages_record_batch_messages(proto: ProtoFile, desc: Any,
                                        data: st.DataObject) -> None:
    trees = data.draw(st.lists(message_values(desc), max_size=4))
    msgs = [_message(proto, desc, t) for t in trees]
    codec: RowCodec[Any] = proto.spark.MESSAGES[desc.full_name]
    batch = codec.to_record_batch(msgs)
    assert batch.schema.equals(codec.arrow_schema)
    assert codec.from_record_batch(batch) == msgs
    _check_column(codec, msgs)


# --- captures decoded in a real Spark session -------------------------------------------------


@dataclass
class Recorded:
    """One capture directory and what decoding it must find, in timestamp order."""

    directory: Path
    protocol: str
    codec: RowCodec[Any]
    commands: list[str | None] = field(default_factory=list)
    frames: list[Any] = field(default_factory=list)  # None for the corrupted frame
    directions: list[str] = field(default_factory=list)


def _record(directory: Path, protocol: str, codec: RowCodec[Any],
            entries: list[tuple[Direction, bytes, str | None, Any]]) -> Recorded:
    directory.mkdir()
    out = Recorded(directory, protocol, codec)
    with CaptureWriter(directory / f"{protocol}.pfcap") as writer:
        for i, (direction, wire, command, frame) in enumerate(entries):
            writer.write(direction, 1 + i % 2, wire, timestamp_ns=1_000_000 * (i + 1))
            out.commands.append(command)
            out.frames.append(frame)
            out.directions.append("out" if direction == Direction.OUT else "in")
    return out


def _corrupt_length(wire: bytes, at: int, size: int, order: str) -> bytes:
    """``wire`` with its length field (``size`` bytes at ``at``) one more than it holds."""
    length = int.from_bytes(wire[at:at + size], order) + 1  # type: ignore[arg-type]
    return wire[:at] + length.to_bytes(size, order) + wire[at + size:]  # type: ignore[arg-type]


def _pravega_capture(directory: Path) -> Recorded:
    entries: list[tuple[Direction, bytes, str | None, Any]] = []
    names = {"Hello": "HELLO", "SetupAppend": "SETUP_APPEND", "ReadSegment": "READ_SEGMENT",
             "SegmentRead": "SEGMENT_READ", "DataAppended": "DATA_APPENDED",
             "NoSuchSegment": "NO_SUCH_SEGMENT", "KeepAlive": "KEEP_ALIVE"}
    for wire, body in PRAVEGA_VECTORS:
        name = names.get(type(body).__name__)
        if name is not None:
            direction = Direction.OUT if name in ("SETUP_APPEND", "READ_SEGMENT") else Direction.IN
            entries.append((direction, wire, name, pravega_frames.Frame(body=body)))
    # A truncated frame: its length says one byte more than follows.
    entries.append((Direction.IN, _corrupt_length(PRAVEGA_VECTORS[0][0], 4, 4, "big"), None,
                    None))
    return _record(directory, "pravega", pravega_spark.FRAME, entries)


def _tank_capture(directory: Path) -> Recorded:
    # Requests and responses share message ids (PRODUCE is 1 both ways): the direction picks
    # the layout, and the capture is the client's, so "out" frames went to the server.
    names = {"Ping": "PING", "ProduceRequest": "PRODUCE", "ProduceResponse": "PRODUCE",
             "ProduceWithSeqnumRequest": "PRODUCE_WITH_SEQNUM", "ConsumeRequest": "CONSUME",
             "ConsumeResponse": "CONSUME"}
    entries: list[tuple[Direction, bytes, str | None, Any]] = []
    for (out_wire, out_body), (in_wire, in_body) in zip(TO_SERVER, [*TO_CLIENT, TO_CLIENT[0]],
                                                       strict=True):
        entries.append((Direction.OUT, out_wire, names[type(out_body).__name__],
                        tank_frames.Frame(body=out_body)))
        entries.append((Direction.IN, in_wire, names[type(in_body).__name__],
                        tank_frames.Frame(body=in_body)))
    # An unknown message id.
    entries.append((Direction.IN, b"\x7e" + TO_CLIENT[0][0][1:], None, None))
    return _record(directory, "tank", tank_spark.FRAME, entries)


def _tubemq_capture(directory: Path) -> Recorded:
    m = tubemq_machines
    send = broker_service.SendMessageRequestP2B(clientId="c", topicName="orders", partitionId=3,
                                                data=b"payload", flag=0, checkSum=-1,
                                                sentAddr=0x7F000001)
    calls: list[tuple[Direction, str, Callable[..., tubemq_frames.Frame], Any]] = [
        (Direction.OUT, "REGISTER_P2M", m.frame_of_register_p2m, master_service.RegisterRequestP2M(
            clientId="c", topicList=["orders"], brokerCheckSum=0, hostName="h")),
        (Direction.IN, "REGISTER_M2P", m.frame_of_register_m2p, master_service.RegisterResponseM2P(
            success=True, errCode=200, errMsg="OK", brokerCheckSum=1)),
        (Direction.OUT, "SEND_MESSAGE_P2B", m.frame_of_send_message_p2b, send),
        (Direction.IN, "SEND_MESSAGE_B2P", m.frame_of_send_message_b2p,
         broker_service.SendMessageResponseB2P(success=True, errCode=200, errMsg="OK")),
        (Direction.OUT, "HEARTBEAT_P2M", m.frame_of_heartbeat_p2m,
         master_service.HeartRequestP2M(clientId="c", topicList=["orders"], brokerCheckSum=1,
                                        hostName="h")),
        (Direction.IN, "EXCEPTION", m.frame_of_exception,
         rpc.RspExceptionBody(exceptionName="E", stackTrace="m")),
    ]
    entries: list[tuple[Direction, bytes, str | None, Any]] = []
    for serial_no, (direction, name, build, body) in enumerate(calls, start=100):
        frame = build(body, serial_no=serial_no - serial_no % 2)
        entries.append((direction, frame.encode(), name, frame))
    # A frame whose begin token is wrong.
    good = entries[0][1]
    entries.append((Direction.OUT, struct.pack(">I", 0xFF7FF4FF) + good[4:], None, None))
    return _record(directory, "tubemq", tubemq_spark.FRAME, entries)


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    root = tmp_path_factory.mktemp("protocol_captures")
    return {"pravega": _pravega_capture(root / "pravega"),
            "tank": _tank_capture(root / "tank"),
            "tubemq": _tubemq_capture(root / "tubemq")}


@pytest.mark.parametrize("protocol", ["pravega", "tank", "tubemq"])
def test_decode_captures(spark: SparkSession, captures: dict[str, Recorded],
                         protocol: str) -> None:
    cap = captures[protocol]
    # One part, so one task; rows are put in order here rather than by a Spark sort.
    decoded = decode_captures(spark, str(cap.directory), protocol=protocol, partitions=1)
    assert decoded.schema == capture_schema(protocol)
    rows = sorted(decoded.collect(), key=lambda r: r["ts_ns"])
    assert len(rows) == len(cap.frames)
    assert [r["direction"] for r in rows] == cap.directions
    assert [r["command_type"] for r in rows] == cap.commands
    for row, frame in zip(rows, cap.frames, strict=True):
        if frame is None:
            assert row["error"], row
            assert all(row[f] is None for f in cap.codec.spark_schema.fieldNames())
        else:
            assert row["error"] is None, row["error"]
            assert cap.codec.from_row(row) == frame
    if protocol == "pravega":
        read = next(r for r in rows if r["command_type"] == "READ_SEGMENT")
        assert read["body"]["ReadSegment"]["suggested_length"] == 256
        assert read["body"]["ReadSegment"]["segment"] == "s"
    elif protocol == "tank":
        produce = next(r for r in rows if r["command_type"] == "PRODUCE"
                       and r["direction"] == "out")
        request = produce["body"]["ProduceRequest"]
        assert produce["body"]["ProduceResponse"] is None
        assert request["client_id"] == PRODUCE.client_id
        assert request["topics"][0]["partitions"][0]["bundle"]["msg_count"] == 1
        answer = next(r for r in rows if r["command_type"] == "PRODUCE"
                      and r["direction"] == "in")
        assert answer["body"]["ProduceResponse"]["statuses"][1]["leader_port"] == 11181
    else:
        sent = next(r for r in rows if r["command_type"] == "SEND_MESSAGE_P2B")
        assert sent["serial_no"] == 102
        assert sent["content"]["request"]["body"]["method"] == 13
        body = broker_service.SendMessageRequestP2B.decode(
            sent["content"]["request"]["body"]["request"])
        assert body.topicName == "orders"
