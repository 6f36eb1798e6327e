"""TubeMQ commands: named by RequestBody.method / RspResponseBody.method inside the content,
their bodies serialized in RequestBody.request / RspResponseBody.data (the spec's ``commands:``
routes), answers correlated by the frame's serial_no.

Byte vectors are written out by hand with ``struct.pack`` (frame header, block header) and
hand-encoded protobuf fields (tag = number << 3 | wire type).
"""

from __future__ import annotations

import asyncio
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.tubemq import broker_service as bs
from protoframe.generated.tubemq import machines as m
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.client import TubemqRequests
from protoframe.generated.tubemq.commands import HOOKS
from protoframe.generated.tubemq.frames import Frame, RpcContent, RpcRequest, StreamDecoder
from protoframe.generated.tubemq.rpc import (
    RequestBody,
    RequestHeader,
    ResponseHeader,
    RpcConnHeader,
    RspExceptionBody,
)
from protoframe.runtime.errors import (
    MissingRequiredFieldError,
    RequestFailed,
    UnknownCommandError,
    UnknownCommandTypeError,
)
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.examples import scaled
from tests.support.tubemq_commands import (
    COMMANDS,
    TOKEN,
    Builder,
    Loopback,
    filled,
    frame_bytes,
    messages,
)

# -- every command inside a frame ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "build", "cls"), COMMANDS, ids=[c[0] for c in COMMANDS])
@settings(max_examples=scaled(25), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(data=st.data(), serial_no=st.integers(0, 2**32 - 1))
def test_round_trip_in_a_frame(either_codec: str, name: str, build: Builder, cls: type,
                               data: st.DataObject, serial_no: int) -> None:
    body = data.draw(messages(cls))
    frame = build(body, serial_no=serial_no)
    wire = frame.encode()
    cut = data.draw(st.integers(0, len(wire)))
    decoder = StreamDecoder()
    [decoded] = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
    assert decoded == frame
    assert decoded.serial_no == serial_no
    assert m.command_of(decoded) == (name, body)
    assert m.frame_of(name, body, serial_no=serial_no) == frame


def test_every_routed_command_is_covered() -> None:
    assert {c[0] for c in COMMANDS} == set(HOOKS)


# -- hand-written bytes -------------------------------------------------------------------------

# RegisterRequestP2M{clientId "c", topicList ["t"], brokerCheckSum 0, hostName "h"}.
REGISTER_P2M_BODY = bytes.fromhex("0a0163" "120174" "1800" "220168")
# RpcConnHeader{flag 0}; RequestHeader{serviceType 1, protocolVer 3};
# RequestBody{method 1, request <the body>}.
REGISTER_P2M_CONTENT = (b"\x02\x08\x00" + b"\x04\x08\x01\x10\x03"
                        + bytes([4 + len(REGISTER_P2M_BODY), 0x08, 0x01, 0x1A,
                                 len(REGISTER_P2M_BODY)]) + REGISTER_P2M_BODY)
# RegisterResponseM2P{success true, errCode 200, errMsg "OK", brokerCheckSum 1}.
REGISTER_M2P_BODY = bytes.fromhex("0801" "10c801" "1a024f4b" "2001")
# RpcConnHeader{flag 1}; ResponseHeader{status SUCCESS, protocolVer 3};
# RspResponseBody{method 1, data <the body>}.
REGISTER_M2P_CONTENT = (b"\x02\x08\x01" + b"\x04\x08\x00\x18\x03"
                        + bytes([4 + len(REGISTER_M2P_BODY), 0x08, 0x01, 0x12,
                                 len(REGISTER_M2P_BODY)]) + REGISTER_M2P_BODY)
# ResponseHeader{status ERROR, protocolVer 3}; RspExceptionBody{exceptionName "E",
# stackTrace "m"}.
EXCEPTION_CONTENT = b"\x02\x08\x01" + b"\x04\x08\x01\x18\x03" + b"\x06\x0a\x01E\x12\x01m"


def test_request_bytes() -> None:
    body = ms.RegisterRequestP2M(clientId="c", topicList=["t"], brokerCheckSum=0, hostName="h")
    assert body.encode() == REGISTER_P2M_BODY
    frame = m.frame_of_register_p2m(body, serial_no=0x01020304)
    wire = frame_bytes(0x01020304, REGISTER_P2M_CONTENT)
    assert frame.encode() == wire
    assert m.command_of(Frame.decode(wire)) == ("REGISTER_P2M", body)


def test_response_bytes() -> None:
    body = ms.RegisterResponseM2P(success=True, errCode=200, errMsg="OK", brokerCheckSum=1)
    wire = frame_bytes(9, REGISTER_M2P_CONTENT)
    assert m.frame_of_register_m2p(body, serial_no=9).encode() == wire
    assert m.command_of(Frame.decode(wire)) == ("REGISTER_M2P", body)


def test_exception_bytes() -> None:
    body = RspExceptionBody(exceptionName="E", stackTrace="m")
    wire = frame_bytes(10, EXCEPTION_CONTENT)
    assert m.frame_of_exception(body, serial_no=10).encode() == wire
    assert m.command_of(Frame.decode(wire)) == ("EXCEPTION", body)


def test_a_body_over_several_blocks() -> None:
    body = bs.SendMessageRequestP2B(clientId="c", topicName="t", partitionId=1,
                                    data=bytes(range(256)) * 40, flag=0, checkSum=-1,
                                    sentAddr=0)
    wire = m.frame_of_send_message_p2b(body, serial_no=3).encode()
    assert struct.unpack_from(">III", wire) == (TOKEN, 3, 2)
    first = struct.unpack_from(">I", wire, 12)[0]
    assert first == 8192
    assert struct.unpack_from(">I", wire, 16 + 8192)[0] == len(wire) - 20 - 8192
    assert m.command_of(Frame.decode(wire)) == ("SEND_MESSAGE_P2B", body)


def test_unknown_method_and_bad_body() -> None:
    def request(method: int, data: bytes) -> Frame:
        return Frame(serial_no=1, content=RpcContent(
            conn_header=RpcConnHeader(flag=0),
            request=RpcRequest(header=RequestHeader(serviceType=1),
                               body=RequestBody(method=method, request=data))))

    with pytest.raises(UnknownCommandError, match="no command has the value 11") as info:
        m.command_of(request(11, b""))
    assert isinstance(info.value, UnknownCommandTypeError) and info.value.command_type == 11
    with pytest.raises(MissingRequiredFieldError):
        m.command_of(request(1, b""))  # RegisterRequestP2M without its required fields


def test_set_values_are_written() -> None:
    frame = m.frame_of_get_message_c2b(
        bs.GetMessageRequestC2B(clientId="c", partitionId=0, groupName="g", topicName="t"),
        serial_no=1)
    request = frame.content.request
    assert request is not None and frame.content.conn_header.flag == 0
    assert (request.header.serviceType, request.header.protocolVer) == (2, 3)
    assert request.body.method == 17
    send = m.frame_of_send_message_p2b(filled(bs.SendMessageRequestP2B, random.Random(1), 0),
                                       serial_no=1)
    assert send.content.request is not None and send.content.request.header.serviceType == 3
    failure = m.frame_of_exception(RspExceptionBody(exceptionName="E"), serial_no=1)
    assert failure.content.response is not None
    assert failure.content.response.header.status is ResponseHeader.Status.ERROR


# -- the generated client correlates by serial_no -----------------------------------------------


def test_answers_are_matched_by_serial_no_in_any_order() -> None:
    async def main() -> None:
        transport = Loopback()
        client = TubemqRequests(transport, timeout=5.0)
        first = asyncio.ensure_future(client.register_producer_to_master(
            ms.RegisterRequestP2M(clientId="a", brokerCheckSum=0, hostName="h")))
        second = asyncio.ensure_future(client.close_producer_to_master(
            ms.CloseRequestP2M(clientId="a")))
        third = asyncio.ensure_future(client.get_message_from_broker(
            bs.GetMessageRequestC2B(clientId="a", partitionId=0, groupName="g", topicName="t")))
        while len(transport.sent) < 3:
            await asyncio.sleep(0)
        serials = [f.serial_no for f in transport.sent]
        assert serials == [0, 1, 2]
        # An answer naming the wrong method for its serial number completes nothing.
        wrong = m.frame_of_close_m2p(ms.CloseResponseM2P(success=True, errCode=200, errMsg=""),
                                     serial_no=serials[0])
        assert not client.handle_frame(wrong)
        assert client.handle_frame(m.frame_of_exception(
            RspExceptionBody(exceptionName="X", stackTrace="boom"), serial_no=serials[2]))
        assert client.handle_frame(m.frame_of_close_m2p(
            ms.CloseResponseM2P(success=True, errCode=200, errMsg="bye"), serial_no=serials[1]))
        assert client.handle_frame(m.frame_of_register_m2p(
            ms.RegisterResponseM2P(success=True, errCode=200, errMsg="", brokerCheckSum=5),
            serial_no=serials[0]))
        assert (await first).brokerCheckSum == 5
        assert (await second).errMsg == "bye"
        with pytest.raises(RequestFailed) as info:
            await third
        assert info.value.command == "EXCEPTION"
        assert isinstance(info.value.body, RspExceptionBody)
        assert info.value.body.exceptionName == "X"

    asyncio.run(asyncio.wait_for(main(), 10))


def test_serial_numbers_wrap_at_32_bits() -> None:
    client = TubemqRequests(Loopback())
    assert client.next_id._limit == 2**32
