"""The operations TubeMQ's frame brought to the compiled frame codec (issue #21), against the
Python methods: a struct cut in length-prefixed blocks (``blocks``), protobuf messages after a
varint length of their own (``proto_prefixed``), and nested structs and such messages there
when a condition on an integer attribute of an earlier message holds (``struct_when``,
``proto_prefixed_when``: a request or a response by the connection header's flag, a result or
an exception by the response header's status).

As in ``test_compiled_frame_ops.py``: the same bytes, the same values and the same errors, on
random values, every truncation, random damage and odd values. A one-file spec holds blocks of
a compiled struct and of one the C codec leaves to its Python methods, with small blocks so
that a few bytes take several; TubeMQ's own frames hold the messages.
"""

from __future__ import annotations

import gc
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_protocols
from protoframe.generated.tubemq import frames as tubemq
from protoframe.generated.tubemq import rpc
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    check_random_damage,
    check_truncations,
    outcome,
    same,
    same_decodes,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: bops
doc: Blocks for the compiled frame codec.
byte_order: big
structs:
  Item:
    doc: A kind and its bytes.
    fields:
      - {name: kind, type: u8}
      - {name: data, type: bytes, prefix: u8}
  Content:
    doc: What the blocks hold, compiled.
    fields:
      - {name: a, type: u16}
      - {name: items, type: array, of: Item, until_end: true}
  Loose:
    doc: A struct with a rule, which keeps it on the Python codec.
    require: ["b is None or len(b) <= 255"]
    fields:
      - {name: a, type: u8}
      - {name: b, type: bytes, prefix: u8, when: "a == 1"}
frame:
  name: Frame
  doc: Two fields of blocks.
  fields:
    - {name: tag, type: u8}
    - {name: content, type: blocks, struct: Content, block_count: u8, block_length: u16,
       block_size: 5, max_blocks: 6}
    - {name: loose, type: blocks, struct: Loose, block_count: i16, block_length: i8,
       block_size: 3}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("bops"), "bops", SPEC, "bops_pkg")


def test_the_new_operations_are_compiled(m: ModuleType) -> None:
    for cls in (m.Frame, m.Content, m.Item, tubemq.Frame, tubemq.RpcRequest,
                tubemq.RpcResponse, tubemq.RpcContent):
        assert compiled.is_compiled(cls), cls.__name__
    assert not compiled.is_compiled(m.Loose)  # its blocks go through its Python methods


# --- random values ------------------------------------------------------------------------------

_items = st.lists(st.builds(lambda k, d: (k, d), st.integers(0, 255), st.binary(max_size=7)),
                  max_size=5)


def _frame(m: ModuleType, tag: int, a: int, items: list[tuple[int, bytes]], la: int,
           lb: bytes | None) -> Any:
    return m.Frame(tag=tag, content=m.Content(a=a, items=[m.Item(kind=k, data=d)
                                                          for k, d in items]),
                   loose=m.Loose(a=la, b=lb))


@settings(max_examples=scaled(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tag=st.integers(0, 255), a=st.integers(0, 2**16 - 1), items=_items,
       la=st.integers(0, 3), lb=st.binary(max_size=12))
def test_random_frames_round_trip_the_same_with_both_codecs(
        m: ModuleType, tag: int, a: int, items: list[tuple[int, bytes]], la: int,
        lb: bytes) -> None:
    frame = _frame(m, tag, a, items, la, lb if la == 1 else None)
    kind, _ = same(frame.encode)  # content past 6 blocks of 5 bytes: the same error
    if kind == "value":
        wire = frame.encode()
        assert same_decodes(m.Frame, wire) == "value"
        assert m.Frame.decode(wire) == frame


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    frames = [_frame(m, 1, 2, [], 0, None),  # two bytes: one block
              _frame(m, 1, 0x102, [(3, b"abc")], 1, b"xyz"),  # one full block; several
              _frame(m, 9, 7, [(1, b"abcdef"), (2, b"")], 1, b""),  # blocks of 5 and a rest
              _frame(m, 0, 0, [(4, b"x" * 20)], 2, None)]  # six blocks, the most
    out = [(m.Frame, f.encode()) for f in frames]
    out.append((tubemq.Frame, frames_protocols.tubemq_ours_encode()))
    request = tubemq.Frame.decode(out[-1][1]).content.request
    assert request is not None
    out.append((tubemq.RpcRequest, request.encode()))
    for frame in (_response(b"ok"), _response(None), _request(b"", flag=10)):
        out += [(tubemq.Frame, frame.encode()), (tubemq.RpcContent, frame.content.encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=13, rounds=scaled(200))


def _blocks(count: int, *blocks: bytes, fmt: str = ">BH") -> bytes:
    head, length = fmt[:2], fmt[0] + fmt[2]
    return struct.pack(head, count) + b"".join(struct.pack(length, len(b)) + b for b in blocks)


def test_odd_block_layouts_match(m: ModuleType) -> None:
    loose = _blocks(1, b"\x00", fmt=">hb")  # Loose(a=0)
    content = b"\x00\x01\x02\x01a"  # Content(a=1, items=[Item(2, b"a")])
    cases = [
        _blocks(1, content),
        _blocks(2, content[:2], content[2:]),  # blocks shorter than the block size
        _blocks(3, content[:1], b"", content[1:]),  # an empty block between
        _blocks(0),  # no blocks: no content, which Content cannot be
        _blocks(7, *[content[:1]] * 5 + [content[1:2], content[2:]]),  # more than 6 blocks
        _blocks(1, content[:3] + b"\x00\x03\x00"),  # a block of 6 bytes, each an item's
        _blocks(1, content[:4]),  # content cut in an item
        _blocks(2, content),  # a block missing
        struct.pack(">BH", 1, 0xFFFF) + content,  # a length past the end
    ]
    kinds = [same_decodes(m.Frame, b"\x05" + case + loose) for case in cases]
    assert kinds.count("value") == 3, kinds
    head = b"\x05" + _blocks(1, content)
    odd_loose = [
        _blocks(-1, fmt=">hb"),  # a negative count
        struct.pack(">hb", 1, -1) + b"\x00",  # a negative block length
        _blocks(2, b"\x01\x02", b"ab", fmt=">hb"),  # Loose(a=1, b=b"ab") over two blocks
        _blocks(1, b"\x00\x00", fmt=">hb"),  # content left over after Loose
        _blocks(1, b"\x01\x05", fmt=">hb"),  # Loose's prefix past its content
        _blocks(0, fmt=">hb"),
    ]
    kinds = [same_decodes(m.Frame, head + case) for case in odd_loose]
    assert kinds.count("value") == 1, kinds


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    good = _frame(m, 1, 2, [(1, b"ab")], 0, None)
    odd: list[dict[str, Any]] = [
        {"content": None}, {"content": m.Loose(a=0)}, {"content": "x"},
        {"content": m.Content(a=-1, items=[])}, {"content": m.Content(a=0, items=None)},
        {"content": m.Content(a=0, items=[m.Item(kind=1, data=b"x" * 26)])},  # 29 bytes: fits
        {"content": m.Content(a=0, items=[m.Item(kind=1, data=b"x" * 27)])},  # 7 blocks
        {"loose": m.Loose(a=1, b=None)}, {"loose": m.Loose(a=0, b=b"")}, {"loose": None},
        {"loose": m.Loose(a=1, b=b"x" * 200)},  # 64 blocks of 3 bytes: i8 lengths hold 3
        {"loose": m.Loose(a=1, b=b"x" * 255)}, {"loose": m.Content(a=1, items=[])},
        {"tag": 256},
    ]
    for change in odd:
        same(m.Frame(**{"tag": good.tag, "content": good.content, "loose": good.loose,
                         **change}).encode)


# --- TubeMQ ---------------------------------------------------------------------------------------


def test_the_bench_frames_agree() -> None:
    wire = frames_protocols.tubemq_ours_encode()
    assert same(frames_protocols.tubemq_ours_encode)[1] == repr(wire)
    assert same(lambda: frames_protocols.tubemq_ours_decode(wire))[0] == "value"
    assert frames_protocols.tubemq_ours_decode(wire) == frames_protocols.TUBEMQ_EXPECTED


def _request(body: bytes, method: int = 13, flag: int = 0) -> Any:
    return tubemq.Frame(serial_no=7, content=tubemq.RpcContent(
        conn_header=rpc.RpcConnHeader(flag=flag),
        request=tubemq.RpcRequest(header=rpc.RequestHeader(serviceType=3, protocolVer=3),
                                  body=rpc.RequestBody(method=method, request=body))))


_STATUS = rpc.ResponseHeader.Status


def _response(data: bytes | None, method: int = 13) -> Any:
    """A success carrying ``data``, or (None) an exception."""
    status = _STATUS.SUCCESS if data is not None else _STATUS(max(_STATUS))
    body = rpc.RspResponseBody(method=method, data=data) if data is not None else None
    exception = rpc.RspExceptionBody(exceptionName="E", stackTrace="at x") if data is None \
        else None
    return tubemq.Frame(serial_no=8, content=tubemq.RpcContent(
        conn_header=rpc.RpcConnHeader(flag=1),
        response=tubemq.RpcResponse(header=rpc.ResponseHeader(status=status), body=body,
                                    exception=exception)))


@settings(max_examples=scaled(100), deadline=None)
@given(flag=st.integers(0, 2**31 - 1) | st.sampled_from([0, 1, 10]),
       success=st.booleans(), data=st.binary(max_size=9000), method=st.integers(0, 30))
def test_requests_and_responses_round_trip(flag: int, success: bool, data: bytes,
                                           method: int) -> None:
    frame = _response(data if success else None, method) if flag == 1 else _request(
        data, method, flag)
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(tubemq.Frame, wire) == "value"
    assert tubemq.Frame.decode(wire) == frame
    assert same_decodes(tubemq.RpcContent, frame.content.encode()) == "value"


def test_halves_that_disagree_with_their_headers_match() -> None:
    request, response = _request(b"q").content, _response(b"r").content
    exception = _response(None).content
    odd = [
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=1), request=request.request),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=0), response=response.response),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=0), request=request.request,
                          response=response.response),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=1)),
        tubemq.RpcContent(conn_header=None, request=request.request),  # type: ignore[arg-type]
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=0),
                          request=response.response),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=2**40), request=request.request),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=True),
                          response=response.response),
        tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=1.0),  # type: ignore[arg-type]
                          response=response.response),
    ]
    assert response.response is not None and exception.response is not None
    header, body = response.response.header, response.response.body
    plain: Any = 0  # a status that is an int, not the enum
    unknown: Any = 7  # one the enum does not have
    odd_responses = [
        tubemq.RpcResponse(header=header, body=None),
        tubemq.RpcResponse(header=header, body=body, exception=rpc.RspExceptionBody(
            exceptionName="x")),
        tubemq.RpcResponse(header=exception.response.header, body=body),
        tubemq.RpcResponse(header=rpc.ResponseHeader(status=plain), body=body),
        tubemq.RpcResponse(header=rpc.ResponseHeader(status=unknown), body=body),
        tubemq.RpcResponse(header=None, body=body),  # type: ignore[arg-type]
        tubemq.RpcResponse(header=header, body=b"raw"),  # type: ignore[arg-type]
    ]
    for value in odd + odd_responses:
        kind, _ = same(value.encode)
        if kind == "value":
            same_decodes(type(value), value.encode())
        frame_value = tubemq.RpcContent(conn_header=rpc.RpcConnHeader(flag=1), response=value) \
            if isinstance(value, tubemq.RpcResponse) else value
        same(tubemq.Frame(serial_no=1, content=frame_value).encode)


def test_a_header_whose_status_is_unknown_or_missing_matches() -> None:
    response = _response(b"r").content.response
    assert response is not None and response.body is not None
    body = response.body.encode()
    for header in (b"\x08\x00", b"\x08\x07", b"\x08\xff\xff\xff\xff\x0f", b"", b"\x10\x01",
                   b"\x08\x00\x08\x01"):
        wire = bytes([len(header)]) + header + bytes([len(body)]) + body
        same_decodes(tubemq.RpcResponse, wire)
        content = b"\x02\x08\x01" + wire
        same_decodes(tubemq.RpcContent, content)


@settings(max_examples=scaled(60), deadline=None)
@given(size=st.integers(0, 3 * 8192 + 100), method=st.integers(0, 2**31 - 1),
       serial=st.integers(0, 2**32 - 1))
def test_requests_of_many_blocks_round_trip(size: int, method: int, serial: int) -> None:
    frame = _request(bytes([size % 251]) * size, method)
    frame.serial_no = serial
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(tubemq.Frame, wire) == "value"
    assert tubemq.Frame.decode(wire) == frame


def test_odd_tubemq_values_encode_as_the_python_codec_does() -> None:
    frame = _request(b"abc")
    request = frame.content.request
    assert request is not None
    odd: list[Callable[[], Any]] = [
        lambda: setattr(request, "header", None),
        lambda: setattr(request, "header", rpc.RequestBody(method=1)),  # another message
        lambda: setattr(request, "body", b"bytes"),
        lambda: setattr(request.body, "method", 2**40),  # out of range for the protobuf codec
        lambda: setattr(frame, "serial_no", -1),
        lambda: setattr(frame.content, "request", None),
        lambda: setattr(request.body, "request", b"x" * (3584 * 8192)),  # past 3584 blocks
    ]
    for change in odd:
        frame = _request(b"abc")
        request = frame.content.request
        assert request is not None
        change()
        same(frame.encode)
        same(request.encode)


def test_an_overlong_varint_prefix_matches() -> None:
    request = _request(b"abc").content.request
    assert request is not None
    header = request.header.encode()
    body = request.body.encode()
    for prefix in (b"\x80" * 9 + b"\x00", b"\x80" * 10 + b"\x00", b"\xff" * 10,
                   bytes([len(header) | 0x80, 0])):
        same_decodes(tubemq.RpcRequest, prefix + header + bytes([len(body)]) + body)


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_leaks(m: ModuleType) -> None:
    samples = _samples(m)
    for _ in range(3):
        for cls, wire in samples:
            cls.decode(wire).encode()
            for cut in range(0, len(wire), 7):
                outcome(lambda: cls.decode(wire[:cut]))  # noqa: B023
    gc.collect()
    counts = [sys.getrefcount(wire) for _, wire in samples]
    total = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    for _ in range(200):
        for cls, wire in samples:
            cls.decode(wire).encode()
            for cut in range(0, len(wire), 7):
                outcome(lambda: cls.decode(wire[:cut]))  # noqa: B023
    gc.collect()
    assert [sys.getrefcount(wire) for _, wire in samples] == counts
    if total is not None:
        assert sys.gettotalrefcount() - total < 1000
