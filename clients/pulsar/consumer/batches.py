"""Reading batched payloads into messages: pure functions of the bytes received.

``plain_batch`` is the receive hot path (measured by bench/bench_client.py, consume phase, and
bench/bench_spark_source.py through ``entry_messages``): a batch whose entries hold no
per-message metadata beyond payload size and sequence id is read straight into ``Message``s,
in one pass or, when all entries have the same layout, by a column check and one slice per
message (``uniform_layout``). Anything else goes to ``batching.split_batch``.
"""

from __future__ import annotations

from struct import Struct
from struct import error as struct_error

from protoframe.clients.pulsar.batching import split_batch
from protoframe.clients.pulsar.message import EntryInfo, Message, ReceivedEntry
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["entry_messages", "filter_batch", "plain_batch", "uniform_layout"]

_unpack_u32 = Struct(">I").unpack_from


def plain_batch(buf: bytes, count: int, info: EntryInfo) -> list[Message] | None:
    """The messages of a batched payload whose entries' metadata all hold ``payload_size``
    (below 16 KiB) and at most ``sequence_id`` after it (what producers write when messages
    have no key, properties or event time), read in one pass straight into ``Message``s; None
    for anything else, which ``split_batch`` then reads (and rejects, if it is malformed).

    Takes only entries that ``split_batch``'s fast path takes (which reads them the same way,
    with no per-message metadata), so the messages are the ones it would give; whatever this
    does not take (longer size varints included), ``split_batch`` still reads or rejects.
    """
    if count > 1:
        messages = _uniform_batch(buf, count, info)
        if messages is not None:
            return messages
    out: list[Message] = []
    append = out.append
    unpack = _unpack_u32
    pos = 0
    end = len(buf)
    index = 0
    try:
        while pos < end:
            mstart = pos + 4
            mend = mstart + unpack(buf, pos)[0]
            if mend > end or mend == mstart or buf[mstart] != 0x18:  # payload_size first
                return None
            size = buf[mstart + 1]
            if size < 0x80:
                p = mstart + 2
            else:
                high = buf[mstart + 2]
                if high >= 0x80:
                    return None
                size = (size & 0x7F) | (high << 7)
                p = mstart + 3
            if p != mend:
                # Only a sequence_id (field 8, varint) may follow, ending the metadata.
                if p > mend or buf[p] != 0x40:
                    return None
                q = p + 1
                while buf[q] >= 0x80:
                    q += 1
                if q + 1 != mend:
                    return None
            pos = mend + size
            if pos > end:
                return None
            append(Message(buf[mend:pos], index, info, None))
            index += 1
    except (IndexError, struct_error):
        return None
    if count >= 0 and index != count:
        return None
    return out


def _uniform_batch(buf: bytes, count: int, info: EntryInfo) -> list[Message] | None:
    """``plain_batch`` for a batch of fixed-size records (see ``uniform_layout``)."""
    layout = uniform_layout(buf, count)
    if layout is None:
        return None
    header, size, stride = layout
    return [Message(buf[o:o + size], i, info, None)
            for i, o in enumerate(range(header, header + len(buf), stride))]


def uniform_layout(buf: bytes, count: int) -> tuple[int, int, int] | None:
    """(header, payload size, stride) when a batched payload is ``count`` records that all have
    the same layout (payloads of one size, sequence ids of one varint length), checked a
    column at a time; None when it is not so regular.

    Record ``i``'s payload is then ``buf[header + i * stride:][:size]``, and it has no
    per-message metadata beyond ``payload_size`` and ``sequence_id``.

    Entries of the same size tile the buffer with a fixed stride, so ``buf[k::stride]`` is byte
    ``k`` of every entry. Every byte up to the sequence id's value (the size prefix, the
    ``payload_size`` field, the ``sequence_id`` tag) must be the same in every entry; the
    sequence id's bytes must all carry the continuation bit but the last, which must not.
    Then every entry is one that ``split_batch``'s fast path accepts.
    """
    end = len(buf)
    if end < 8:  # two entries hold at least 12 bytes
        return None
    msize = _unpack_u32(buf, 0)[0]
    mend = 4 + msize
    if mend > end or msize == 0 or buf[4] != 0x18:
        return None
    size = buf[5]
    if size < 0x80:
        p = 6
    else:
        high = buf[6]
        if high >= 0x80:
            return None
        size = (size & 0x7F) | (high << 7)
        p = 7
    stride = mend + size
    if stride * count != end:
        return None
    if p != mend:
        if p > mend or buf[p] != 0x40 or mend - p > 11:
            return None
        fixed = p + 1  # through the sequence_id tag
    else:
        fixed = p
    for k in range(fixed):
        if buf[k::stride].count(buf[k]) != count:
            return None
    if fixed != mend:
        last = mend - 1
        for k in range(fixed, last):
            if min(buf[k::stride]) < 0x80:
                return None
        if max(buf[last::stride]) >= 0x80:
            return None
    return mend, size, stride


def entry_messages(entry: ReceivedEntry) -> list[Message]:
    """The messages of an entry that ``Consumer.receive_entries`` delivered.

    Raises a ``DecodeError`` subclass when its batch does not split.
    """
    info = entry.info
    if not info.batch_size:
        return [Message(entry.data, -1, info, None)]
    messages = plain_batch(entry.data, info.batch_size, info)
    if messages is not None:
        return messages
    return [Message(d, i, info, s)
            for i, (d, s) in enumerate(split_batch(entry.data, info.batch_size))]


def filter_batch(entries: list[tuple[bytes, pb.SingleMessageMetadata | None]],
                 info: EntryInfo, ack_set: list[int], compacted: list[int]) -> list[Message]:
    """The messages of a batch still to deliver: those the ack set (what a subscription's
    partial acknowledgements left) marks unacknowledged, and, in a compacted batch, those
    compaction kept; the others are marked acknowledged in ``info``."""
    mask = -1
    if ack_set:
        mask = 0
        for i, word in enumerate(ack_set):
            mask |= (word & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
    keep = set(compacted) if compacted else None
    out: list[Message] = []
    acked = bytearray(info.batch_size)
    for i, (d, s) in enumerate(entries):
        if not (mask >> i) & 1 or (keep is not None and i not in keep) or \
                (s is not None and s.compacted_out):
            acked[i] = 1
            continue
        out.append(Message(d, i, info, s))
    info.acked = acked
    info.unacked = len(out)
    return out
