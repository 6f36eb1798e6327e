"""Columnar frame decoding (runtime/spark/columnar_frames.py, ``FramePlan`` in
runtime/codec/_columnar.c) against the row path.

Runs of hypothesis-generated Pulsar frames (every command, payloads with and without broker
entry metadata) and damaged ones (cut short, a flipped byte, bytes appended, a wrong payload
checksum, a command without its body, an undeclared command type, sizes past their region)
decode to the same frame column, command names and errors, type for type and value for value,
by ``decode_frames`` as by ``row_frames`` (``decode_frame`` per frame, ``command_name``,
``FRAME.to_arrow``); the clean ones all on the fast path. The same for Pravega (its frame is a
switch on the command type: the case's struct column set, the others null), whose
TableEntriesUpdated and KeepAlive (no layout tables) are left to the row path frame by frame.
And for TubeMQ: its commands, and requests, responses and exceptions of any flag, status and
method, content cut in several blocks at times, every one on the fast path, named by
``command_name`` asked of the columns.
"""

from __future__ import annotations

import gc
import struct
import sys
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from protoframe.generated.pravega import frames as pravega_frames  # noqa: E402
from protoframe.generated.pravega import spark as pravega_spark  # noqa: E402
from protoframe.generated.pulsar import frames, pulsar_api  # noqa: E402
from protoframe.generated.pulsar import spark as pulsar_spark  # noqa: E402
from protoframe.generated.tubemq import frames as tubemq_wire  # noqa: E402
from protoframe.generated.tubemq import rpc as tubemq_rpc  # noqa: E402
from protoframe.generated.tubemq import spark as tubemq_spark  # noqa: E402
from protoframe.runtime.spark import columnar, columnar_frames  # noqa: E402
from protoframe.runtime.spark.columnar_frames import (  # noqa: E402
    Decoded,
    decode_frames,
    frame_plan,
    row_frames,
)
from tests.support.pravega_frames import COMMANDS as PRAVEGA_COMMANDS  # noqa: E402
from tests.support.pravega_frames import VECTORS as PRAVEGA_VECTORS  # noqa: E402
from tests.support.pravega_frames import WRITER  # noqa: E402
from tests.support.pravega_frames import struct_strategy as pravega_struct  # noqa: E402
from tests.support.pulsar_frames import any_frames, sample_wire_frames  # noqa: E402
from tests.support.tubemq_commands import COMMANDS as TUBEMQ_COMMANDS  # noqa: E402
from tests.support.tubemq_commands import messages as tubemq_messages  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not columnar.available(), reason="runtime.codec._columnar is not built"),
]

SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
Type = pulsar_api.BaseCommand.Type


def _agree(module: Any, wire: list[bytes], offset: int = 0) -> tuple[Decoded, list[int]]:
    """Both paths over ``wire`` (as an array starting ``offset`` entries into its buffers):
    equal columns; returns the columnar result and the rows it left to the row path."""
    to_server = [i % 3 == 0 for i in range(len(wire))]
    array = pa.array([b"x"] * offset + wire, pa.binary()).slice(offset)
    got = decode_frames(module, array, to_server)
    want = row_frames(module, wire, to_server)
    for mine, theirs in zip(got, want, strict=True):
        assert mine.type == theirs.type
        mine.validate(full=True)
        assert mine.to_pylist() == theirs.to_pylist()
        assert mine.equals(theirs)
    # a strict cast to the frame's own type, as pyspark's (no nulls in non-nullable fields,
    # even below a null struct)
    pa.table({"c": got.frames}).cast(pa.schema([pa.field("c", module.FRAME.arrow_type)]))
    plan = frame_plan(module)
    bad = [] if plan is None else plan.decode(array)[1]
    return got, bad


def _damaged(wire: bytes, how: int, where: int) -> bytes:
    if not wire:
        return wire
    if how == 0:  # cut short
        return wire[:where % len(wire)]
    if how == 1:  # one byte flipped
        out = bytearray(wire)
        out[where % len(wire)] ^= 1 << (where % 8)
        return bytes(out)
    if how == 2:  # bytes after the frame
        return wire + b"\x00" * (1 + where % 3)
    return wire[:4] + struct.pack(">I", where) + wire[8:]  # the command's size replaced


def test_pulsar_pravega_and_tubemq_have_a_plan() -> None:
    assert frame_plan(pulsar_spark) is not None
    assert frame_plan(pravega_spark) is not None
    assert frame_plan(tubemq_spark) is not None


def test_sample_frames() -> None:
    wire = sample_wire_frames()
    out, bad = _agree(pulsar_spark, wire)
    assert bad == []
    assert out.names.to_pylist() == ["CONNECT", "SEND", "CONNECT"]
    assert out.errors.null_count == 3
    assert out.frames.field("payload").field("data").to_pylist()[1] == b"hello"


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(values=st.lists(any_frames, max_size=12), offset=st.integers(0, 3))
def test_pulsar_frames(values: list[frames.Frame], offset: int) -> None:
    _, bad = _agree(pulsar_spark, [v.encode() for v in values], offset)
    assert bad == []  # every valid frame on the fast path


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW)
@given(values=st.lists(any_frames, min_size=1, max_size=6),
       damage=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(0, 2**16)),
                       max_size=6))
def test_damaged_pulsar_frames(values: list[frames.Frame],
                               damage: list[tuple[int, int, int]]) -> None:
    wire = [v.encode() for v in values]
    for index, how, where in damage:
        wire[index % len(wire)] = _damaged(wire[index % len(wire)], how, where)
    _agree(pulsar_spark, wire)


def _command_frame(command: pulsar_api.BaseCommand) -> bytes:
    body = command.encode()
    return struct.pack(">II", 4 + len(body), len(body)) + body


def test_frames_the_row_path_decides() -> None:
    send = sample_wire_frames()[1]
    bad_sum = bytearray(send)
    bad_sum[-1] ^= 0xFF  # no longer matches its crc32c: the frame comes back with its error
    no_body = _command_frame(pulsar_api.BaseCommand(type_=Type.SEND))
    undeclared = bytearray(_command_frame(pulsar_api.BaseCommand(type_=Type.PING,
                                                                 ping=pulsar_api.CommandPing())))
    undeclared[9] = 0x7F  # the type's varint: a number the enum does not declare
    wire = [send, bytes(bad_sum), no_body, bytes(undeclared), b"", send[:3], send + b"\x00",
            send]
    out, bad = _agree(pulsar_spark, wire)
    assert bad == [1, 2, 3, 4, 5, 6]
    errors = out.errors.to_pylist()
    assert errors[0] is None and errors[7] is None
    assert errors[1].startswith("ChecksumFailure") and out.names[1].as_py() == "SEND"
    assert errors[2].startswith("MissingBodyError")
    assert all(errors[i] for i in range(2, 7))


def test_empty_runs() -> None:
    for module in (pulsar_spark, pravega_spark, tubemq_spark):
        out, bad = _agree(module, [])
        assert bad == [] and len(out.frames) == 0


def test_chunked_input() -> None:
    wire = sample_wire_frames()
    chunked = pa.chunked_array([pa.array(wire[:1], pa.binary()), pa.array(wire[1:], pa.binary())])
    got = decode_frames(pulsar_spark, chunked, [False] * 3)
    want = row_frames(pulsar_spark, wire, [False] * 3)
    assert all(a.equals(b) for a, b in zip(got, want, strict=True))


PRAVEGA = st.one_of([pravega_struct(s) for s in PRAVEGA_COMMANDS]).map(
    lambda body: pravega_frames.Frame(body=body))
# The commands whose frames the columnar path leaves to the row path: a counted array of
# integers, which it has no step for (KeepAlive, of no fields, has a table of no rows).
PRAVEGA_ROW_PATH = {"TableEntriesUpdated"}


def _texts(value: Any) -> list[str]:
    """Every string a frame struct holds, nested structs and lists included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if hasattr(value, "__slots__"):
        return [t for name in value.__slots__ for t in _texts(getattr(value, name))]
    return []


def _pravega_row_path(frame: Any) -> bool:
    """Whether the columnar path leaves a well-formed frame to the row path: its command is one
    it does not plan, or a string's modified UTF-8 is not plain UTF-8 (a NUL written as C0 80,
    a character past the BMP as two surrogates)."""
    return type(frame.body).__name__ in PRAVEGA_ROW_PATH or any(
        "\x00" in t or any(ord(c) > 0xFFFF for c in t) for t in _texts(frame.body))


def test_pravega_plan_covers_the_other_commands() -> None:
    plan = frame_plan(pravega_spark)
    assert plan is not None
    body = pravega_spark.FRAME.arrow_type[0].type
    assert len(plan.case_names) == body.num_fields
    assert plan.case_names[body.get_field_index("SetupAppend")] == "SETUP_APPEND"
    assert plan.case_names[body.get_field_index("KeepAlive")] == "KEEP_ALIVE"


def test_pravega_vectors() -> None:
    wire = [w for w, _ in PRAVEGA_VECTORS]
    out, bad = _agree(pravega_spark, wire)
    values = [pravega_frames.Frame.decode(w) for w in wire]
    assert bad == [i for i, v in enumerate(values) if _pravega_row_path(v)]
    assert out.errors.null_count == len(wire)
    assert out.names.to_pylist() == [pravega_spark.command_name(v) for v in values]


@settings(max_examples=80, deadline=None, suppress_health_check=SLOW)
@given(values=st.lists(PRAVEGA, max_size=10), offset=st.integers(0, 3))
def test_pravega_frames(values: list[Any], offset: int) -> None:
    _, bad = _agree(pravega_spark, [v.encode() for v in values], offset)
    assert bad == [i for i, v in enumerate(values) if _pravega_row_path(v)]


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW)
@given(values=st.lists(PRAVEGA, min_size=1, max_size=8),
       damage=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.integers(0, 2**16)),
                       max_size=4))
def test_damaged_pravega_frames(values: list[Any], damage: list[tuple[int, int, int]]) -> None:
    wire = [v.encode() for v in values] + [w for w, _ in PRAVEGA_VECTORS[:2]]
    for index, how, where in damage:
        wire[index % len(wire)] = _damaged(wire[index % len(wire)], how, where)
    _agree(pravega_spark, wire)


def test_pravega_table_keys() -> None:
    read = pravega_frames.Frame(body=pravega_frames.ReadTable(
        request_id=3, segment="t", delegation_token="", keys=[
            pravega_frames.TableKey(data=b"", key_version=None),  # no version: no bytes
            pravega_frames.TableKey(data=b"k", key_version=-5)])).encode()
    count = read.index(b"\x00\x00\x00\x02", 8 + 8 + 2 + 1 + 2)
    negative = read[:4] + struct.pack(">i", count - 8 + 4) + read[8:count] \
        + struct.pack(">i", -7)  # a negative count reads as no keys, row path and C alike
    create = pravega_frames.Frame(body=pravega_frames.CreateTableSegment(
        request_id=1, segment="t", delegation_token="", sorted_deprecated=True, key_length=4,
        rollover_size_bytes=9)).encode()
    old_create = create[:4] + struct.pack(">i", len(create) - 8 - 13) + create[8:-13]
    out, bad = _agree(pravega_spark, [read, negative, create, old_create])
    assert bad == []
    rows = out.frames.to_pylist()
    assert rows[1]["body"]["ReadTable"]["keys"] == []
    assert rows[3]["body"]["CreateTableSegment"]["sorted_deprecated"] is False  # its default


def test_pravega_frames_the_row_path_decides() -> None:
    setup = pravega_frames.Frame(body=pravega_frames.SetupAppend(
        request_id=7, writer_id=WRITER, segment="scope/stream/0", delegation_token="")).encode()
    unknown = struct.pack(">ii", 12345, 0)  # a type no command has
    negative = setup[:4] + struct.pack(">i", -1) + setup[8:]  # a negative body size
    short = setup[:4] + struct.pack(">i", len(setup) - 9) + setup[8:-1]  # the body cut short
    bad_text = bytearray(setup)
    bad_text[setup.index(b"scope")] = 0xFF  # a segment name that is not modified UTF-8
    nul = pravega_frames.Frame(body=pravega_frames.SegmentSealed(
        request_id=1, segment="a\x00b")).encode()  # C0 80: the row path's text
    wire = [setup, unknown, negative, short, bytes(bad_text), nul, setup + b"\x00", setup]
    out, bad = _agree(pravega_spark, wire)
    assert bad == [1, 2, 3, 4, 5, 6]
    errors = out.errors.to_pylist()
    assert errors[0] is None and errors[7] is None and errors[5] is None
    assert errors[1].startswith("UnknownCommandTypeError")
    assert all(errors[i] for i in (1, 2, 3, 4, 6))
    assert out.names.to_pylist()[5] == "SEGMENT_SEALED"


@st.composite
def tubemq_frames(draw: st.DrawFn) -> bytes:
    _, build, cls = draw(st.sampled_from(TUBEMQ_COMMANDS))
    frame = build(draw(tubemq_messages(cls)), serial_no=draw(st.integers(0, 2**32 - 1)))
    wire: bytes = frame.encode()
    return wire


I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def tubemq_rpc_frames(draw: st.DrawFn) -> tubemq_wire.Frame:
    """Any TubeMQ frame: a request (any flag but 1, the Go client's commit sends 10) or a
    response (flag 1) with its body or, failed, its exception; content past one block at
    times."""
    flag = draw(st.sampled_from([0, 1, 10]) | I32)
    header = tubemq_rpc.RpcConnHeader(flag=flag, traceId=draw(_maybe(I64)),
                                      spanId=draw(_maybe(I64)), parentId=draw(_maybe(I64)))
    data = draw(st.binary(max_size=40) | st.builds(lambda n, b: bytes([b]) * n,
                                                   st.integers(8000, 20000),
                                                   st.integers(0, 255)))
    method = draw(st.sampled_from([1, 2, 13, 15, 20, 99]) | I32)
    request = response = None
    if flag != 1:
        request = tubemq_wire.RpcRequest(
            header=tubemq_rpc.RequestHeader(serviceType=draw(_maybe(I32)),
                                            protocolVer=draw(_maybe(I32))),
            body=tubemq_rpc.RequestBody(method=method, timeout=draw(_maybe(I64)),
                                        request=draw(_maybe(st.just(data)))))
    else:
        status = draw(st.sampled_from(list(tubemq_rpc.ResponseHeader.Status)))
        ok = status == tubemq_rpc.ResponseHeader.Status.SUCCESS
        response = tubemq_wire.RpcResponse(
            header=tubemq_rpc.ResponseHeader(status=status, serviceType=draw(_maybe(I32))),
            body=tubemq_rpc.RspResponseBody(method=method, data=data) if ok else None,
            exception=None if ok else tubemq_rpc.RspExceptionBody(
                exceptionName=draw(st.text(max_size=12)),
                stackTrace=draw(_maybe(st.text(max_size=30)))))
    content = tubemq_wire.RpcContent(conn_header=header, request=request, response=response)
    return tubemq_wire.Frame(serial_no=draw(st.integers(0, 2**32 - 1)), content=content)


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(wire=st.lists(tubemq_frames(), max_size=8), offset=st.integers(0, 3))
def test_tubemq_commands(wire: list[bytes], offset: int) -> None:
    _, bad = _agree(tubemq_spark, wire, offset)
    assert bad == []  # every valid frame on the fast path


@settings(max_examples=80, deadline=None, suppress_health_check=SLOW)
@given(values=st.lists(tubemq_rpc_frames(), max_size=8))
def test_tubemq_rpc_frames(values: list[Any]) -> None:
    out, bad = _agree(tubemq_spark, [v.encode() for v in values])
    assert bad == []
    assert out.names.to_pylist() == [tubemq_spark.command_name(v) for v in values]


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW)
@given(wire=st.lists(tubemq_frames() | tubemq_rpc_frames().map(lambda f: f.encode()),
                     min_size=1, max_size=8),
       damage=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.integers(0, 2**16)),
                       max_size=4))
def test_damaged_tubemq_frames(wire: list[bytes], damage: list[tuple[int, int, int]]) -> None:
    for index, how, where in damage:
        wire[index % len(wire)] = _damaged(wire[index % len(wire)], how, where)
    _agree(tubemq_spark, wire)


def test_tubemq_frames_the_row_path_decides() -> None:
    request = tubemq_wire.Frame(serial_no=5, content=tubemq_wire.RpcContent(
        conn_header=tubemq_rpc.RpcConnHeader(flag=0),
        request=tubemq_wire.RpcRequest(header=tubemq_rpc.RequestHeader(),
                                       body=tubemq_rpc.RequestBody(method=1)))).encode()
    magic = b"\x00" + request[1:]  # not the frame's token
    blocks = request[:8] + struct.pack(">I", 3585) + request[12:]  # more blocks than allowed
    big = request[:12] + struct.pack(">I", 8193) + request[16:]  # a block past 8192 bytes
    short = request[:12] + struct.pack(">I", len(request) - 15) + request[16:-1]  # cut short
    wire = [request, magic, blocks, big, short, request + b"\x00", request[:-1], request]
    out, bad = _agree(tubemq_spark, wire)
    assert bad == [1, 2, 3, 4, 5, 6]
    errors = out.errors.to_pylist()
    assert errors[0] is None and errors[7] is None
    assert all(errors[i] for i in bad)


def test_without_the_extension_everything_takes_the_row_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROTOFRAME_PURE_PYTHON", "1")
    assert frame_plan(pulsar_spark) is None
    _agree(pulsar_spark, sample_wire_frames())


def test_no_leaks_and_no_references_kept() -> None:
    wire = sample_wire_frames() * 50
    bad_sum = bytearray(wire[1])
    bad_sum[-1] ^= 0xFF
    array = pa.array([*wire, bytes(bad_sum)], pa.binary())
    plan = frame_plan(pulsar_spark)
    assert plan is not None
    buffers = array.buffers()
    refs = [sys.getrefcount(b) for b in buffers if b is not None]
    for _ in range(3):
        plan.decode(array)
    gc.collect()
    blocks = sys.getallocatedblocks()
    for _ in range(20):
        plan.decode(array)
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 200
    assert [sys.getrefcount(b) for b in buffers if b is not None] == refs


def test_plans_are_checked() -> None:
    assert columnar._columnar is not None
    frame_plan_type = columnar._columnar.FramePlan
    steps = columnar._columnar.FRAME_STEPS
    with pytest.raises(ValueError, match="no step fills"):
        frame_plan_type((True, (False,), ()))
    with pytest.raises(ValueError, match="without its size step"):
        frame_plan_type((True, (False,), ((steps["bytes"], 0, 0, 0, 0, 0, 0, None),)))
    with pytest.raises(ValueError, match="names its field"):
        frame_plan_type((True, (), ((steps["bytes"], 0, 0, 0, -1, 0, -1, None),)))
    with pytest.raises(ValueError, match="sizes a later step"):
        frame_plan_type((True, (), ((steps["size"], 4, 0, 1, 0, 0, -1, None),)))
    with pytest.raises(ValueError, match="too narrow"):  # a u32 in an int32 column
        frame_plan_type((True, (False,), ((steps["int"], 4, 0, 1, 0, 0, 0, 4),)))
    with pytest.raises(ValueError, match="takes none"):
        frame_plan_type((True, (False,), ((steps["size"], 4, 0, 1, 1, 0, -1, None),
                                          (steps["int"], 4, 1, 1, 0, 0, 0, 4))))
    with pytest.raises(ValueError, match="sized by a size step"):
        frame_plan_type((True, (False,), ((steps["switch"], 0, 0, 0, 1, 0, 0, ((), ())),)))
    with pytest.raises(ValueError, match="int_when step out of range"):  # no bytes row before
        frame_plan_type((True, (True,), ((steps["int_when"], 8, 1, 1, 0, 0, 0, (8, (0, 3, 0))),)))
    with pytest.raises(ValueError, match="reads a required integer"):
        frame_plan_type((True, (True,), ((steps["struct_when"], 0, 0, 0, 0, 0, 0,
                                          ((True, (), ()), (0, 0, 0, 1))),)))
    with pytest.raises(ValueError, match="cases out of range or order"):
        frame_plan_type((True, (False,), (
            (steps["size"], 4, 1, 1, 1, 0, -1, None),
            (steps["switch"], 0, 0, 0, 1, 0, 0, ((True,), ((2, 0, None), (1, 0, None)))))))
    assert columnar_frames.frame_plan(pulsar_spark) is columnar_frames.frame_plan(pulsar_spark)


def test_every_truncation() -> None:
    """Every prefix of sample frames of each protocol (one run each): the same as the row
    path, and what the row path rejects left to it."""
    from bench.bench_capture_columnar import pravega_frames, tubemq_frames

    samples = {pulsar_spark: sample_wire_frames(),
               pravega_spark: [w for w, _ in PRAVEGA_VECTORS] + pravega_frames(4),
               tubemq_spark: tubemq_frames(2)}
    for module, wire in samples.items():
        cut = [w[:k] for w in wire for k in range(len(w) + 1)]
        _, bad = _agree(module, cut)
        assert bad  # the cut ones
