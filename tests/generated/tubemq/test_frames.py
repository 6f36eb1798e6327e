"""TubeMQ RPC frames generated from specs/tubemq/tubemq.yaml and our own .proto files.

Expected bytes are written out by hand from the reference layout (token, serial number, block
count, length-prefixed blocks; inside, three varint-delimited protobuf messages), with the
protobuf fields encoded by hand too (tag = number << 3 | wire type).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import DescriptorProto
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.tubemq.broker_service import SendMessageRequestP2B
from protoframe.generated.tubemq.frames import (
    Frame,
    RpcContent,
    RpcRequest,
    RpcResponse,
    StreamDecoder,
)
from protoframe.generated.tubemq.master_service import RegisterRequestP2M
from protoframe.generated.tubemq.rpc import (
    RequestBody,
    RequestHeader,
    ResponseHeader,
    RpcConnHeader,
    RspExceptionBody,
    RspResponseBody,
)
from protoframe.generator.client_view import build_client_module
from protoframe.generator.errors import SpecErrors
from protoframe.generator.frame_model import load_frame_spec
from protoframe.generator.ir import Protocol
from protoframe.generator.protoc import compile_protos
from protoframe.runtime.errors import (
    BadMagicError,
    EncodeError,
    FrameTooLargeError,
    SizeMismatchError,
    TruncatedError,
)
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.examples import scaled
from tests.support.paths import ROOT

UPSTREAM = ROOT.parent / "shared" / "reference" / "tubemq"
Status = ResponseHeader.Status


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def request(serial_no: int, method: int, data: bytes, *, timeout: int | None = 10000,
            flag: int = 0) -> Frame:
    return Frame(serial_no=serial_no, content=RpcContent(
        conn_header=RpcConnHeader(flag=flag),
        request=RpcRequest(header=RequestHeader(serviceType=1, protocolVer=2),
                           body=RequestBody(method=method, timeout=timeout, request=data))))


def success(serial_no: int, method: int, data: bytes) -> Frame:
    return Frame(serial_no=serial_no, content=RpcContent(
        conn_header=RpcConnHeader(flag=1),
        response=RpcResponse(header=ResponseHeader(status=Status.SUCCESS, protocolVer=3),
                             body=RspResponseBody(method=method, data=data))))


# Request, serial 5: RpcConnHeader{flag 0} = 08 00; RequestHeader{serviceType 1,
# protocolVer 2} = 08 01 10 02; RequestBody{method 1, timeout 10000, request "abc"} =
# 08 01 10 90 4e 1a 03 616263. 19 bytes of content, one block.
REQUEST_WIRE = h("ff7ff4fe 00000005 00000001 00000013"
                 " 02 0800 04 08011002 0a 0801 10904e 1a03616263")
REQUEST = request(5, 1, b"abc")

# Success response, serial 5: flag 1; ResponseHeader{status SUCCESS, protocolVer 3} =
# 08 00 18 03; RspResponseBody{method 1, data "ok"} = 08 01 12 02 6f6b.
RESPONSE_WIRE = h("ff7ff4fe 00000005 00000001 0000000f 02 0801 04 08001803 06 0801 12026f6b")
RESPONSE = success(5, 1, b"ok")

# Failure, serial 6: ResponseHeader{status ERROR} = 08 01; RspExceptionBody{exceptionName "E"}
# = 0a 01 45.
EXCEPTION_WIRE = h("ff7ff4fe 00000006 00000001 0000000a 02 0801 02 0801 03 0a0145")
EXCEPTION = Frame(serial_no=6, content=RpcContent(
    conn_header=RpcConnHeader(flag=1),
    response=RpcResponse(header=ResponseHeader(status=Status.ERROR),
                         exception=RspExceptionBody(exceptionName="E"))))

VECTORS = [(REQUEST_WIRE, REQUEST), (RESPONSE_WIRE, RESPONSE), (EXCEPTION_WIRE, EXCEPTION)]
IDS = ["request", "response", "exception"]


@pytest.mark.parametrize(("wire", "frame"), VECTORS, ids=IDS)
def test_encode_matches_the_hand_written_bytes(wire: bytes, frame: Frame) -> None:
    assert frame.encode() == wire


@pytest.mark.parametrize(("wire", "frame"), VECTORS, ids=IDS)
def test_decode_gives_the_values_back(wire: bytes, frame: Frame) -> None:
    assert Frame.decode(wire) == frame


def test_flag_selects_request_or_response() -> None:
    content = Frame.decode(REQUEST_WIRE).content
    assert content.request is not None and content.response is None
    assert content.request.body.method == 1 and content.request.body.request == b"abc"
    content = Frame.decode(RESPONSE_WIRE).content
    assert content.request is None and content.response is not None
    assert content.response.body is not None and content.response.body.data == b"ok"
    assert content.response.exception is None
    content = Frame.decode(EXCEPTION_WIRE).content
    assert content.response is not None and content.response.body is None
    assert content.response.exception == RspExceptionBody(exceptionName="E")


def test_go_commit_flag_ten_reads_as_a_request() -> None:
    frame = request(9, 18, b"", flag=10)
    assert Frame.decode(frame.encode()) == frame
    assert Frame.decode(frame.encode()).content.request is not None


def test_body_must_match_the_flag_and_status() -> None:
    with pytest.raises(EncodeError):  # a response flag with a request body
        Frame(serial_no=1, content=RpcContent(conn_header=RpcConnHeader(flag=1),
                                              request=REQUEST.content.request)).encode()
    with pytest.raises(EncodeError):  # SUCCESS without its body
        Frame(serial_no=1, content=RpcContent(
            conn_header=RpcConnHeader(flag=1),
            response=RpcResponse(header=ResponseHeader(status=Status.SUCCESS)))).encode()
    with pytest.raises(EncodeError):  # FATAL with a success body
        Frame(serial_no=1, content=RpcContent(
            conn_header=RpcConnHeader(flag=1),
            response=RpcResponse(header=ResponseHeader(status=Status.FATAL),
                                 body=RspResponseBody(method=1, data=b"")))).encode()


def test_cpp_trailing_zero_bytes_are_tolerated() -> None:
    # The C++ client sizes its buffer as 4 + len per message and sends all of it.
    padded = h("ff7ff4fe 00000005 00000001 00000016 02 0800 04 08011002 0a 0801 10904e"
               " 1a03616263 000000")
    assert Frame.decode(padded) == REQUEST
    assert StreamDecoder().feed(padded) == [REQUEST]


def test_service_messages_travel_serialized() -> None:
    register = RegisterRequestP2M(clientId="p1", topicList=["t"], brokerCheckSum=-1,
                                  hostName="h")
    frame = request(7, 1, register.encode())
    body = Frame.decode(frame.encode()).content.request
    assert body is not None
    assert RegisterRequestP2M.decode(body.body.request) == register


# -- blocks -----------------------------------------------------------------------------------


def test_content_spanning_several_blocks() -> None:
    data = bytes(range(256)) * 79  # 20224 bytes
    frame = request(11, 13, data)
    wire = frame.encode()
    content = frame.content.encode()
    # conn header 3, request header 5, body delimiter 3, method 2, timeout 3, request tag 1
    # and length 3: 20244 bytes, three blocks.
    assert len(content) == 3 + 5 + 3 + 2 + 3 + 1 + 3 + len(data)
    assert wire[:16] == h("ff7ff4fe 0000000b 00000003 00002000")
    assert wire[16 : 16 + 8192] == content[:8192]
    assert wire[16 + 8192 : 20 + 8192] == h("00002000")
    assert wire[20 + 2 * 8192 : 24 + 2 * 8192] == struct.pack(">I", len(content) - 2 * 8192)
    assert len(wire) == 12 + 3 * 4 + len(content)
    assert Frame.decode(wire) == frame
    stream = StreamDecoder()
    out: list[Frame] = []
    for i in range(0, len(wire), 1000):
        out += stream.feed(wire[i : i + 1000])
    assert out == [frame]


def test_exactly_one_full_block() -> None:
    # 8192 bytes of content make exactly one block and no empty second one.
    for size in range(8170, 8200):
        frame = request(1, 13, bytes(size), timeout=None)
        n = len(frame.content.encode())
        wire = frame.encode()
        assert struct.unpack_from(">I", wire, 8)[0] == (n + 8191) // 8192
        assert Frame.decode(wire) == frame


def test_short_blocks_from_other_writers_are_accepted() -> None:
    # Java's writer may cut blocks anywhere; only their concatenation matters.
    content = REQUEST_WIRE[16:]
    wire = h("ff7ff4fe 00000005 00000003") + b"".join(
        struct.pack(">I", len(part)) + part for part in (content[:1], content[1:10], content[10:]))
    assert Frame.decode(wire) == REQUEST


def test_empty_content_is_not_an_rpc() -> None:
    with pytest.raises(SizeMismatchError):  # no RpcConnHeader at all
        Frame.decode(h("ff7ff4fe 00000001 00000000"))


# -- errors -----------------------------------------------------------------------------------


def test_bad_token() -> None:
    with pytest.raises(BadMagicError):
        Frame.decode(h("ff7ff4ff") + REQUEST_WIRE[4:])
    stream = StreamDecoder()
    with pytest.raises(BadMagicError):  # refused from the header, before the body arrives
        stream.feed(h("deadbeef 00000005 00000001"))


def test_truncated() -> None:
    for cut in range(len(REQUEST_WIRE)):
        with pytest.raises(TruncatedError):
            Frame.decode(REQUEST_WIRE[:cut])


def test_oversize_fails_before_buffering() -> None:
    stream = StreamDecoder()
    with pytest.raises(FrameTooLargeError):  # more blocks than Java accepts
        stream.feed(h("ff7ff4fe 00000001 00000e01"))
    assert stream.buffered == 0
    small = StreamDecoder(max_frame_size=64)
    with pytest.raises(FrameTooLargeError):  # one block announced past the limit
        small.feed(h("ff7ff4fe 00000001 00000001 00000100"))
    with pytest.raises(FrameTooLargeError):  # a block over 8192 bytes
        StreamDecoder().feed(h("ff7ff4fe 00000001 00000001 00002001"))
    with pytest.raises(EncodeError):
        request(1, 13, bytes(3584 * 8192)).encode()


def test_sizes_disagreeing_with_the_content() -> None:
    with pytest.raises(SizeMismatchError):  # a block over 8192 bytes
        Frame.decode(h("ff7ff4fe 00000001 00000001 00002001") + bytes(0x2001))
    with pytest.raises(SizeMismatchError):  # more blocks than allowed
        Frame.decode(h("ff7ff4fe 00000001 00000e01"))
    # RequestBody's delimiter claims 11 bytes where 10 remain in the content.
    with pytest.raises(SizeMismatchError):
        Frame.decode(h("ff7ff4fe 00000005 00000001 00000013"
                       " 02 0800 04 08011002 0b 0801 10904e 1a03616263"))


# -- streams ----------------------------------------------------------------------------------


def test_stream_byte_by_byte() -> None:
    stream = StreamDecoder()
    wire = b"".join(w for w, _ in VECTORS)
    out: list[Frame] = []
    for i in range(len(wire)):
        out += stream.feed(wire[i : i + 1])
    assert out == [f for _, f in VECTORS]
    assert stream.buffered == 0


def test_stream_several_frames_in_one_feed() -> None:
    stream = StreamDecoder()
    assert stream.feed(REQUEST_WIRE + RESPONSE_WIRE + EXCEPTION_WIRE[:7]) == [REQUEST, RESPONSE]
    assert stream.feed(EXCEPTION_WIRE[7:]) == [EXCEPTION]


# -- every kind of frame round-trips ----------------------------------------------------------

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
opt_i32 = st.none() | i32
opt_i64 = st.none() | i64
payload = st.binary(max_size=50) | st.binary(min_size=8000, max_size=20000)

request_flags = st.sampled_from([0, 10]) | i32.filter(lambda v: v != 1)
conn_headers = st.builds(RpcConnHeader, flag=request_flags, traceId=opt_i64, spanId=opt_i64,
                         parentId=opt_i64)
requests = st.builds(
    RpcRequest,
    header=st.builds(RequestHeader, serviceType=opt_i32, protocolVer=opt_i32),
    body=st.builds(RequestBody, method=i32, timeout=opt_i64, request=st.none() | payload))


@st.composite
def responses(draw: st.DrawFn) -> RpcResponse:
    status = draw(st.sampled_from(list(Status)))
    header = ResponseHeader(status=status, serviceType=draw(opt_i32), protocolVer=draw(opt_i32))
    if status is Status.SUCCESS:
        return RpcResponse(header=header,
                           body=RspResponseBody(method=draw(i32), data=draw(payload)))
    return RpcResponse(header=header, exception=RspExceptionBody(
        exceptionName=draw(st.text(max_size=30)), stackTrace=draw(st.none() | st.text())))


contents = st.one_of(
    st.builds(RpcContent, conn_header=conn_headers, request=requests),
    st.builds(RpcContent,
              conn_header=st.builds(RpcConnHeader, flag=st.just(1), traceId=opt_i64),
              response=responses()))


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(st.integers(0, 2**32 - 1), contents)
def test_round_trip_every_frame_kind(either_codec: str, serial_no: int,
                                     content: RpcContent) -> None:
    frame = Frame(serial_no=serial_no, content=content)
    wire = frame.encode()
    assert wire[:4] == h("ff7ff4fe")
    assert struct.unpack_from(">I", wire, 4)[0] == serial_no
    assert Frame.decode(wire) == frame
    assert StreamDecoder().feed(wire + wire) == [frame, frame]


# -- correlation by a frame field ---------------------------------------------------------------

MINI = """
protocol: mini
structs:
  Ping: {fields: []}
  Pong: {fields: []}
frame:
  name: Frame
  fields:
    - {name: kind, type: u8}
    - {name: serial_no, type: u32}
    - {name: size, type: u32, size_of: body}
    - {name: body, type: switch, on: kind, cases: {1: Ping, 2: Pong}}
interactions:
  requests:
    - {request: PING, response: PONG, correlate: [CORRELATE]}
"""


def test_requests_can_correlate_by_a_frame_field(tmp_path: Path) -> None:
    spec_path = tmp_path / "mini.yaml"
    spec_path.write_text(MINI.replace("CORRELATE", "serial_no"))
    spec = load_frame_spec(spec_path, "mini.yaml", Protocol(name="mini"))
    (pair,) = spec.requests
    assert pair.correlate == ["serial_no"]
    assert pair.frame_correlate == ["serial_no"]
    # The request method takes the serial number (nothing allocates it) and waits for the
    # answer whose frame carries the same one.
    (method,) = build_client_module(spec).methods
    assert method.params[0] == "serial_no: int"
    assert method.key_expr == "(frame.serial_no,)"
    assert "frame = frames.Frame(body=body, serial_no=serial_no)" in method.body_lines
    spec_path.write_text(MINI.replace("CORRELATE", "serial"))
    with pytest.raises(SpecErrors) as info:
        load_frame_spec(spec_path, "mini.yaml", Protocol(name="mini"))
    assert "'serial' is not a field of PING nor a data field of Frame" in str(info.value)


# -- our .proto files describe upstream's messages ----------------------------------------------


def _messages(directory: Path, files: list[str]) -> dict[str, DescriptorProto]:
    out: dict[str, DescriptorProto] = {}
    for fd in compile_protos(directory, files, str(directory)):
        if fd.name in files:
            out.update({m.name: m for m in fd.message_type})
    return out


def _shape(message: DescriptorProto) -> list[tuple[object, ...]]:
    fields = [(f.name, f.number, f.type, f.label, f.type_name, f.default_value)
              for f in message.field]
    enums = [(e.name, [(v.name, v.number) for v in e.value]) for e in message.enum_type]
    return [*fields, *enums]


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="../shared/reference/tubemq is not present")
@pytest.mark.parametrize(("name", "complete"), [("RPC.proto", True),
                                                ("BrokerService.proto", True),
                                                ("MasterService.proto", False)])
def test_our_protos_match_upstream(name: str, complete: bool) -> None:
    ours = _messages(ROOT / "specs" / "tubemq", [name])
    theirs = _messages(UPSTREAM, [name])
    assert ours
    if complete:
        assert sorted(ours) == sorted(theirs)
    for message, descriptor in ours.items():
        assert message in theirs, message
        assert _shape(descriptor) == _shape(theirs[message]), message


def test_broker_message_inside_a_request() -> None:
    send = SendMessageRequestP2B(clientId="c", topicName="t", partitionId=0, data=b"x" * 9000,
                                 flag=0, checkSum=-1, sentAddr=0)
    frame = request(3, 13, send.encode())
    decoded = Frame.decode(frame.encode()).content.request
    assert decoded is not None
    assert SendMessageRequestP2B.decode(decoded.body.request) == send
