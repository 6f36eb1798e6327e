"""The Pulsar client's pieces in isolation: routing, batching, acks, names, ids, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.acks import (
    AckGroupingTracker,
    NegativeAckTracker,
    Position,
    ack_set_words,
    build_ack_commands,
)
from protoframe.clients.pulsar.auth import AuthenticationBasic, AuthenticationToken
from protoframe.clients.pulsar.batching import BatchBuilder, append_entry, split_batch
from protoframe.clients.pulsar.connection import split_url
from protoframe.clients.pulsar.lookup import TopicName
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.routing import (
    HashingScheme,
    RoundRobinRouter,
    SinglePartitionRouter,
    java_string_hash,
    murmur3_32,
    murmur3_32_hash,
    sign_safe_mod,
)
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Batch, BatchEntry, Payload
from protoframe.runtime.errors import ConnectionClosed, DecodeError, RequestFailed, RequestTimeout
from tests.support.paths import DATA

VECTORS = DATA / "pulsar_vectors"

# ---- routing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "seed", "expected"), [
    # The reference MurmurHash3_x86_32 test vectors (Appleby's SMHasher and common ports).
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"!Ce\x87", 0, 0xF55B516B),
    (b"!Ce\x87", 0x5082EDEE, 0x2362F9DE),
    (b"!Ce", 0, 0x7E4A8634),
    (b"!C", 0, 0xA0F7B07A),
    (b"!", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"a", 0, 0x3C2569B2),
    (b"abc", 0, 0xB3DD93FA),
    (b"abcd", 0, 0x43ED676A),
    (b"hello", 0, 0x248BFA47),
    (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
])
def test_murmur3_32_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_java_partition_choice() -> None:
    # Java: signSafeMod(Murmur3Hash32.makeHash(key), n), makeHash = murmur3_32(utf8) & MAX_INT.
    assert murmur3_32_hash("The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    assert murmur3_32_hash("abc") == 0xB3DD93FA & 0x7FFFFFFF
    assert murmur3_32_hash("é") == murmur3_32("é".encode()) & 0x7FFFFFFF
    router = RoundRobinRouter()
    for key in ["key-1", "abc", "hello", "", "ключ"]:
        expected = (murmur3_32(key.encode()) & 0x7FFFFFFF) % 7 if key else None
        if expected is not None:
            assert router.choose(key, 7) == expected
    # Java's String.hashCode (UTF-16 code units) for the JavaStringHash scheme.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("😀") == (31 * 0xD83D + 0xDE00) & 0x7FFFFFFF
    assert HashingScheme.JavaStringHash.hash_function()("hello") == 99162322
    # Java's signSafeMod: a non-negative remainder for negative ints too.
    assert sign_safe_mod(-7, 3) == 2 and sign_safe_mod(7, 3) == 1
    assert sign_safe_mod(0xFFFFFFFF, 5) == 4  # -1 as a Java int
    with pytest.raises(ValueError):
        sign_safe_mod(1, 0)


def test_round_robin_without_key_and_single_partition_router() -> None:
    router = RoundRobinRouter()
    assert [router.choose(None, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    single = SinglePartitionRouter(2)
    assert {single.choose(None, 4) for _ in range(10)} == {2}
    assert single.choose("abc", 4) == (0xB3DD93FA & 0x7FFFFFFF) % 4


# ---- batching ---------------------------------------------------------------------------------


def test_batch_builder_matches_the_generated_batch_codec() -> None:
    builder = BatchBuilder()
    builder.add(b"plain", 10)
    builder.add(b"with-props", 11, properties={"a": "1"}, partition_key="k",
                event_timestamp=1234)
    builder.add(b"", 12)
    builder.add(b"x" * 20000, 20000)  # multi-byte varints on the fast path
    decoded = Batch.decode(builder.payload())
    assert [e.data for e in decoded.entries] == [b"plain", b"with-props", b"", b"x" * 20000]
    assert [e.metadata.sequence_id for e in decoded.entries] == [10, 11, 12, 20000]
    assert decoded.entries[1].metadata.partition_key == "k"
    assert decoded.entries[1].metadata.event_time == 1234
    assert builder.count == 4 and builder.first_sequence_id == 10
    assert builder.last_sequence_id == 20000
    # The fast path writes what the generated encoder writes.
    for seq in [5, 20000, 1 << 30, 1 << 62]:
        parts: list[bytes] = []
        added = append_entry(parts, b"abc", seq)
        assert b"".join(parts) == Batch(entries=[BatchEntry(
            metadata=pb.SingleMessageMetadata(payload_size=3, sequence_id=seq),
            data=b"abc")]).encode()
        assert added == len(b"".join(parts))
    out: list[bytes] = []
    append_entry(out, b"abc", 5)
    assert b"".join(out) == Batch(entries=[BatchEntry(
        metadata=pb.SingleMessageMetadata(payload_size=3, sequence_id=5),
        data=b"abc")]).encode()
    split = split_batch(builder.payload(), 4)
    assert [d for d, _ in split] == [b"plain", b"with-props", b"", b"x" * 20000]
    assert split[0][1] is None and split[2][1] is None and split[3][1] is None
    meta = split[1][1]
    assert meta is not None and [(p.key, p.value) for p in meta.properties] == [("a", "1")]


def test_batch_builder_tracks_a_common_key() -> None:
    builder = BatchBuilder()
    builder.add(b"a", 0, partition_key="k")
    builder.add(b"b", 1, partition_key="k")
    assert builder.common_key() == "k"
    builder.add(b"c", 2, partition_key="other")
    assert builder.common_key() is None


def test_split_batch_reads_the_go_clients_batches() -> None:
    for name, count in [("go_rawBatchMessage1.bin", 1), ("go_rawBatchMessage10.bin", 10)]:
        payload = Payload.decode((VECTORS / name).read_bytes())
        assert payload.metadata.num_messages_in_batch == count
        entries = split_batch(payload.data, count)
        assert [d for d, _ in entries] == [b"hello"] * count
        for i, (_, meta) in enumerate(entries):
            assert meta is not None  # they carry properties and event times
            assert meta.sequence_id == i and meta.event_time == 5
            assert {p.key: p.value for p in meta.properties} == {"a": "1", "b": "2"}


def test_split_batch_rejects_malformed_batches() -> None:
    parts: list[bytes] = []
    append_entry(parts, b"hello", 1)
    out = b"".join(parts)
    with pytest.raises(DecodeError):
        split_batch(out[:-1], 1)
    with pytest.raises(DecodeError):
        split_batch(out, 2)
    with pytest.raises(DecodeError):
        split_batch(b"\x00\x00\x00\x09\x18", 1)


# ---- acknowledgements -------------------------------------------------------------------------


def test_ack_set_words_are_the_unacked_positions() -> None:
    assert ack_set_words(None, 3) == [0b111]
    flags = bytearray(3)
    flags[1] = 1
    assert ack_set_words(flags, 3) == [0b101]
    big = bytearray(70)
    assert ack_set_words(big, 70) == [-1, 0b111111]
    assert ack_set_words(bytearray(b"\x01" * 5), 5) == []


def test_ack_grouping_flushes_by_size_and_by_time() -> None:
    async def scenario() -> None:
        sent: list[tuple[list[Position], dict[Position, list[int]],
                         tuple[int, int, list[int]] | None]] = []
        tracker = AckGroupingTracker(lambda i, p, c: sent.append((i, p, c)), max_size=1000,
                                     max_delay=0.1)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for entry in range(2500):
            tracker.add(1, entry)
        assert [len(s[0]) for s in sent] == [1000, 1000]
        assert len(tracker) == 500
        await asyncio.sleep(0)
        assert len(sent) == 2  # the rest waits for the timer
        while len(sent) < 3 and loop.time() - start < 5:
            await asyncio.sleep(0.01)
        assert loop.time() - start >= 0.1
        assert len(sent) == 3 and len(sent[2][0]) == 500
        flags = bytearray(4)
        flags[0] = 1
        tracker.add_partial(1, 9000, flags, 4)
        flags[2] = 1  # a later ack of the same batch is seen at flush time
        tracker.add_cumulative(1, 5)
        tracker.add_cumulative(1, 3)  # lower: ignored
        tracker.flush()
        _, partial, cumulative = sent[-1]
        assert partial == {(1, 9000): [0b1010]}
        assert cumulative == (1, 5, [])
        assert tracker.is_duplicate(1, 4) and not tracker.is_duplicate(1, 6)
        tracker.flush()
        assert len(sent) == 4  # nothing more to send

    asyncio.run(scenario())


def test_ack_commands_group_ids_into_one_ack() -> None:
    commands = build_ack_commands(7, [(1, 1), (1, 2)], {(1, 3): [0b10]}, (1, 0, []))
    assert len(commands) == 2
    individual, cumulative = commands
    assert individual.ack_type is pb.CommandAck.AckType.Individual
    assert [(m.entryId, m.ack_set) for m in individual.message_id] == \
        [(1, []), (2, []), (3, [0b10])]
    assert cumulative.ack_type is pb.CommandAck.AckType.Cumulative
    assert cumulative.message_id[0].entryId == 0


def test_negative_acks_are_sent_after_the_delay() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        sent: list[tuple[float, list[Position]]] = []
        tracker = NegativeAckTracker(lambda p: sent.append((loop.time(), p)), delay=0.2)
        start = loop.time()
        tracker.add(1, 1)
        tracker.add(1, 2)
        tracker.add(1, 3)
        tracker.remove(1, 2)
        while not sent and loop.time() - start < 5:
            await asyncio.sleep(0.01)
        when, positions = sent[0]
        assert positions == [(1, 1), (1, 3)]
        assert when - start >= 0.2 - 0.07  # not before the delay (less the timer's slack)
        assert len(tracker) == 0
        tracker.add(1, 4)
        tracker.flush()  # at once
        assert sent[-1][1] == [(1, 4)]

    asyncio.run(scenario())


# ---- names, ids, errors, auth -----------------------------------------------------------------


def test_topic_names() -> None:
    assert str(TopicName.parse("t")) == "persistent://public/default/t"
    assert str(TopicName.parse("ten/ns/t")) == "persistent://ten/ns/t"
    full = TopicName.parse("non-persistent://a/b/c")
    assert not full.persistent and str(full.partition(3)) == "non-persistent://a/b/c-partition-3"
    assert full.partition(3).partition_index == 3 and full.partition_index == -1
    for bad in ["http://a/b/c", "a/b", "persistent://a//c"]:
        with pytest.raises(errors.InvalidTopicName):
            TopicName.parse(bad)
    assert split_url("pulsar://127.0.0.1:6650") == ("127.0.0.1", 6650, False)
    assert split_url("pulsar+ssl://broker.example") == ("broker.example", 6651, True)
    assert split_url("pulsar://[::1]:7000/") == ("::1", 7000, False)


def test_message_id_round_trips_and_orders() -> None:
    mid = MessageId(2, 10, 20, 3, 5)
    back = MessageId.deserialize(mid.serialize())
    assert back == mid and hash(back) == hash(mid)
    assert (back.partition(), back.ledger_id(), back.entry_id(), back.batch_index(),
            back.batch_size()) == (2, 10, 20, 3, 5)
    assert MessageId(-1, 1, 1) < MessageId(-1, 1, 2) < MessageId(-1, 2, 0)
    assert MessageId.earliest < mid < MessageId.latest
    assert MessageId.deserialize(MessageId.earliest.serialize()) == MessageId.earliest
    assert MessageId.deserialize(MessageId.latest.serialize()) == MessageId.latest


def test_server_errors_map_to_named_exceptions() -> None:
    assert isinstance(errors.from_server_error(pb.ServerError.TopicNotFound, "x"),
                      errors.TopicNotFound)
    exc = errors.from_server_error(pb.ServerError.AuthorizationError, "no")
    assert isinstance(exc, errors.AuthorizationError) and exc.code is \
        pb.ServerError.AuthorizationError and str(exc) == "no"
    assert isinstance(errors.from_server_error(999), errors.UnknownError)
    failed = RequestFailed("ERROR", pb.CommandError(request_id=1,
                                                    error=pb.ServerError.ConsumerBusy,
                                                    message="busy"))
    assert isinstance(errors.wrap_error(failed), errors.ConsumerBusy)
    assert isinstance(errors.wrap_error(RequestTimeout("slow")), errors.Timeout)
    assert isinstance(errors.wrap_error(ConnectionClosed("gone")), errors.ConnectError)
    plain = ValueError("x")
    assert errors.wrap_error(plain) is plain
    # Every ServerError code has a class of its own.
    for code in pb.ServerError:
        mapped = errors.from_server_error(code)
        assert mapped.code is code


def test_authentication_plugins() -> None:
    token = AuthenticationToken("abc.def")
    assert token.method_name == "token" and token.auth_data() == b"abc.def"
    rotating = iter(["one", "two"])
    dynamic = AuthenticationToken(lambda: next(rotating))
    assert dynamic.auth_data() == b"one" and dynamic.challenge(b"") == b"two"
    assert "abc" not in repr(token)
    basic = AuthenticationBasic("user", "pw")
    assert basic.method_name == "basic" and basic.auth_data() == b"user:pw"


# ---- lookup -----------------------------------------------------------------------------------


class _StubRequests:
    def __init__(self, broker: str, answers: dict[str, pb.CommandLookupTopicResponse],
                 asked: list[tuple[str, str, bool]], physical: str) -> None:
        self.broker = broker
        self.answers = answers
        self.asked = asked
        self.physical = physical

    async def lookup_topic(self, topic: str, *, authoritative: bool | None = None,
                           advertised_listener_name: str | None = None
                           ) -> pb.CommandLookupTopicResponse:
        self.asked.append((self.broker, self.physical, bool(authoritative)))
        return self.answers[self.broker]


class _StubConnection:
    def __init__(self, requests: _StubRequests) -> None:
        self.requests = requests


def _lookup(answers: dict[str, pb.CommandLookupTopicResponse], *, tls: bool = False,
            max_redirects: int = 20) -> tuple[Any, list[tuple[str, str, bool]]]:
    from protoframe.clients.pulsar.lookup import LookupService

    asked: list[tuple[str, str, bool]] = []

    async def connect(logical: str, physical: str) -> Any:
        return _StubConnection(_StubRequests(logical, answers, asked, physical))

    service = "pulsar+ssl://service:6651" if tls else "pulsar://service:6650"
    return LookupService(service, connect, use_tls=tls, max_redirects=max_redirects), asked


LookupType = pb.CommandLookupTopicResponse.LookupType


def _answer(kind: pb.CommandLookupTopicResponse.LookupType, url: str = "",
            **fields: Any) -> pb.CommandLookupTopicResponse:
    return pb.CommandLookupTopicResponse(request_id=0, response=kind,
                                         brokerServiceUrl=url or None, **fields)


def test_lookup_follows_redirects_with_the_authoritative_flag() -> None:
    service, asked = _lookup({
        "pulsar://service:6650": _answer(LookupType.Redirect, "pulsar://b1:6650"),
        "pulsar://b1:6650": _answer(LookupType.Redirect, "pulsar://b2:6650",
                                    authoritative=True),
        "pulsar://b2:6650": _answer(LookupType.Connect, "pulsar://b2:6650"),
    })
    address = asyncio.run(service.find_broker("persistent://a/b/c"))
    assert (address.logical, address.physical) == ("pulsar://b2:6650", "pulsar://b2:6650")
    assert asked == [("pulsar://service:6650", "pulsar://service:6650", False),
                     ("pulsar://b1:6650", "pulsar://b1:6650", False),
                     ("pulsar://b2:6650", "pulsar://b2:6650", True)]


def test_lookup_through_a_proxy_and_its_limits() -> None:
    proxied, asked = _lookup({
        "pulsar://service:6650": _answer(LookupType.Redirect, "pulsar://b1:6650",
                                         proxy_through_service_url=True),
        "pulsar://b1:6650": _answer(LookupType.Connect, "pulsar://b1:6650",
                                    proxy_through_service_url=True),
    })
    address = asyncio.run(proxied.find_broker("t"))
    assert (address.logical, address.physical) == ("pulsar://b1:6650", "pulsar://service:6650")
    assert asked[1][:2] == ("pulsar://b1:6650", "pulsar://service:6650")
    loop, _ = _lookup({"pulsar://service:6650": _answer(LookupType.Redirect,
                                                        "pulsar://service:6650")})
    with pytest.raises(errors.LookupError, match="more than 20 redirects"):
        asyncio.run(loop.find_broker("t"))
    failed, _ = _lookup({"pulsar://service:6650": _answer(
        LookupType.Failed, error=pb.ServerError.AuthorizationError, message="denied")})
    with pytest.raises(errors.AuthorizationError, match="denied"):
        asyncio.run(failed.find_broker("t"))
    # Over TLS, an answer without a TLS address is reached through the TLS service URL.
    tls, _ = _lookup({"pulsar+ssl://service:6651": _answer(LookupType.Connect,
                                                          "pulsar://b1:6650")}, tls=True)
    address = asyncio.run(tls.find_broker("t"))
    assert (address.logical, address.physical) == ("pulsar://b1:6650",
                                                   "pulsar+ssl://service:6651")
    both, _ = _lookup({"pulsar+ssl://service:6651": _answer(
        LookupType.Connect, "pulsar://b1:6650", brokerServiceUrlTls="pulsar+ssl://b1:6651")},
        tls=True)
    address = asyncio.run(both.find_broker("t"))
    assert address.physical == "pulsar+ssl://b1:6651"
