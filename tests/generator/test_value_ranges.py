"""``min:``, ``max:`` and ``nonzero:`` on integers and ``min_items:``/``max_items:`` on lists:
MQTT 3.1.1's SUBSCRIBE (a packet identifier that is never 0, at least one topic filter, each
with a requested QoS of at most 2), checked on decode (``ValueNotAllowedError``,
``ItemCountError``) and on encode (``ValueOutOfRangeError``, ``ItemCountOutOfRangeError``),
against bytes packed by hand with ``struct``; a hostile count stops at the limit."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.layout_ops import Array, IntType, RangedInt, ReadInt
from protoframe.runtime.codec import compiled, compiled_frames
from protoframe.runtime.errors import (
    DecodeError,
    ItemCountError,
    ItemCountOutOfRangeError,
    ValueNotAllowedError,
    ValueOutOfRangeError,
)
from tests.generator.test_layout_plan import plans
from tests.support.generate import generate_text
from tests.support.paths import ROOT

SPEC = """\
protocol: vr
doc: Value ranges and element counts.
byte_order: big
structs:
  Filter:
    doc: One topic filter of a SUBSCRIBE and its requested QoS.
    fields:
      - {name: topic, type: string, prefix: u16}
      - {name: qos, type: u8, max: 2}
  Subscribe:
    doc: MQTT 3.1.1's SUBSCRIBE after its fixed header.
    fields:
      - {name: packet_id, type: u16, nonzero: true}
      - {name: filters, type: array, of: Filter, until_end: true, min_items: 1}
  Bounded:
    doc: Signed and varint ranges, and a counted list with both bounds.
    fields:
      - {name: delta, type: i8, min: -5, max: 5}
      - {name: size, type: varint, min: 1, max: "0x4000"}
      - {name: letter, type: u8, min: "'a'", max: "'z'", nonzero: true}
      - {name: n, type: u32, count_of: ids}
      - {name: ids, type: array, of: u16, min_items: 1, max_items: 4}
      - {name: tail, type: array, of: u8, until_end: true, max_items: 3}
  Open:
    doc: Bounds that the types make anyway; the compiled codec takes it.
    fields:
      - {name: a, type: u8, min: 0, max: 255}
      - {name: b, type: u16}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {8: Subscribe, 1: Bounded, 2: Open}}
"""


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("value_ranges"), "vr", SPEC, "vr_pkg")


def frame(kind: int, body: bytes) -> bytes:
    return struct.pack(">IB", len(body) + 1, kind) + body


def subscribe(packet_id: int, filters: list[tuple[bytes, int]]) -> bytes:
    """SUBSCRIBE's variable header and payload as the MQTT 3.1.1 standard lays them out."""
    return struct.pack(">H", packet_id) + b"".join(
        struct.pack(">H", len(t)) + t + struct.pack(">B", q) for t, q in filters)


def bounded(delta: int, size: bytes, letter: int, ids: list[int], tail: bytes) -> bytes:
    return (struct.pack(">b", delta) + size + struct.pack(">BI", letter, len(ids))
            + struct.pack(f">{len(ids)}H", *ids) + tail)


def test_subscribe(frames: ModuleType) -> None:
    wire = frame(8, subscribe(10, [(b"a/b", 1), (b"c/#", 2)]))
    value = frames.Packet(body=frames.Subscribe(packet_id=10, filters=[
        frames.Filter(topic="a/b", qos=1), frames.Filter(topic="c/#", qos=2)]))
    assert value.encode() == wire
    assert frames.Packet.decode(wire) == value


@pytest.mark.parametrize(("body", "where", "value"), [
    (subscribe(0, [(b"a", 0)]), "Subscribe.packet_id", 0),
    (subscribe(1, [(b"a", 3)]), "Filter.qos", 3),
    (bounded(-6, b"\x01", 97, [1], b""), "Bounded.delta", -6),
    (bounded(6, b"\x01", 97, [1], b""), "Bounded.delta", 6),
    (bounded(0, b"\x00", 97, [1], b""), "Bounded.size", 0),
    (bounded(0, b"\x81\x80\x01", 97, [1], b""), "Bounded.size", 0x4001),
    (bounded(0, b"\x01", ord("A"), [1], b""), "Bounded.letter", ord("A")),
])
def test_a_value_out_of_range_is_not_allowed(frames: ModuleType, body: bytes, where: str,
                                             value: int) -> None:
    kind = 8 if where in ("Subscribe.packet_id", "Filter.qos") else 1
    with pytest.raises(ValueNotAllowedError, match=where) as info:
        frames.Packet.decode(frame(kind, body))
    assert (info.value.field, info.value.value) == (where, value)


def test_item_counts_on_decode(frames: ModuleType) -> None:
    with pytest.raises(ItemCountError, match="Subscribe.filters: 0 items, at least 1"):
        frames.Packet.decode(frame(8, subscribe(1, [])))
    with pytest.raises(ItemCountError, match="Bounded.ids: 0 items, 1 to 4 allowed"):
        frames.Packet.decode(frame(1, bounded(0, b"\x01", 97, [], b"")))
    with pytest.raises(ItemCountError, match="Bounded.tail: more than 3 items"):
        frames.Packet.decode(frame(1, bounded(0, b"\x01", 97, [1], b"\x01\x02\x03\x04")))
    ok = frames.Packet.decode(frame(1, bounded(0, b"\x01", 97, [1, 2, 3, 4], b"xyz")))
    assert (ok.body.ids, ok.body.tail) == ([1, 2, 3, 4], list(b"xyz"))


def test_a_hostile_count_stops_before_any_element(frames: ModuleType) -> None:
    """A count of 2**32 - 1 with no elements behind it is refused at once, not read."""
    body = struct.pack(">bBBI", 0, 1, 97, 0xFFFFFFFF)
    with pytest.raises(ItemCountError, match="Bounded.ids: 4294967295 items"):
        frames.Packet.decode(frame(1, body))


@pytest.mark.parametrize(("change", "error", "where"), [
    ({"packet_id": 0}, ValueOutOfRangeError, "Subscribe.packet_id = 0: it must not be 0"),
    ({"filters": []}, ItemCountOutOfRangeError, "Subscribe.filters has 0 items"),
    ({"delta": 9}, ValueOutOfRangeError, "Bounded.delta = 9: it must be -5 to 5"),
    ({"size": 0}, ValueOutOfRangeError, "Bounded.size = 0: it must be 1 to 16384"),
    ({"letter": 0}, ValueOutOfRangeError, "Bounded.letter = 0: it must be 97 to 122$"),
    ({"ids": [1] * 5}, ItemCountOutOfRangeError, "Bounded.ids has 5 items, 1 to 4 allowed"),
    ({"tail": [1] * 4}, ItemCountOutOfRangeError, "Bounded.tail has 4 items, at most 3"),
])
def test_encoding_refuses_what_decoding_would(frames: ModuleType, change: dict[str, object],
                                              error: type[Exception], where: str) -> None:
    values = {"packet_id": 1, "filters": [frames.Filter(topic="t", qos=0)]} \
        if "packet_id" in change or "filters" in change else \
        {"delta": 0, "size": 1, "letter": 97, "ids": [1], "tail": []}
    values.update(change)
    cls = frames.Subscribe if "packet_id" in values else frames.Bounded
    with pytest.raises(error, match=where):
        frames.Packet(body=cls(**values)).encode()
    assert issubclass(ItemCountOutOfRangeError, ValueOutOfRangeError)


@settings(max_examples=200, deadline=None)
@given(packet_id=st.integers(0, 65535), qos=st.lists(st.integers(0, 3), max_size=3))
def test_subscribe_round_trips_or_is_refused(frames: ModuleType, packet_id: int,
                                             qos: list[int]) -> None:
    value = frames.Packet(body=frames.Subscribe(packet_id=packet_id, filters=[
        frames.Filter(topic=f"t{i}", qos=q) for i, q in enumerate(qos)]))
    wire = frame(8, subscribe(packet_id, [(f"t{i}".encode(), q) for i, q in enumerate(qos)]))
    allowed = packet_id != 0 and bool(qos) and max(qos) <= 2
    if not allowed:
        with pytest.raises(ValueOutOfRangeError):
            value.encode()
        with pytest.raises(ItemCountError if packet_id and not qos else ValueNotAllowedError):
            frames.Packet.decode(wire)
        return
    assert value.encode() == wire
    assert frames.Packet.decode(wire) == value


def test_the_plan(tmp_path: Path) -> None:
    p = plans(tmp_path, SPEC.replace("protocol: vr", "protocol: mini\nproto: [mini.proto]"))
    assert p["Subscribe"].op("packet_id") == RangedInt(
        None, IntType(2, False, "big"), None, None, True)  # type: ignore[arg-type]
    delta = p["Bounded"].op("delta")
    assert isinstance(delta, RangedInt) and (delta.low, delta.high) == (-5, 5)
    letter = p["Bounded"].op("letter")
    assert isinstance(letter, RangedInt) and not letter.nonzero  # 97..122 leaves 0 out anyway
    ids = p["Bounded"].op("ids")
    assert isinstance(ids, Array) and (ids.min_items, ids.max_items) == (1, 4)
    assert isinstance(p["Open"].op("a"), ReadInt)  # min 0, max 255: nothing to check
    assert p["Open"].compiled and not p["Subscribe"].compiled and not p["Bounded"].compiled


@pytest.mark.skipif(not compiled_frames.available(),
                    reason="the compiled frame codec is not built; the Python one runs alone")
def test_compiled_and_python_codecs_agree(frames: ModuleType) -> None:
    assert compiled.is_compiled(frames.Open) and not compiled.is_compiled(frames.Subscribe)
    for value in (frames.Packet(body=frames.Open(a=255, b=7)),
                  frames.Packet(body=frames.Subscribe(packet_id=3, filters=[
                      frames.Filter(topic="x", qos=1)]))):
        wire = value.encode()
        with compiled.pure_python():
            assert value.encode() == wire
            assert frames.Packet.decode(wire) == value
        assert frames.Packet.decode(wire) == value


def test_the_generated_module_passes_ruff(frames: ModuleType) -> None:
    assert frames.__file__ is not None
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(ROOT / "pyproject.toml"), frames.__file__],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_generated_package_type_checks(frames: ModuleType) -> None:
    assert frames.__file__ is not None
    package = Path(frames.__file__).parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file",
         str(ROOT / "pyproject.toml"), str(package)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([1, 2, 8]), body=st.binary(max_size=40))
def test_any_bytes_decode_or_raise_a_decode_error(frames: ModuleType, kind: int,
                                                  body: bytes) -> None:
    """Whatever decodes is within its bounds, so it encodes again; the rest is a DecodeError."""
    try:
        value = frames.Packet.decode(frame(kind, body))
    except DecodeError:
        return
    frames.Packet.decode(value.encode())
