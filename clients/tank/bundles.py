"""Bundles and consume chunks, both ways, without any I/O.

A bundle is a flags byte (codec, a small message count, SPARSE), optional seq num fields and a
message set, Snappy-compressed as one raw block when the codec says so. The generated
``Bundle``/``MessageSet`` codecs lay the bytes out; this module makes the choices around them:

* writing: which per-message flags apply (HaveKey, UseLastSpecifiedTS when a timestamp repeats
  the previous one, SeqNumPrevPlusOne between consecutive seq nums of a sparse bundle), whether
  to compress (TANK's own rule: more than 512 messages or more than 1 KiB of keys and values),
  and the seq num fields of a sparse bundle;
* reading: cutting a consume chunk into bundles, stopping at a last bundle the fetch size cut
  short; decompressing; and giving every message its seq num (counted on from the partition's
  base seq num, or read from a sparse bundle) and its timestamp.

Everything that can go wrong with received bytes raises a ``runtime.errors.DecodeError``
subclass; ``MalformedBundleError`` is for bundles that parse but contradict themselves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import cramjam

from protoframe.generated.tank import frames
from protoframe.runtime.codec.compression import decompress
from protoframe.runtime.codec.protowire import read_varint
from protoframe.runtime.errors import DecodeError, DecompressionError

from .errors import InvalidMessageError
from .messages import ConsumedMessage, Message

__all__ = [
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "HAVE_KEY",
    "SEQ_NUM_PREV_PLUS_ONE",
    "USE_LAST_SPECIFIED_TS",
    "ChunkContents",
    "ChunkSplit",
    "MalformedBundleError",
    "build_bundle",
    "bundle_messages",
    "now_ms",
    "read_chunk",
    "seq_nums_of",
    "should_compress",
    "split_chunk",
]

HAVE_KEY = 1
USE_LAST_SPECIFIED_TS = 2
SEQ_NUM_PREV_PLUS_ONE = 4

CODEC_NONE = 0
CODEC_SNAPPY = 1

# TANK's C++ client compresses a bundle past either of these.
SNAPPY_MIN_MESSAGES = 512
SNAPPY_MIN_BYTES = 1024

MAX_KEY_LENGTH = 0xFF
MAX_SEQ_NUM = 2**64 - 1
# The broker clamps fetch sizes to 64 MiB, so no message set a consumer receives inflates past it.
DEFAULT_MAX_UNCOMPRESSED = 64 * 1024 * 1024
# A Snappy element of three bytes (a copy with a two-byte offset) makes at most 64 bytes, the
# best any element does; a block claiming more than 22 bytes out per byte in is lying.
_SNAPPY_MAX_RATIO = 22


class MalformedBundleError(DecodeError):
    """A bundle parsed but contradicts itself: an unknown codec, seq nums that go backwards,
    a timestamp reused before any was given, or no base seq num to count from."""


def now_ms() -> int:
    """The current time in milliseconds since the epoch, as TANK timestamps are."""
    return time.time_ns() // 1_000_000


# -- writing ----------------------------------------------------------------------------------


def should_compress(messages: Sequence[Message], compression: bool | None) -> bool:
    """True to compress: as asked, or when None by TANK's own size rule."""
    if compression is not None:
        return compression
    if len(messages) > SNAPPY_MIN_MESSAGES:
        return True
    size = 0
    for message in messages:
        size += len(message.value) + (len(message.key) if message.key is not None else 0)
        if size > SNAPPY_MIN_BYTES:
            return True
    return False


def build_bundle(messages: Sequence[Message], *, compression: bool | None = None,
                 sparse: bool = False, default_timestamp: int | None = None) -> frames.Bundle:
    """The bundle holding ``messages`` in order.

    ``sparse=True`` writes each message's ``seq_num`` into the bundle (they must increase);
    otherwise the broker numbers them. A message without a timestamp gets
    ``default_timestamp`` (the current time when None). Raises ``InvalidMessageError``.
    """
    count = len(messages)
    seq_nums = _checked_seq_nums(messages) if sparse else []
    stamp = now_ms() if default_timestamp is None else default_timestamp
    out: list[frames.Message] = []
    previous_ts: int | None = None
    for i, message in enumerate(messages):
        flags = 0
        key = message.key
        if key is not None:
            if len(key) > MAX_KEY_LENGTH:
                raise InvalidMessageError(f"message {i}: a key holds at most 255 bytes, "
                                          f"not {len(key)}")
            flags |= HAVE_KEY
        ts = stamp if message.timestamp is None else message.timestamp
        if not 0 <= ts <= MAX_SEQ_NUM:
            raise InvalidMessageError(f"message {i}: timestamp {ts} does not fit in a u64")
        timestamp: int | None = ts
        if ts == previous_ts:
            flags |= USE_LAST_SPECIFIED_TS
            timestamp = None
        previous_ts = ts
        seq_delta: int | None = None
        if sparse and 0 < i < count - 1:
            if seq_nums[i] == seq_nums[i - 1] + 1:
                flags |= SEQ_NUM_PREV_PLUS_ONE
            else:
                seq_delta = seq_nums[i] - seq_nums[i - 1] - 1
        out.append(frames.Message(flags=flags, seq_delta=seq_delta, timestamp=timestamp,
                                  key=key, content=message.value))
    first_seqnum = seq_nums[0] if sparse and count else None
    last_delta = seq_nums[-1] - seq_nums[0] - 1 if sparse and count > 1 else None
    message_set = frames.MessageSet(messages=out)
    if should_compress(messages, compression):
        raw = message_set.encode(count=count, sparse=sparse)
        return frames.Bundle(codec=CODEC_SNAPPY, sparse=sparse, msg_count=count,
                             first_seqnum=first_seqnum, last_seqnum_delta=last_delta,
                             compressed=bytes(cramjam.snappy.compress_raw(raw)))
    return frames.Bundle(codec=CODEC_NONE, sparse=sparse, msg_count=count,
                         first_seqnum=first_seqnum, last_seqnum_delta=last_delta,
                         messages=message_set)


def _checked_seq_nums(messages: Sequence[Message]) -> list[int]:
    seq_nums: list[int] = []
    for i, message in enumerate(messages):
        seq = message.seq_num
        if seq is None:
            raise InvalidMessageError(f"message {i}: produce_with_seqnum needs a seq_num")
        if not 1 <= seq <= MAX_SEQ_NUM or (seq_nums and seq <= seq_nums[-1]):
            raise InvalidMessageError(f"message {i}: seq num {seq} does not follow "
                                      f"{seq_nums[-1] if seq_nums else 0}")
        seq_nums.append(seq)
    return seq_nums


# -- reading ----------------------------------------------------------------------------------


def bundle_messages(bundle: frames.Bundle, *,
                    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED) -> list[frames.Message]:
    """The bundle's messages, decompressed first when its codec says so."""
    if bundle.codec == CODEC_NONE:
        assert bundle.messages is not None
        return bundle.messages.messages
    if bundle.codec != CODEC_SNAPPY:
        raise MalformedBundleError(f"bundle codec {bundle.codec} is not one TANK defines")
    data = bundle.compressed or b""
    try:
        size: int = cramjam.snappy.decompress_raw_len(data)
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"Snappy block: {exc}") from None
    if size > len(data) * _SNAPPY_MAX_RATIO:
        raise DecompressionError(f"Snappy block of {len(data)} bytes claims to hold {size}")
    raw = decompress("SNAPPY", data, size, max_size=max_uncompressed)
    return frames.MessageSet.decode(raw, count=bundle.msg_count, sparse=bundle.sparse).messages


def seq_nums_of(bundle: frames.Bundle, messages: Sequence[frames.Message],
                next_seq: int | None) -> list[int]:
    """Each message's seq num: read from a sparse bundle, else counted on from ``next_seq``."""
    count = len(messages)
    if not bundle.sparse:
        if next_seq is None:
            raise MalformedBundleError("a bundle that is not sparse has no seq num to count from")
        seq_nums = list(range(next_seq, next_seq + count))
    elif count == 0:
        seq_nums = []
    else:
        first = bundle.first_seqnum
        assert first is not None
        seq_nums = [first]
        previous = first
        for message in messages[1:-1]:
            if message.flags & SEQ_NUM_PREV_PLUS_ONE:
                previous += 1
            else:
                assert message.seq_delta is not None
                previous += message.seq_delta + 1
            seq_nums.append(previous)
        if count > 1:
            assert bundle.last_seqnum_delta is not None
            last = first + bundle.last_seqnum_delta + 1
            if last <= previous:
                raise MalformedBundleError(f"sparse bundle: last seq num {last} does not "
                                           f"follow {previous}")
            seq_nums.append(last)
    if seq_nums and seq_nums[-1] > MAX_SEQ_NUM:
        raise MalformedBundleError(f"seq num {seq_nums[-1]} does not fit in a u64")
    return seq_nums


@dataclass(slots=True)
class ChunkSplit:
    """A chunk cut into its whole bundles.

    ``tail`` counts the bytes after them: a last bundle the fetch size cut short. ``needed``
    is how many bytes from the start of that bundle would hold it whole, when its length
    prefix arrived.
    """

    bundles: list[frames.Bundle] = field(default_factory=list)
    tail: int = 0
    needed: int | None = None


def split_chunk(chunk: bytes) -> ChunkSplit:
    """Cut ``chunk`` (varint length, bundle; repeated) into bundles, stopping at a cut one."""
    out = ChunkSplit()
    pos, end = 0, len(chunk)
    while pos < end:
        start = pos
        try:
            length, pos = read_varint(chunk, pos)
        except IndexError:
            out.tail = end - start
            return out
        if pos + length > end:
            out.tail, out.needed = end - start, pos + length - start
            return out
        out.bundles.append(frames.Bundle.decode(chunk[pos:pos + length]))
        pos += length
    return out


@dataclass(slots=True)
class ChunkContents:
    """The messages of a chunk and where reading continues.

    ``next_seq_num`` follows the last whole bundle (None if the chunk held none and no base
    seq num was given); ``whole_bundles`` counts the bundles read, ``tail``/``needed`` are as
    in ``ChunkSplit``.
    """

    messages: list[ConsumedMessage]
    next_seq_num: int | None
    whole_bundles: int = 0
    tail: int = 0
    needed: int | None = None


def read_chunk(chunk: bytes, base_seqnum: int | None, *, from_seq_num: int = 0,
               max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED) -> ChunkContents:
    """Decode a consume chunk into messages with seq nums and timestamps.

    ``base_seqnum`` is the seq num of the chunk's first message (None when the broker said the
    first bundle is sparse). Messages before ``from_seq_num`` are dropped: the broker starts at
    the bundle holding it, which may begin earlier.
    """
    split = split_chunk(chunk)
    out: list[ConsumedMessage] = []
    next_seq = base_seqnum
    last_ts: int | None = None
    for bundle in split.bundles:
        messages = bundle_messages(bundle, max_uncompressed=max_uncompressed)
        seq_nums = seq_nums_of(bundle, messages, next_seq)
        if seq_nums and next_seq is not None and seq_nums[0] < next_seq:
            raise MalformedBundleError(f"bundle starts at seq num {seq_nums[0]}, before "
                                       f"{next_seq}")
        for seq, message in zip(seq_nums, messages, strict=True):
            if message.timestamp is not None:
                last_ts = message.timestamp
            elif last_ts is None:
                raise MalformedBundleError("a message reuses the timestamp before any was given")
            if seq >= from_seq_num:
                out.append(ConsumedMessage(seq_num=seq, timestamp=last_ts, key=message.key,
                                           value=message.content))
        if seq_nums:
            next_seq = seq_nums[-1] + 1
    return ChunkContents(out, next_seq, len(split.bundles), split.tail, split.needed)

