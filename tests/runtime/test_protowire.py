"""The varint primitives at every length, against the official runtime's encoder."""

from __future__ import annotations

import pytest
from google.protobuf.internal import encoder
from hypothesis import given
from hypothesis import strategies as st

from protoframe.runtime.codec.protowire import MASK64, read_varint, varint_bytes
from protoframe.runtime.errors import MalformedVarintError

# The largest value of each varint length, one more, and the bit patterns in between.
BOUNDARIES = sorted({v for n in range(1, 11) for v in ((1 << 7 * n) - 1, 1 << 7 * n)
                     if v <= MASK64} | {MASK64, 1_700_000_000_000})


def official(value: int) -> bytes:
    out: list[bytes] = []
    encoder._EncodeVarint(out.append, value)  # noqa: SLF001 (the reference encoder)
    return b"".join(out)


@pytest.mark.parametrize("value", BOUNDARIES)
def test_every_length_round_trips_as_the_official_runtime_writes_it(value: int) -> None:
    wire = official(value)
    assert varint_bytes(value) == wire
    framed = b"\xff" + wire + b"\x01"
    assert read_varint(framed, 1) == (value, 1 + len(wire))


@given(st.integers(min_value=0, max_value=MASK64))
def test_any_uint64(value: int) -> None:
    wire = official(value)
    assert varint_bytes(value) == wire
    assert read_varint(wire, 0) == (value, len(wire))


def test_tenth_byte_bits_beyond_64_are_dropped_as_upb_does() -> None:
    assert read_varint(b"\xff" * 9 + b"\x7f", 0) == (MASK64, 10)


def test_eleven_bytes_are_rejected_and_a_cut_varint_runs_off_the_end() -> None:
    with pytest.raises(MalformedVarintError, match="longer than 10 bytes at offset 3"):
        read_varint(b"abc" + b"\x80" * 10 + b"\x01", 3)
    for length in range(1, 10):
        with pytest.raises(IndexError):
            read_varint(b"\x80" * length, 0)


def test_small_varint_tables_hold_the_encodings_they_stand_for() -> None:
    """The tables are built by slicing one buffer (for import time); each entry must still be
    exactly the varint encoding of its index."""
    from protoframe.runtime.codec.protowire import _CONTINUED, SMALL_VARINTS

    assert len(SMALL_VARINTS) == len(_CONTINUED) == 1 << 14
    for i in range(1 << 14):
        low, high = i & 0x7F, i >> 7
        assert SMALL_VARINTS[i] == (bytes((i,)) if i < 128 else bytes((low | 0x80, high)))
        assert _CONTINUED[i] == bytes((low | 0x80, high | 0x80))
