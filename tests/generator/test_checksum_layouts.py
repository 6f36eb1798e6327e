"""Checksums by every encoding strategy the generator picks, against bytes packed by hand.

``tests/data/checksums`` declares four structs. ``Skipping``'s range starts after a field it does
not cover, and ``Patched`` also has a size of the rest to fill in: both take the placeholder
that is patched at the end. ``Covered`` and ``CoveredTail`` have a range starting at the next
field and nothing else to patch, so their covered fields are encoded first and summed before
they are written; ``CoveredTail``'s trailing bytes are summed where they lie (the sum continues
over them) and never copied into the covered buffer.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.errors import ChecksumMismatchError
from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated

PACKAGE = "sums_pkg"


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp: Path = tmp_path_factory.mktemp("checksums")
    generate_package(tmp, "checksums", PACKAGE)
    return import_generated(tmp, "checksums.frames", PACKAGE)


def by_hand(tag: int, body: bytes, n: int, text: str, kind: int, head: bytes,
            data: bytes) -> bytes:
    """The frame's bytes, packed with struct and summed with zlib and the crc32c package."""
    covered_a = struct.pack(">H", len(body)) + body
    a = struct.pack(">IH", zlib.crc32(covered_a), tag) + covered_a
    raw_text = text.encode()
    covered_b = struct.pack(">BB", n, len(raw_text)) + raw_text
    b = struct.pack(">I", crc32c.crc32c(covered_b)) + covered_b
    if kind == 1:
        covered_c = struct.pack(">B", len(head)) + head + data
        c = struct.pack(">I", zlib.crc32(covered_c)) + covered_c
    else:
        covered_c = struct.pack(">I", len(data)) + data
        c = struct.pack(">I", crc32c.crc32c(covered_c)) + covered_c
    rest = a + b + struct.pack(">B", kind) + c
    return struct.pack(">I", len(rest)) + rest


def build(frames: Any, tag: int, body: bytes, n: int, text: str, kind: int, head: bytes,
          data: bytes) -> Any:
    last = (frames.CoveredTail(head=head, data=data) if kind == 1
            else frames.Patched(data=data))
    return frames.Frame(a=frames.Skipping(tag=tag, body=body),
                        b=frames.Covered(n=n, text=text), body=last)


VALUES: dict[str, Any] = dict(tag=0xBEEF, body=b"skipped-range", n=7, text="héllo", head=b"hd",
              data=b"x" * 300)


@pytest.mark.parametrize("kind", [1, 2])
def test_each_strategy_writes_the_sum_the_reference_libraries_compute(frames: Any,
                                                                      kind: int) -> None:
    frame = build(frames, kind=kind, **VALUES)
    wire = frame.encode()
    assert wire == by_hand(kind=kind, **VALUES)
    assert frames.Frame.decode(wire) == frame


@given(tag=st.integers(0, 0xFFFF), body=st.binary(max_size=300), n=st.integers(0, 255),
       text=st.text(max_size=60).filter(lambda t: len(t.encode()) < 256),
       kind=st.sampled_from([1, 2]), head=st.binary(max_size=255),
       data=st.binary(max_size=2000))
@settings(max_examples=scaled(150), deadline=None)
def test_round_trip_against_bytes_packed_by_hand(frames: Any, tag: int, body: bytes, n: int,
                                                 text: str, kind: int, head: bytes,
                                                 data: bytes) -> None:
    frame = build(frames, tag, body, n, text, kind, head, data)
    wire = frame.encode()
    assert wire == by_hand(tag, body, n, text, kind, head, data)
    assert frames.Frame.decode(wire) == frame


@pytest.mark.parametrize("kind", [1, 2])
def test_a_flipped_byte_in_any_covered_range_fails_its_checksum(frames: Any, kind: int) -> None:
    wire = build(frames, kind=kind, **VALUES).encode()
    a_start = 4
    a_covered = a_start + 6  # after Skipping's sum and tag
    b_covered = a_covered + 2 + len(VALUES["body"]) + 4  # after Covered's sum
    c_covered = b_covered + 2 + len(VALUES["text"].encode()) + 1 + 4  # after kind and sum
    for where in (a_covered + 3, b_covered, c_covered + 1, len(wire) - 1):
        bad = bytearray(wire)
        bad[where] ^= 0x40
        with pytest.raises(ChecksumMismatchError):
            frames.Frame.decode(bytes(bad))
