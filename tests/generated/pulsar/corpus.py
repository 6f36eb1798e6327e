"""The Pulsar fuzzing corpus and mutator, shared by the decoder's fuzzing campaign
(``test_fuzz``) and the compiled codec's differential tests (``tests/runtime``): valid frames of
every command, with and without payloads and batches, and a seeded mutator that damages them
where Pulsar's size fields and checksums sit.
"""

from __future__ import annotations

import enum
import inspect
import random
import struct
import types
import typing
from typing import Any

from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
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
from tests.generated.fuzzing import Mutator, u32_field_op
from tests.support.paths import DATA

VECTORS = DATA / "pulsar_vectors"
SEED = 0x5EED_F00D
MAX_FRAME = 64 * 1024
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
