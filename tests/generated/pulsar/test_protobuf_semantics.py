"""proto2 details of the generated Pulsar bindings, each checked against the official runtime."""

from __future__ import annotations

import pytest

from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandFlow,
    CommandSend,
    CommandSubscribe,
    KeyValue,
    MessageIdData,
    MessageMetadata,
    Schema,
)
from protoframe.runtime.errors import (
    DecodeError,
    InvalidUtf8Error,
    MalformedVarintError,
    MissingRequiredFieldError,
    RequiredFieldUnsetError,
    TruncatedError,
    ValueOutOfRangeError,
    WireTypeError,
)
from tests.support.official import official_module

PB = official_module("pulsar", "PulsarApi.proto")


def test_required_zero_values_are_on_the_wire() -> None:
    data = CommandFlow(consumer_id=0, messagePermits=0).encode()
    assert data == bytes.fromhex("08001000")
    theirs = PB.CommandFlow.FromString(data)
    assert theirs.HasField("consumer_id") and theirs.HasField("messagePermits")
    assert data == PB.CommandFlow(consumer_id=0, messagePermits=0).SerializeToString()


def test_optional_set_to_default_is_written_and_unset_is_not() -> None:
    unset = MessageIdData(ledgerId=1, entryId=2)
    explicit = MessageIdData(ledgerId=1, entryId=2, partition=-1, batch_size=0)
    assert unset.partition == -1 and not unset.has_partition()
    assert explicit.partition == -1 and explicit.has_partition()
    assert unset.encode() == bytes.fromhex("08011002")
    assert explicit.encode() == PB.MessageIdData(
        ledgerId=1, entryId=2, partition=-1, batch_size=0
    ).SerializeToString()
    assert unset != explicit  # presence is part of equality, as in the official runtime


def test_declared_defaults_read_back() -> None:
    sub = CommandSubscribe(topic="t", subscription="s", subType=CommandSubscribe.SubType.Shared,
                           consumer_id=0, request_id=0)
    assert sub.durable is True and not sub.has_durable()
    assert sub.initialPosition is CommandSubscribe.InitialPosition.Latest
    assert sub.force_topic_creation is True
    decoded = CommandSubscribe.decode(sub.encode())
    assert decoded.durable is True and not decoded.has_durable()
    sub.durable = False
    assert CommandSubscribe.decode(sub.encode()).durable is False
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    assert meta.num_messages_in_batch == 1
    assert meta.compression == 0
    meta.num_messages_in_batch = None
    assert not meta.has_num_messages_in_batch()


def test_assigning_none_unsets_a_field() -> None:
    msg = MessageIdData(ledgerId=1, entryId=2, partition=5)
    msg.partition = None
    assert not msg.has_partition() and msg.partition == -1
    assert msg.encode() == bytes.fromhex("08011002")


def test_required_field_unset_on_encode_names_message_and_field() -> None:
    msg = CommandFlow(consumer_id=1, messagePermits=2)
    msg.messagePermits = None  # type: ignore[assignment]
    with pytest.raises(RequiredFieldUnsetError, match=r"CommandFlow\.messagePermits"):
        msg.encode()


def test_required_field_missing_on_decode() -> None:
    with pytest.raises(MissingRequiredFieldError, match=r"CommandFlow\.messagePermits") as info:
        CommandFlow.decode(bytes.fromhex("0801"))
    assert info.value.message_name == "CommandFlow"
    assert info.value.field_name == "messagePermits"


def test_negative_int32_is_a_ten_byte_varint() -> None:
    data = MessageIdData(ledgerId=0, entryId=0, partition=-2).encode()
    assert data[4:] == bytes.fromhex("18feffffffffffffffff01")
    assert MessageIdData.decode(data).partition == -2


def test_unknown_fields_survive_a_round_trip() -> None:
    base = CommandFlow(consumer_id=3, messagePermits=4).encode()
    # Field 100 as varint, field 101 length-delimited, field 102 fixed32, field 103 fixed64.
    extra = bytes.fromhex("a006 2a" "aa0603616263" "b50601020304" "b9060102030405060708")
    decoded = CommandFlow.decode(base + extra)
    assert decoded.consumer_id == 3
    assert decoded.unknown_fields == extra
    assert decoded.encode() == base + extra
    theirs = PB.CommandFlow.FromString(base + extra)
    assert theirs.SerializeToString() == decoded.encode()


def test_unknown_enum_number_is_kept_not_crashed_on() -> None:
    # subType = 99 is not a SubType member: proto2 keeps it as an unknown field.
    ours = CommandSubscribe(topic="t", subscription="s", subType=CommandSubscribe.SubType.Shared,
                            consumer_id=1, request_id=2).encode()
    data = ours.replace(b"\x18\x01", b"\x18\x63", 1)
    theirs = PB.CommandSubscribe.FromString(data + b"\x18\x01")
    decoded = CommandSubscribe.decode(data + b"\x18\x01")
    assert decoded.subType is CommandSubscribe.SubType.Shared
    assert decoded.unknown_fields == b"\x18\x63"
    assert decoded.encode() == theirs.SerializeToString()
    # Required enum with only an unknown number present: the field is missing.
    with pytest.raises(MissingRequiredFieldError):
        CommandSubscribe.decode(data)


def test_enum_value_named_like_a_keyword_is_renamed() -> None:
    assert Schema.Type.None_.value == 0
    assert Schema.Type["None_"] is Schema.Type.None_
    assert BaseCommand.Type.SEND.value == 6


def test_repeated_fields_decode_packed_and_unpacked() -> None:
    unpacked = MessageIdData(ledgerId=1, entryId=2, ack_set=[1, -1, 300]).encode()
    assert unpacked == PB.MessageIdData(ledgerId=1, entryId=2, ack_set=[1, -1, 300]) \
        .SerializeToString()
    values = bytes.fromhex("01") + bytes.fromhex("ffffffffffffffffff01") + bytes.fromhex("ac02")
    packed = bytes.fromhex("08011002") + b"\x2a" + bytes([len(values)]) + values
    assert MessageIdData.decode(packed).ack_set == [1, -1, 300]
    assert list(PB.MessageIdData.FromString(packed).ack_set) == [1, -1, 300]


def test_nested_messages_and_envelope() -> None:
    cmd = BaseCommand(type_=BaseCommand.Type.SEND,
                      send=CommandSend(producer_id=0, sequence_id=8, num_messages=1))
    data = cmd.encode()
    theirs = PB.BaseCommand.FromString(data)
    assert theirs.type == PB.BaseCommand.SEND and theirs.send.sequence_id == 8
    back = BaseCommand.decode(data)
    assert back.send is not None and back.send.num_messages == 1
    assert back == cmd


def test_strings_are_utf8_validated() -> None:
    good = KeyValue(key="k", value="é").encode()
    bad = good.replace("é".encode(), b"\xff\xfe")
    with pytest.raises(InvalidUtf8Error, match=r"KeyValue\.value"):
        KeyValue.decode(bad)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (bytes.fromhex("08"), TruncatedError),  # tag without value
        (bytes.fromhex("0880"), TruncatedError),  # varint cut short
        (bytes.fromhex("0a05616263"), TruncatedError),  # length past the end
        (bytes.fromhex("08ffffffffffffffffffff01"), MalformedVarintError),  # 11-byte varint
        (bytes.fromhex("0f"), WireTypeError),  # wire type 7
        (bytes.fromhex("00"), WireTypeError),  # field number 0
    ],
)
def test_bad_input_raises_typed_errors(data: bytes, error: type[DecodeError]) -> None:
    with pytest.raises(error):
        CommandFlow.decode(data)


def test_out_of_range_values_are_refused_on_encode() -> None:
    with pytest.raises(ValueOutOfRangeError):
        MessageIdData(ledgerId=-1, entryId=0).encode()
    with pytest.raises(ValueOutOfRangeError):
        MessageIdData(ledgerId=0, entryId=0, partition=2**31).encode()
    with pytest.raises(ValueOutOfRangeError):
        MessageIdData(ledgerId=2**64, entryId=0).encode()


def test_decode_accepts_bytearray_and_memoryview() -> None:
    data = CommandFlow(consumer_id=1, messagePermits=1000).encode()
    assert CommandFlow.decode(bytearray(data)) == CommandFlow.decode(memoryview(data))


def test_repr_lists_set_fields() -> None:
    text = repr(MessageIdData(ledgerId=1, entryId=2, partition=0))
    assert text == "MessageIdData(ledgerId=1, entryId=2, partition=0)"


def test_messages_compare_by_class_and_every_field_and_are_unhashable() -> None:
    from protoframe.runtime.codec.protowire import Message

    a = KeyValue(key="k", value="v")
    assert isinstance(a, Message)
    assert a == KeyValue(key="k", value="v")
    assert a != KeyValue(key="k", value="w")
    assert a != ("k", "v")
    with_unknown = KeyValue.decode(a.encode() + bytes.fromhex("1801"))  # field 3 = 1
    assert with_unknown.unknown_fields == bytes.fromhex("1801")
    assert with_unknown != a
    with pytest.raises(TypeError):
        hash(a)
    assert not hasattr(a, "__dict__")
