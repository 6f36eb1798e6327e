"""The TANK client's sans-IO parts: bundles, chunks and responses, without a socket.

Round trips go through the generated codecs and the client's own choices (flags, sparse seq
nums, compression); malformed input must raise ``runtime.errors.DecodeError`` subclasses (or
the client's typed errors for what the broker reports).
"""

from __future__ import annotations

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.clients.tank.bundles import (
    HAVE_KEY,
    SEQ_NUM_PREV_PLUS_ONE,
    USE_LAST_SPECIFIED_TS,
    MalformedBundleError,
    build_bundle,
    bundle_messages,
    read_chunk,
    should_compress,
    split_chunk,
)
from protoframe.clients.tank.errors import (
    BoundaryCheckError,
    InvalidMessageError,
    InvalidSeqNumError,
    NoLeaderError,
    OtherLeaderError,
    UnknownPartitionError,
    UnknownTopicError,
)
from protoframe.clients.tank.messages import ConsumedMessage, Message
from protoframe.clients.tank.responses import (
    MalformedResponseError,
    consume_outcomes,
    produce_outcomes,
    read_partition,
)
from protoframe.generated.tank import frames
from protoframe.runtime.codec.protowire import varint_bytes
from protoframe.runtime.errors import DecodeError, DecompressionError
from tests.support.examples import scaled


def entry(bundle: frames.Bundle) -> bytes:
    data = bundle.encode()
    return varint_bytes(len(data)) + data


# -- writing ----------------------------------------------------------------------------------


def test_flags_follow_keys_and_repeated_timestamps() -> None:
    bundle = build_bundle([Message(b"a", key=b"k", timestamp=5), Message(b"b", timestamp=5),
                           Message(b"c", timestamp=6), Message(b"d", key=b"", timestamp=6)],
                          compression=False)
    assert bundle.messages is not None
    flags = [m.flags for m in bundle.messages.messages]
    assert flags == [HAVE_KEY, USE_LAST_SPECIFIED_TS, 0, HAVE_KEY | USE_LAST_SPECIFIED_TS]


def test_default_timestamp_is_filled_in() -> None:
    bundle = build_bundle([Message(b"a"), Message(b"b")], default_timestamp=77,
                          compression=False)
    assert bundle.messages is not None
    assert [m.timestamp for m in bundle.messages.messages] == [77, None]


def test_sparse_bundle_marks_consecutive_seq_nums() -> None:
    bundle = build_bundle([Message(b"", timestamp=1, seq_num=s) for s in (5, 6, 9, 10, 11)],
                          sparse=True, compression=False)
    assert bundle.sparse and bundle.first_seqnum == 5 and bundle.last_seqnum_delta == 5
    assert bundle.messages is not None
    inner = bundle.messages.messages[1:-1]
    assert [bool(m.flags & SEQ_NUM_PREV_PLUS_ONE) for m in inner] == [True, False, True]
    assert [m.seq_delta for m in inner] == [None, 2, None]


def test_invalid_messages() -> None:
    with pytest.raises(InvalidMessageError):
        build_bundle([Message(b"", key=b"k" * 256, timestamp=1)])
    with pytest.raises(InvalidMessageError):
        build_bundle([Message(b"", timestamp=-1)])
    with pytest.raises(InvalidMessageError):  # a sparse bundle needs every seq num
        build_bundle([Message(b"", timestamp=1)], sparse=True)
    with pytest.raises(InvalidMessageError):  # ... increasing
        build_bundle([Message(b"", timestamp=1, seq_num=3), Message(b"", timestamp=1, seq_num=3)],
                     sparse=True)
    with pytest.raises(InvalidMessageError):  # 0 means "first available" to consumers
        build_bundle([Message(b"", timestamp=1, seq_num=0)], sparse=True)


def test_compression_rule() -> None:
    small = [Message(b"x" * 10)] * 3
    assert not should_compress(small, None)
    assert should_compress(small, True)
    assert should_compress([Message(b"x" * 600, key=b"k" * 200)] * 2, None)  # > 1 KiB
    assert should_compress([Message(b"")] * 513, None)  # > 512 messages
    assert not should_compress([Message(b"")] * 513, False)
    assert build_bundle([Message(b"x" * 2000, timestamp=1)]).codec == 1


# -- reading ----------------------------------------------------------------------------------


def test_seq_nums_continue_across_bundles_and_sparse_ones() -> None:
    plain = build_bundle([Message(b"a", timestamp=1), Message(b"b", timestamp=1)],
                         compression=False)
    sparse = build_bundle([Message(b"c", timestamp=2, seq_num=50),
                           Message(b"d", timestamp=2, seq_num=60)], sparse=True,
                          compression=True)
    after = build_bundle([Message(b"e", timestamp=3)], compression=False)
    contents = read_chunk(entry(plain) + entry(sparse) + entry(after), 10)
    assert [(m.seq_num, m.value) for m in contents.messages] == [
        (10, b"a"), (11, b"b"), (50, b"c"), (60, b"d"), (61, b"e")]
    assert contents.next_seq_num == 62 and contents.whole_bundles == 3 and contents.tail == 0


def test_messages_before_the_requested_seq_num_are_dropped() -> None:
    bundle = build_bundle([Message(bytes([i]), timestamp=1) for i in range(5)],
                          compression=False)
    contents = read_chunk(entry(bundle), 20, from_seq_num=23)
    assert [m.seq_num for m in contents.messages] == [23, 24]
    assert contents.next_seq_num == 25


def test_a_cut_last_bundle_is_left_for_the_next_consume() -> None:
    one = entry(build_bundle([Message(b"a" * 30, timestamp=1)], compression=False))
    two = entry(build_bundle([Message(b"b" * 300, timestamp=1)], compression=False))
    for cut in range(len(two)):
        contents = read_chunk(one + two[:cut], 1)
        assert [m.value for m in contents.messages] == [b"a" * 30]
        assert contents.next_seq_num == 2
        assert contents.tail == cut
        if cut >= 2:  # the two-byte length prefix arrived
            assert contents.needed == len(two)
    nothing = read_chunk(two[:10], 7)
    assert nothing.messages == [] and nothing.whole_bundles == 0 and nothing.next_seq_num == 7


def test_a_first_sparse_bundle_needs_no_base() -> None:
    sparse = build_bundle([Message(b"x", timestamp=1, seq_num=9)], sparse=True)
    assert read_chunk(entry(sparse), None).messages == [ConsumedMessage(9, 1, None, b"x")]
    plain = build_bundle([Message(b"x", timestamp=1)], compression=False)
    with pytest.raises(MalformedBundleError):
        read_chunk(entry(plain), None)


def test_malformed_bundles_raise_decode_errors() -> None:
    reused = frames.Bundle(codec=0, sparse=False, msg_count=1, messages=frames.MessageSet(
        messages=[frames.Message(flags=USE_LAST_SPECIFIED_TS, content=b"")]))
    with pytest.raises(MalformedBundleError):
        read_chunk(entry(reused), 1)
    backwards = frames.Bundle(codec=0, sparse=True, msg_count=3, first_seqnum=10,
                              last_seqnum_delta=0, messages=frames.MessageSet(messages=[
                                  frames.Message(flags=0, timestamp=1, content=b""),
                                  frames.Message(flags=2, seq_delta=5, content=b""),
                                  frames.Message(flags=2, content=b"")]))
    with pytest.raises(MalformedBundleError):
        read_chunk(entry(backwards), None)
    with pytest.raises(MalformedBundleError):  # codec 2 is not TANK's
        bundle_messages(frames.Bundle(codec=2, sparse=False, msg_count=1, compressed=b"x"))
    with pytest.raises(DecompressionError):
        bundle_messages(frames.Bundle(codec=1, sparse=False, msg_count=1, compressed=b"\xff"))
    # A Snappy block claiming far more than it could hold is refused before it is inflated.
    bomb = varint_bytes(1 << 30) + b"\x00"
    with pytest.raises(DecompressionError):
        bundle_messages(frames.Bundle(codec=1, sparse=False, msg_count=1, compressed=bomb))
    # Good Snappy, but the message set inside is short of the count.
    short = bytes(cramjam.snappy.compress_raw(b"\x00"))
    with pytest.raises(DecodeError):
        bundle_messages(frames.Bundle(codec=1, sparse=False, msg_count=2, compressed=short))
    with pytest.raises(DecodeError):
        split_chunk(varint_bytes(2) + b"\x04\x00")  # a whole entry whose bundle is truncated


# -- responses --------------------------------------------------------------------------------


def _topic(name: str, *partitions: int) -> frames.ProduceTopic:
    bundle = build_bundle([Message(b"", timestamp=1)])
    return frames.ProduceTopic(name=name, partitions=[
        frames.ProducePartition(partition=p, bundle=bundle) for p in partitions])


def test_produce_statuses_regroup_by_topic() -> None:
    request = [_topic("a", 0, 1), _topic("gone", 0, 1, 2), _topic("b", 4, 5)]
    statuses = [frames.ProduceStatus(error=e) for e in (0, 1, 0xFF, 10)] + [
        frames.ProduceStatus(error=0xFC, leader_addr=0x0100007F, leader_port=9)]
    errors = produce_outcomes(request, frames.ProduceResponse(request_id=1, statuses=statuses))
    assert [type(e) for e in errors] == [UnknownPartitionError, UnknownTopicError,
                                         InvalidSeqNumError, OtherLeaderError]
    assert (errors[0].topic, errors[0].partition) == ("a", 1)
    assert (errors[1].topic, errors[1].partition) == ("gone", None)
    leader = errors[3]
    assert isinstance(leader, OtherLeaderError)
    assert (leader.leader_host, leader.leader_port) == ("127.0.0.1", 9)
    with pytest.raises(MalformedResponseError):
        produce_outcomes(request, frames.ProduceResponse(request_id=1, statuses=statuses[:3]))
    with pytest.raises(MalformedResponseError):
        produce_outcomes(request, frames.ProduceResponse(request_id=1, statuses=statuses * 2))


def _response(*results: frames.ConsumePartitionResult, chunks: bytes = b"",
              unknown: str | None = None) -> frames.ConsumeResponse:
    topics = [frames.ConsumeTopicResult(name="t", partitions_cnt=len(results),
                                        partitions=list(results))]
    if unknown:
        topics.append(frames.ConsumeTopicResult(name=unknown, partitions_cnt=1, unknown=True))
    return frames.ConsumeResponse(request_id=1, topics=topics, chunks=chunks)


def test_consume_outcomes() -> None:
    one = entry(build_bundle([Message(b"1", timestamp=1)]))
    two = entry(build_bundle([Message(b"2", timestamp=2, seq_num=8)], sparse=True))
    response = _response(
        frames.ConsumePartitionResult(partition=0, error_or_flags=0, base_seqnum=3,
                                      highwater_mark=3, chunk_length=len(one)),
        frames.ConsumePartitionResult(partition=1, error_or_flags=0xFE, highwater_mark=8,
                                      chunk_length=len(two)),
        frames.ConsumePartitionResult(partition=2, error_or_flags=1, base_seqnum=0,
                                      highwater_mark=9, chunk_length=0,
                                      first_available_seqnum=4),
        frames.ConsumePartitionResult(partition=3, error_or_flags=0xFD),
        chunks=one + two, unknown="u")
    outcomes, unknown = consume_outcomes(response)
    assert unknown == {"u"} and outcomes[("t", 1)].chunk == two
    contents, hw = read_partition(response, "t", 0, from_seq_num=0)
    assert contents.messages == [ConsumedMessage(3, 1, None, b"1")] and hw == 3
    contents, hw = read_partition(response, "t", 1, from_seq_num=0)
    assert contents.messages == [ConsumedMessage(8, 2, None, b"2")] and hw == 8
    with pytest.raises(BoundaryCheckError) as info:
        read_partition(response, "t", 2, from_seq_num=100)
    assert (info.value.first_available_seqnum, info.value.highwater_mark) == (4, 9)
    with pytest.raises(NoLeaderError):
        read_partition(response, "t", 3, from_seq_num=0)
    with pytest.raises(UnknownTopicError):
        read_partition(response, "u", 0, from_seq_num=0)
    with pytest.raises(MalformedResponseError):
        read_partition(response, "t", 9, from_seq_num=0)
    with pytest.raises(MalformedResponseError):  # chunk lengths overrun the chunks
        consume_outcomes(_response(frames.ConsumePartitionResult(
            partition=0, error_or_flags=0, base_seqnum=1, highwater_mark=1, chunk_length=5)))
    with pytest.raises(MalformedResponseError):  # chunk bytes nobody claims
        consume_outcomes(_response(chunks=b"x"))


# -- round trips ------------------------------------------------------------------------------

_messages = st.lists(st.builds(
    Message, value=st.binary(max_size=40), key=st.none() | st.binary(max_size=20),
    timestamp=st.sampled_from([0, 1, 1_700_000_000_000, 2**64 - 1])), min_size=1, max_size=25)


@settings(max_examples=scaled(150), deadline=None)
@given(batches=st.lists(st.tuples(_messages, st.booleans(), st.booleans(), st.integers(1, 50)),
                        min_size=1, max_size=4),
       base=st.integers(1, 1000), cut=st.integers(0, 200))
def test_bundles_round_trip_through_a_chunk(
    batches: list[tuple[list[Message], bool, bool, int]], base: int, cut: int
) -> None:
    chunk = b""
    expected: list[ConsumedMessage] = []
    next_seq = base
    boundaries = [0]
    for messages, compress, sparse, gap in batches:
        if sparse:
            seqs = [next_seq + gap + i * gap for i in range(len(messages))]
            messages = [Message(m.value, m.key, m.timestamp, s)
                        for m, s in zip(messages, seqs, strict=True)]
        else:
            seqs = list(range(next_seq, next_seq + len(messages)))
        chunk += entry(build_bundle(messages, compression=compress, sparse=sparse))
        boundaries.append(len(chunk))
        expected += [ConsumedMessage(s, m.timestamp or 0, m.key, m.value)
                     for s, m in zip(seqs, messages, strict=True)]
        next_seq = seqs[-1] + 1
    assert read_chunk(chunk, base).messages == expected
    # Cut anywhere: exactly the bundles that end before the cut come back.
    cut_at = max(0, len(chunk) - cut)
    contents = read_chunk(chunk[:cut_at], base)
    whole = max(i for i, b in enumerate(boundaries) if b <= cut_at)
    assert contents.whole_bundles == whole
    assert contents.messages == expected[:len(contents.messages)]
    assert contents.tail == cut_at - boundaries[whole]
