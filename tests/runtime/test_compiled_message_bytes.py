"""Bytes sized by a field of a message decoded just before them (``message_bytes``), against the
Python methods.

Pulsar's ``BatchEntry`` is the case: its data is as long as its own metadata's
``payload_size`` says, and a ``Batch`` is a run of entries to the end. Both are on the
compiled codec since issue #21. As in ``test_compiled_frame_ops.py``, the two codecs must
agree: the same bytes, the same values and the same errors, on random batches, every
truncation, random damage, sizes that are negative or past their region, and odd values; and
the Python encoder's first step, putting the data's length into ``payload_size``, must leave
the same message behind in both.
"""

from __future__ import annotations

import gc
import struct
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar import frames as pulsar
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    check_random_damage,
    check_truncations,
    outcome,
    same,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled
from tests.support.varints import varint

pytestmark = needs_framecodec


def _same_decodes(cls: Any, data: bytes) -> str:
    kind = same(lambda: cls.decode(data))[0]
    same(lambda: cls.decode_from(data, 0, len(data)))
    if len(data) > 2:
        same(lambda: cls.decode_from(data, 1, len(data) - 1))
    return kind


def _same_encodes(make: Callable[[], Any]) -> str:
    """Encode a fresh value from ``make`` with each codec: the same outcome, and the same
    value left behind (the encoder sets each entry's ``payload_size``)."""
    fast_value = make()
    fast = outcome(fast_value.encode)
    with compiled.pure_python():
        python_value = make()
        python = outcome(python_value.encode)
        after = outcome(lambda: repr(python_value))
    assert fast == python
    assert outcome(lambda: repr(fast_value)) == after
    return fast[0]


def _entry(data: bytes, size: int | None = None, **metadata: Any) -> pulsar.BatchEntry:
    return pulsar.BatchEntry(metadata=pb.SingleMessageMetadata(
        payload_size=len(data) if size is None else size, **metadata), data=data)


def _wire_entry(metadata: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(metadata)) + metadata + data


def _size_field(v: int) -> bytes:
    return b"\x18" + varint(v)  # payload_size is field 3, a varint


# --- what is compiled ---------------------------------------------------------------------------


def test_a_batch_and_its_entries_are_compiled() -> None:
    assert compiled.is_compiled(pulsar.BatchEntry)
    assert compiled.is_compiled(pulsar.Batch)


# --- random values ------------------------------------------------------------------------------

_metadata = st.fixed_dictionaries({}, optional={
    "properties": st.lists(st.builds(pb.KeyValue, key=st.text(max_size=5),
                                     value=st.text(max_size=5)), max_size=3),
    "partition_key": st.text(max_size=8),
    "event_time": st.integers(0, 2**64 - 1),
    "sequence_id": st.integers(0, 2**64 - 1),
    "null_value": st.booleans(),
})


@settings(max_examples=scaled(150), deadline=None)
@given(entries=st.lists(st.tuples(st.binary(max_size=60), _metadata,
                                  st.integers(-2**31, 2**31 - 1) | st.none()), max_size=6))
def test_random_batches_round_trip_the_same_with_both_codecs(
        entries: list[tuple[bytes, dict[str, Any], int | None]]) -> None:
    def make() -> pulsar.Batch:
        # A payload_size that is wrong before encoding: the encoder puts the length in.
        return pulsar.Batch(entries=[_entry(d, size, **md) for d, md, size in entries])

    assert _same_encodes(make) == "value"
    wire = make().encode()
    assert _same_decodes(pulsar.Batch, wire) == "value"
    decoded = pulsar.Batch.decode(wire)
    assert [e.data for e in decoded.entries] == [d for d, _, _ in entries]
    assert all(e.metadata.payload_size == len(e.data) for e in decoded.entries)
    for entry_wire, entry in zip(_entry_wires(wire), decoded.entries, strict=True):
        assert _same_decodes(pulsar.BatchEntry, entry_wire) == "value"
        assert pulsar.BatchEntry.decode(entry_wire) == entry


def _entry_wires(batch: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(batch):
        entry, end = pulsar.BatchEntry.decode_from(batch, pos, len(batch))
        out.append(batch[pos:end])
        pos = end
    return out


# --- damaged input ------------------------------------------------------------------------------


def _samples() -> list[tuple[Any, bytes]]:
    entries = [_entry(b"abc", properties=[pb.KeyValue(key="k", value="v")]), _entry(b""),
               _entry(b"\x00" * 20, partition_key="p", sequence_id=2**40)]
    batch = pulsar.Batch(entries=entries).encode()
    return [(pulsar.Batch, batch), (pulsar.BatchEntry, entries[0].encode()),
            (pulsar.BatchEntry, entries[2].encode())]


def test_every_truncation_gives_the_same_outcome() -> None:
    check_truncations(_samples(), _same_decodes, trailers=(b"\x00", b"\x00\x00\x00\x00"))


def test_random_damage_gives_the_same_outcome() -> None:
    check_random_damage(_samples(), seed=21, rounds=scaled(400), decodes=_same_decodes)


@pytest.mark.parametrize("size", [0, 2, 3, 4, 5, -1, -2**31, 2**31 - 1, 2**32 + 3, 2**63,
                                  2**64 - 1])
def test_odd_payload_sizes_match(size: int) -> None:
    """Sizes that fit, fall short, run past the region, are negative (a 10-byte varint) or do
    not fit an int32 (the protobuf codec's to refuse)."""
    entry = _wire_entry(_size_field(size), b"data")
    assert _same_decodes(pulsar.BatchEntry, entry) in ("value", "raised")
    _same_decodes(pulsar.Batch, entry + _wire_entry(_size_field(0), b""))
    _same_decodes(pulsar.Batch, _wire_entry(_size_field(0), b"") + entry)


def test_sizes_and_metadata_past_their_region_match() -> None:
    cases = [
        _wire_entry(b"", b"x"),  # no payload_size: a required field missing
        _wire_entry(_size_field(1) + _size_field(3), b"abc"),  # the last value counts
        struct.pack(">I", 100) + _size_field(1) + b"a",  # metadata past the end
        struct.pack(">I", 1) + _size_field(1) + b"a",  # metadata size too small
        _wire_entry(_size_field(1) + b"\x22\x01", b"a"),  # a field cut inside the metadata
        _wire_entry(_size_field(1) + b"\x0a\x00", b"a"),  # a property without key and value
        _wire_entry(_size_field(1) + b"\xf8\x01\x05", b"a"),  # an unknown field
        b"\x00\x00\x00",  # a size cut short
    ]
    kinds = [_same_decodes(pulsar.BatchEntry, data) for data in cases]
    assert kinds.count("value") == 2, kinds
    for data in cases:
        _same_decodes(pulsar.Batch, data)


# --- odd values on encode -----------------------------------------------------------------------


class _Metadata(pb.SingleMessageMetadata):
    __slots__ = ()


class _Entry(pulsar.BatchEntry):
    __slots__ = ()


def test_odd_values_encode_as_the_python_codec_does() -> None:
    def entry(metadata: Any, data: Any) -> pulsar.BatchEntry:
        return pulsar.BatchEntry(metadata=metadata, data=data)

    def metadata(**fields: Any) -> pb.SingleMessageMetadata:
        return pb.SingleMessageMetadata(**fields)

    odd: list[Callable[[], Any]] = [
        lambda: entry(metadata(payload_size=9), bytearray(b"ab")),
        lambda: entry(metadata(payload_size=9), "ab"),
        lambda: entry(metadata(payload_size=9), None),
        lambda: entry(metadata(payload_size=9), 3),
        lambda: entry(None, b"x"),
        lambda: entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2),
                      b"x"),
        lambda: entry(_Metadata(payload_size=0), b"xy"),
        lambda: _Entry(metadata=metadata(payload_size=0), data=b"xy"),
        lambda: entry(metadata(payload_size=0, partition_key=b"not text"), b"xy"),
        lambda: entry(metadata(payload_size=0, event_time=-1), b"xy"),
        lambda: entry(metadata(payload_size="x"), b"xy"),
    ]
    for make in odd:
        _same_encodes(make)
        _same_encodes(lambda: pulsar.Batch(entries=[_entry(b"ok"), make()]))  # noqa: B023
        _same_encodes(lambda: pulsar.Batch(entries=[make(), _entry(b"ok")]))  # noqa: B023
    odd_lists: list[Any] = [(_entry(b"a"),), [_entry(b"a"), "x"], None, [None]]
    for entries in odd_lists:
        _same_encodes(lambda: pulsar.Batch(entries=entries))  # noqa: B023


def test_a_slot_left_empty_gives_the_python_codecs_error() -> None:
    for name in ("metadata", "data"):
        def make(name: str = name) -> pulsar.BatchEntry:
            entry = _entry(b"abc")
            delattr(entry, name)
            return entry

        _same_encodes(make)
        _same_encodes(lambda: pulsar.Batch(entries=[_entry(b"z"), make()]))  # noqa: B023

    def no_size() -> pulsar.BatchEntry:
        entry = _entry(b"abc")
        del entry.metadata.payload_size
        return entry

    assert _same_encodes(no_size) == "value"  # the encoder sets it before anything reads it


def test_the_bench_batches_agree() -> None:
    from bench.bench_frames import make_batch, struct_batch_decode

    for with_property in (False, True):
        data = make_batch(with_property)
        assert _same_decodes(pulsar.Batch, data) == "value"
        ours = [(tuple((kv.key, kv.value) for kv in e.metadata.properties),
                 e.metadata.payload_size, e.data) for e in pulsar.Batch.decode(data).entries]
        assert ours == struct_batch_decode(data)
        assert same(lambda: pulsar.Batch.decode(data).encode())[1] == repr(data)  # noqa: B023


# --- the table --------------------------------------------------------------------------------


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    cls = make_dataclass("Odd", [("meta", object), ("data", bytes)], slots=True)
    ops = vocabulary.OPS

    def codec(*rows: tuple[Any, ...]) -> object:
        return _framecodec.FrameCodec(cls, rows, False, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None)

    size = (ops["size"], None, 4, 2, 1, 0, None, None, None, None)
    proto = (ops["proto"], "meta", 0, 0, 0, 0, pb.SingleMessageMetadata, None, None, None)
    sized = (ops["message_bytes"], "data", 0, 0, 1, 0, "payload_size", None, None, None)
    codec(size, proto, sized)
    with pytest.raises(ValueError, match="earlier proto row"):
        codec((ops["message_bytes"], "data", 0, 0, 0, 0, "payload_size", None, None, None))
    with pytest.raises(ValueError, match="earlier proto row"):
        codec(size, proto, (*sized[:4], 0, *sized[5:]))  # a size row, not the message
    with pytest.raises(ValueError, match="earlier proto row"):
        codec(size, proto, (*sized[:6], 3, *sized[7:]))  # no slot name
    with pytest.raises(TypeError, match="not a slot"):
        codec(size, proto, (*sized[:6], "partition_key", *sized[7:]))  # a property


# --- resources ----------------------------------------------------------------------------------


def _python_calls(fn: Callable[[], Any]) -> list[str]:
    """The generated Python functions (frames and messages) that ``fn`` runs."""
    calls: list[str] = []
    paths = {pulsar.__file__, pb.__file__}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in paths:
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_well_formed_batches_stay_in_c() -> None:
    for cls, wire in _samples():
        value = cls.decode(wire)
        assert _python_calls(lambda: cls.decode(wire)) == []  # noqa: B023
        assert _python_calls(value.encode) == []
    # A give-up does run them: the check above would see it.
    assert _python_calls(lambda: outcome(lambda: pulsar.Batch.decode(b"\x00"))) != []


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks() -> None:
    samples = _samples()
    values = [(cls, wire, cls.decode(wire)) for cls, wire in samples]
    broken = [(cls, wire[:-1]) for cls, wire in samples]
    broken.append((pulsar.BatchEntry, _wire_entry(_size_field(-1), b"x")))

    def rounds(n: int) -> None:
        for _ in range(n):
            for cls, wire, value in values:
                value.encode()
                cls.decode(wire)
                cls.decode_from(wire, 0, len(wire))
            for cls, wire in broken:
                try:
                    cls.decode(wire)
                except Exception:  # noqa: BLE001, S110 - the give-up path is what runs
                    pass

    rounds(50)
    gc.collect()
    counts = [sys.getrefcount(wire) for _, wire, _ in values]
    before = sys.getallocatedblocks()
    rounds(500)
    gc.collect()
    assert [sys.getrefcount(wire) for _, wire, _ in values] == counts
    assert sys.getallocatedblocks() - before < 300  # one block a call would show 2,000+
