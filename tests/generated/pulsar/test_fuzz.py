"""Fuzzing the Pulsar stream decoder: hostile bytes raise DecodeError subclasses and nothing else.

A seeded mutator damages a corpus of valid frames (bit flips, byte inserts and deletes,
truncations, corrupted size fields, splices) and feeds the results to ``StreamDecoder`` in
random chunks. Every case checks the properties listed in ``fuzzing.py`` (only
``DecodeError`` subclasses escape, never ``IndexError``, ``struct.error``,
``UnicodeDecodeError``, ``KeyError``, ``AttributeError``...; the buffer stays under
``max_frame_size``; a bad frame is skipped and draining makes progress; a bad header stops
the stream; each case finishes quickly), and here, for every frame that does decode: it
re-encodes to a frame that decodes to the same value, and its payload either decompresses
or raises a ``DecodeError``.

Runs are reproducible: each failure is reported with the case number and the input in hex.
"""

from __future__ import annotations

import enum
import inspect
import random
import struct
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
    StreamDecoder,
)
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    BrokerEntryMetadata,
    CommandMessage,
    CommandSend,
    CompressionType,
    KeyValue,
    MessageIdData,
    MessageMetadata,
    SingleMessageMetadata,
)
from protoframe.runtime.codec.checksums import crc32c
from protoframe.runtime.codec.compression import compress
from protoframe.runtime.codec.protowire import read_varint
from protoframe.runtime.errors import DecodeError
from tests.generated.fuzzing import Case, Failure, Mutator, StreamTarget, run_campaign, u32_field_op
from tests.support.paths import DATA

pytestmark = pytest.mark.slow  # a seeded fuzzing campaign of thousands of cases

VECTORS = DATA / "pulsar_vectors"
MAX_FRAME = 64 * 1024
SEED = 0x5EED_F00D
TARGET_CASES = 200_000
MIN_CASES = 20_000
TIME_BUDGET = 55.0  # seconds for the mutation run; the whole file stays under ~75 s
CASE_LIMIT = 2.0  # seconds one case may take before it counts as a hang
U32 = struct.Struct(">I")
Type = BaseCommand.Type


# --- a corpus of valid frames ----------------------------------------------------------------


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _fill(cls: type, rng: random.Random, depth: int, optional_rate: float) -> Any:
    """An instance of a generated message: required fields set, optional ones at random."""
    hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    kwargs: dict[str, Any] = {}
    for name, param in params.items():
        if name == "self":
            continue
        required = param.default is inspect.Parameter.empty
        if not required and (depth > 2 or rng.random() > optional_rate):
            continue
        hint = _strip_optional(hints[name])
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            kwargs[name] = [_value(item, rng, depth + 1, optional_rate)
                            for _ in range(rng.randint(0, 2))]
        else:
            kwargs[name] = _value(hint, rng, depth + 1, optional_rate)
    return cls(**kwargs)


def _value(tp: Any, rng: random.Random, depth: int, optional_rate: float) -> Any:
    if tp is bool:
        return rng.random() < 0.5
    if tp is int:
        return rng.choice([0, 1, 127, 128, 300, 2**31 - 1, rng.randrange(2**31)])
    if tp is float:
        return rng.choice([0.0, 1.5, -2.25])
    if tp is str:
        return rng.choice(["", "a", "persistent://public/default/t", "\u00e9\u4e2d\U0001f600"])
    if tp is bytes:
        return rng.randbytes(rng.randint(0, 8))
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return rng.choice(list(tp))
    assert isinstance(tp, type), tp
    return _fill(tp, rng, depth, optional_rate)


def _command_bodies() -> dict[BaseCommand.Type, tuple[str, type]]:
    """Type -> (BaseCommand attribute, body class), matched by field number."""
    hints = typing.get_type_hints(BaseCommand.__init__)
    by_number: dict[int, tuple[str, type]] = {}
    rng = random.Random(0)
    for name, hint in hints.items():
        if name in ("type_", "return"):
            continue
        cls = _strip_optional(hint)
        raw = BaseCommand(type_=Type.PING, **{name: _fill(cls, rng, 0, 0.0)}).encode()
        tag, _ = read_varint(raw, 2)
        by_number[tag >> 3] = (name, cls)
    return {t: by_number[t.value] for t in Type}


def _batch(rng: random.Random, count: int) -> bytes:
    entries = [
        BatchEntry(
            metadata=SingleMessageMetadata(
                payload_size=0,
                properties=[KeyValue(key="k", value=str(i))] if rng.random() < 0.5 else [],
                sequence_id=i,
            ),
            data=rng.randbytes(rng.randint(0, 40)),
        )
        for i in range(count)
    ]
    return Batch(entries=entries).encode()


def _message_frame(payload: Payload) -> Frame:
    return Frame(
        command=BaseCommand(type_=Type.MESSAGE, message=CommandMessage(
            consumer_id=3, message_id=MessageIdData(ledgerId=10, entryId=20))),
        payload=payload,
    )


def build_corpus() -> list[bytes]:
    rng = random.Random(SEED)
    corpus = [(VECTORS / name).read_bytes()
              for name in ("rs_payload_send.bin", "rs_simple_connect.bin")]
    broker = BrokerEntry.decode((VECTORS / "go_brokerEntryMeta.bin").read_bytes())
    for name in ("go_rawCompatSingleMessage.bin", "go_rawBatchMessage1.bin",
                 "go_rawBatchMessage10.bin"):
        payload = Payload.decode((VECTORS / name).read_bytes())
        corpus.append(_message_frame(payload).encode())
        payload.broker_entry = broker
        corpus.append(_message_frame(payload).encode())
    for command_type, (name, cls) in _command_bodies().items():
        for rate in (0.0, 0.6):
            body = _fill(cls, rng, 0, rate)
            corpus.append(Frame(command=BaseCommand(type_=command_type, **{name: body})).encode())
    for codec in CompressionType:
        raw = _batch(rng, rng.randint(1, 6))
        metadata = MessageMetadata(producer_name="fuzz", sequence_id=1, publish_time=2,
                                   compression=codec, uncompressed_size=len(raw),
                                   num_messages_in_batch=3,
                                   properties=[KeyValue(key="a", value="b")])
        payload = Payload(metadata=metadata, data=compress(codec.name, raw))
        send = BaseCommand(type_=Type.SEND, send=CommandSend(producer_id=1, sequence_id=2))
        corpus.append(Frame(command=send, payload=payload).encode())
        payload.broker_entry = BrokerEntry(metadata=BrokerEntryMetadata(broker_timestamp=1,
                                                                        index=2))
        corpus.append(_message_frame(payload).encode())
    # Frames close to the limit (one just under, one just over) and a few back to back.
    near = Payload(metadata=MessageMetadata(producer_name="big", sequence_id=0, publish_time=0),
                   data=bytes(MAX_FRAME - 200))
    corpus.append(_message_frame(near).encode())
    over = Payload(metadata=MessageMetadata(producer_name="big", sequence_id=0, publish_time=0),
                   data=bytes(MAX_FRAME))
    corpus.append(_message_frame(over).encode())
    corpus.append(b"".join(rng.sample(corpus[:40], 5)))
    return corpus


CORPUS = build_corpus()


# --- the mutator and the oracle -------------------------------------------------------------

_INTERESTING_U32 = [0, 1, 2, 3, 4, 5, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000,
                    MAX_FRAME - 4, MAX_FRAME - 3, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]


def _size_field_offsets(data: bytes) -> list[int]:
    """Where u32 size fields sit in a well-formed frame: total, command, metadata, broker."""
    offsets = [0, 4]
    for i in range(len(data) - 1):
        if data[i] == 0x0E and data[i + 1] == 0x01:
            offsets.append(i + 6)
        elif data[i] == 0x0E and data[i + 1] == 0x02:
            offsets.append(i + 2)
    return [o for o in offsets if o + 4 <= len(data)]


def _near_total_size(out: bytearray, rng: random.Random) -> None:
    """A total size off by a few bytes: the body decoders see a frame cut short or overlong."""
    if len(out) >= 4:
        U32.pack_into(out, 0, max(0, len(out) - 4 + rng.randint(-3, 3)))


def _fix_headers(out: bytearray) -> None:
    """Make total_size and the payload CRC agree with the damaged bytes again, so that the
    damage reaches the command, metadata and batch decoders instead of the first check."""
    if len(out) < 8:
        return
    U32.pack_into(out, 0, len(out) - 4)
    magic = 8 + U32.unpack_from(out, 4)[0]
    if magic + 6 <= len(out) and out[magic:magic + 2] == b"\x0e\x02":
        magic += 6 + U32.unpack_from(out, magic + 2)[0]
    if magic + 6 <= len(out) and out[magic:magic + 2] == b"\x0e\x01":
        U32.pack_into(out, magic + 2, crc32c(out[magic + 6:]))


mutate = Mutator(CORPUS, protocol_ops=(
    u32_field_op(U32, _INTERESTING_U32, _size_field_offsets, jitter=8), _near_total_size),
    fix_up=_fix_headers, fix_rate=0.4)


def check_frame(frame: Frame) -> None:
    """A decoded frame re-encodes consistently; its payload decompresses or fails cleanly."""
    # Compared as bytes: a mutated double field may hold NaN, which is not equal to itself.
    wire = frame.encode()
    again = Frame.decode(wire).encode()
    if again != wire:
        raise Failure(f"re-encoding changed the frame: {frame!r}: {wire.hex()} -> {again.hex()}")
    if frame.payload is not None:
        try:
            Batch.decode(frame.payload.decompressed_data(max_size=1 << 20))
        except DecodeError:
            pass


PULSAR = StreamTarget(StreamDecoder, Frame, check_frame, header_size=4, valid_frame=CORPUS[0],
                      max_frame=MAX_FRAME)
run_case = PULSAR.run_case


# --- tests -----------------------------------------------------------------------------------


def test_corpus_is_valid() -> None:
    assert len(CORPUS) > 150
    PULSAR.check_corpus(CORPUS)
    assert len(max(CORPUS, key=len)) > MAX_FRAME


def test_mutated_frames_raise_only_decode_errors() -> None:
    run_campaign(lambda rng, _: Case(mutate(rng.choice(CORPUS), rng), run_case), seed=SEED,
                 target=TARGET_CASES, minimum=MIN_CASES, budget=TIME_BUDGET,
                 case_limit=CASE_LIMIT, name="pulsar")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**32 - 1))
def test_arbitrary_bytes_raise_only_decode_errors(data: bytes, seed: int) -> None:
    run_case(data, random.Random(seed))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=300), command_size=st.integers(0, 310),
       seed=st.integers(0, 2**32 - 1))
def test_arbitrary_frame_bodies_raise_only_decode_errors(
    body: bytes, command_size: int, seed: int
) -> None:
    """Random bytes behind consistent headers reach the command and payload decoders."""
    data = U32.pack(4 + len(body)) + U32.pack(command_size) + body
    run_case(data, random.Random(seed))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.binary(max_size=120), metadata=st.binary(max_size=120),
       data=st.binary(max_size=60), seed=st.integers(0, 2**32 - 1))
def test_arbitrary_payload_metadata_raise_only_decode_errors(
    command: bytes, metadata: bytes, data: bytes, seed: int
) -> None:
    """A valid SEND command and a payload whose metadata is random bytes (with a good CRC)."""
    if seed % 2:
        command = BaseCommand(type_=Type.SEND,
                              send=CommandSend(producer_id=1, sequence_id=2)).encode()
    covered = U32.pack(len(metadata)) + metadata + data
    payload = b"\x0e\x01" + U32.pack(crc32c(covered)) + covered
    frame = U32.pack(8 + len(command) + len(payload) - 4) + U32.pack(len(command)) + command
    run_case(frame + payload, random.Random(seed))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_arbitrary_batches_raise_only_decode_errors(data: bytes) -> None:
    try:
        batch = Batch.decode(data)
    except DecodeError:
        return
    assert Batch.decode(batch.encode()) == batch


def test_small_limits_are_enforced() -> None:
    """The bound holds for any limit, including limits smaller than a frame header."""
    rng = random.Random(SEED + 1)
    for limit in (1, 3, 4, 5, 8, 64, 1000):
        for _ in range(300):
            run_case(mutate(rng.choice(CORPUS[:60]), rng), rng, max_frame=limit)
