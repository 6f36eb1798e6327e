"""The hand-written ``struct`` codecs of ``bench frames`` against the generated ones.

The bench compares their speed, which only means something if they do the same work: the
same bytes out, the same values in, and the hand-written decoders reading any count, length,
block split and field order the generated encoders may produce, not only the bench's frame.
"""

from __future__ import annotations

from uuid import UUID

import pytest

from bench import frames_protocols as fp
from protoframe.generated.pravega import frames as pravega
from protoframe.generated.tank import frames as tank
from protoframe.generated.tubemq import frames as tubemq
from protoframe.generated.tubemq import machines as tubemq_machines
from protoframe.generated.tubemq import rpc
from protoframe.generated.tubemq.broker_service import SendMessageRequestP2B

CASES = {case.protocol: case for case in fp.frame_cases()}


def test_every_case_agrees() -> None:
    fp.check_cases(fp.frame_cases(), fp.batch_cases())


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_same_bytes_and_values(protocol: str) -> None:
    case = CASES[protocol]
    assert case.hand_encode() == case.ours_encode() == case.wire
    assert case.hand_decode(case.wire) == case.ours_decode(case.wire) == case.expected


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_hand_decoder_rejects_damage(protocol: str) -> None:
    wire = CASES[protocol].wire
    with pytest.raises(Exception):  # noqa: B017 - any error: the codecs' error types differ
        CASES[protocol].hand_decode(wire[:-1])
    with pytest.raises(Exception):  # noqa: B017
        CASES[protocol].hand_decode(wire + b"\x00")


def test_tank_counts_beyond_the_flags() -> None:
    # 20 messages: the count no longer fits the flags and follows them as a varint.
    messages = [tank.Message(flags=1, timestamp=i, key=b"k" * i, content=bytes(i * 7))
                for i in range(20)]
    data = tank.Bundle(codec=0, sparse=False, msg_count=20,
                       messages=tank.MessageSet(messages=messages)).encode()
    assert fp.tank_hand_batch(data) == fp.tank_batch_values(data)
    assert [m[1] for m in fp.tank_hand_batch(data)] == list(range(20))


def test_tank_hand_message_set_matches_ours() -> None:
    values = tuple((f"k{i}".encode(), 1000 + i, bytes(200 + i)) for i in range(17))
    ours = tank.Bundle(codec=0, sparse=False, msg_count=len(values), messages=tank.MessageSet(
        messages=[tank.Message(flags=1, timestamp=ts, key=k, content=c) for k, ts, c in values]))
    assert fp.tank_hand_message_set(values) == ours.encode()


def test_tank_messages_without_key_or_timestamp() -> None:
    messages = [tank.Message(flags=0, timestamp=5, content=b"a"),
                tank.Message(flags=2, content=b"bb")]
    data = tank.Bundle(codec=0, sparse=False, msg_count=2,
                       messages=tank.MessageSet(messages=messages)).encode()
    assert fp.tank_hand_batch(data) == fp.tank_batch_values(data) == [
        (None, 5, b"a"), (None, None, b"bb")]


def test_pravega_without_request_id_reads_minus_one() -> None:
    wire = CASES["Pravega"].wire
    old = wire[:-8]  # an older peer stops before the request id
    old = old[:4] + (len(old) - 8).to_bytes(4, "big") + old[8:]
    assert fp.pravega_hand_decode(old) == fp.pravega_ours_decode(old)
    assert fp.pravega_hand_decode(old)[4] == -1


def test_pravega_event_run_matches_ours() -> None:
    events = tuple(bytes([i]) * i for i in range(50))
    ours = pravega.EventRun(events=[pravega.Event(data=e) for e in events]).encode()
    assert fp.pravega_hand_event_run(events) == ours
    assert fp.pravega_hand_batch(ours) == fp.pravega_batch_values(ours)
    frame = pravega.Frame(body=pravega.AppendBlockEnd(
        writer_id=UUID(int=1), size_of_whole_events=3, data=ours, num_events=50,
        last_event_number=-5, request_id=9)).encode()
    assert fp.pravega_hand_decode(frame) == fp.pravega_ours_decode(frame)


def test_tubemq_many_blocks_and_negative_values() -> None:
    # 20 kB of data: the content spans three blocks; negative int32s are 10-byte varints.
    body = SendMessageRequestP2B(clientId="c", topicName="t", partitionId=-3,
                                 data=bytes(range(256)) * 80, flag=-1, checkSum=-2**31,
                                 sentAddr=2**31 - 1, msgType="", msgTime="x")
    wire = tubemq_machines.frame_of_send_message_p2b(body, serial_no=2**32 - 1).encode()
    assert int.from_bytes(wire[8:12], "big") == 3
    assert fp.tubemq_hand_decode(wire) == fp.tubemq_ours_decode(wire)
    assert fp.tubemq_hand_decode(wire)[7] == -3


def test_tubemq_fields_in_any_order() -> None:
    client_id, topic, partition, data, flag, check_sum, sent_addr, msg_type, msg_time = (
        fp.TUBEMQ_SEND)
    fields = [fp.pb_bytes_field(1, client_id.encode()), fp.pb_bytes_field(2, topic.encode()),
              fp.pb_int_field(3, partition), fp.pb_bytes_field(4, data),
              fp.pb_int_field(5, flag), fp.pb_int_field(6, check_sum),
              fp.pb_int_field(7, sent_addr), fp.pb_bytes_field(9, msg_time.encode())]
    request = b"".join(reversed(fields))  # and msgType unset
    frame = tubemq.Frame(serial_no=5, content=tubemq.RpcContent(
        conn_header=rpc.RpcConnHeader(flag=0),
        request=tubemq.RpcRequest(header=rpc.RequestHeader(serviceType=3, protocolVer=3),
                                  body=rpc.RequestBody(method=13, timeout=3000,
                                                       request=request)))).encode()
    assert fp.tubemq_hand_decode(frame) == fp.tubemq_ours_decode(frame)
    assert fp.tubemq_hand_decode(frame)[5:] == (*fp.TUBEMQ_SEND[:7], "", msg_time)
