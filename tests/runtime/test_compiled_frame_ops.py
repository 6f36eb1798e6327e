"""The operations issue #21 brought to the compiled frame codec, against the Python methods.

uuids, signed sizes, bytes and text (UTF-8, modified UTF-8) after a length prefix, integers
read when their bytes remain, skipped trailing bytes, runs of nested structs up to the end of
the region, and switches on an integer key (sized, or reaching to the end; a case the C codec
cannot take goes through its class's methods). Each is checked as the older rows are in
``test_compiled_frames.py``: the same bytes, the same values, the same errors, on random
values, odd values, every truncation, random damage and sizes past their region, with no
leaked references. A one-file spec holds one of each; Pravega's frames use them all.
"""

from __future__ import annotations

import gc
import random
import struct
import sys
import uuid
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_protocols
from protoframe.generated.pravega import frames as pravega
from protoframe.generated.pulsar import frames as pulsar_frames
from protoframe.generated.pulsar import pulsar_api
from protoframe.generated.tank import frames as tank
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    check_random_damage,
    check_truncations,
    outcome,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: cops
doc: The operations issue 21 brought to the compiled frame codec.
byte_order: big
structs:
  Item:
    doc: Bytes sized by a signed size.
    fields:
      - {name: kind, type: i32, const: 7}
      - {name: length, type: i32, size_of: data}
      - {name: data, type: bytes}
  Run:
    doc: Items up to the end.
    fields:
      - {name: items, type: array, of: Item, until_end: true}
  Texts:
    doc: A uuid, prefixed text and bytes, a default, trailing bytes skipped.
    trailing: ignore
    fields:
      - {name: id, type: uuid}
      - {name: name, type: string, prefix: u8}
      - {name: java, type: string, prefix: u16, encoding: mutf8}
      - {name: blob, type: bytes, prefix: i16}
      - {name: tail, type: u32, when_remaining: true, default: 5}
  Other:
    doc: A condition on bytes and a rule, which keeps it on the Python codec.
    require: ["b is None or len(b) < 1000"]
    fields:
      - {name: a, type: u8}
      - {name: b, type: bytes, prefix: u24, when: "a == 1"}
  Counted:
    doc: A varint, a bool, varint-prefixed bytes and a counted array.
    fields:
      - {name: v, type: varint}
      - {name: flag, type: bool}
      - {name: blob, type: bytes, prefix: varint}
      - {name: n, type: u8, count_of: items}
      - {name: items, type: array, of: Item, count: n}
  Guarded:
    doc: Integers there when a condition over earlier integers holds.
    fields:
      - {name: kind, type: u8}
      - {name: flags, type: varint}
      - {name: on, type: bool}
      - {name: a, type: u32, when: "kind == 0xfc"}
      - {name: b, type: i16, when: "kind in (1, 2) and not flags & 2"}
      - {name: c, type: u8, when: "(flags >> 2 & 0xf) + 1 >= 3 or on"}
      - {name: d, type: u8, when: "flags << 60 > 0 and -kind < 0 - 1"}
      - {name: e, type: u8, when: "0 < kind < 16 and kind not in (3, 4) or flags ^ 1 == 0"}
      - {name: g, type: u8, when: "kind - 300 <= -100 | 0"}
  Trace:
    doc: Text read when bytes remain, its default when not.
    fields:
      - {name: code, type: i32}
      - {name: trace, type: string, prefix: u16, encoding: mutf8, when_remaining: true,
         default: "none"}
  Open:
    doc: A switch reaching to the end of the region.
    fields:
      - {name: tag, type: u16}
      - name: rest
        type: switch
        on: tag
        cases:
          1: Item
          2: Other
frame:
  name: Frame
  doc: One frame.
  fields:
    - {name: type, type: u8}
    - {name: length, type: i32, size_of: body}
    - name: body
      type: switch
      on: type
      cases:
        1: Texts
        2: Run
        3: Other
        4: Item
        5: Open
        6: Counted
        7: Guarded
        8: Trace
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("cops"), "cops", SPEC, "cops_pkg")


# --- what is compiled ---------------------------------------------------------------------------


def test_the_new_operations_are_compiled(m: ModuleType) -> None:
    for name in ("Frame", "Item", "Run", "Texts", "Open", "Counted", "Guarded", "Trace"):
        assert compiled.is_compiled(getattr(m, name)), name
    assert not compiled.is_compiled(m.Other)  # a condition: the Python codec's
    ours: tuple[type, ...] = (pravega.Frame, pravega.AppendBlockEnd, pravega.Event,
                              pravega.EventRun, pravega.SetupAppend, pravega.Hello,
                              pravega.DataAppended)
    assert all(compiled.is_compiled(cls) for cls in ours)
    # TANK's frame, a switch decoding another struct each way, encodes in C (and decodes
    # through its Python methods, which take the direction; test_compiled_tank.py checks it).
    assert compiled.is_compiled(tank.Frame)


# --- random values ------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20) | st.text(
    st.characters(max_codepoint=0x7F), max_size=300)


def _guarded(m: ModuleType, kind: int, flags: int, on: bool, odd: int = 0) -> Any:
    """A Guarded with each conditional field set exactly when its condition holds (``odd``:
    a bit mask of fields to get wrong)."""
    holds = {"a": kind == 0xFC, "b": kind in (1, 2) and not flags & 2,
             "c": (flags >> 2 & 0xF) + 1 >= 3 or on, "d": flags << 60 > 0 and -kind < 0 - 1,
             "e": 0 < kind < 16 and kind not in (3, 4) or flags ^ 1 == 0,
             "g": kind - 300 <= -100 | 0}
    values = {}
    for bit, (name, there) in enumerate(holds.items()):
        if odd >> bit & 1:
            there = not there
        values[name] = (kind + bit) & 0x7F if there else None
    return m.Guarded(kind=kind, flags=flags, on=on, **values)


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    kind = draw(st.sampled_from(["texts", "run", "other", "item", "open", "counted",
                                 "guarded", "trace"]))
    item = st.builds(lambda d: m.Item(data=d), st.binary(max_size=40))
    other = st.integers(0, 255).flatmap(lambda a: st.builds(
        lambda b: m.Other(a=a, b=b), st.binary(max_size=9) if a == 1 else st.none()))
    if kind == "texts":
        return m.Texts(id=draw(st.uuids()), name=draw(_text), java=draw(_text),
                       blob=draw(st.binary(max_size=300)), tail=draw(st.integers(0, 2**32 - 1)))
    if kind == "run":
        return m.Run(items=draw(st.lists(item, max_size=5)))
    if kind == "other":
        return draw(other)
    if kind == "item":
        return draw(item)
    if kind == "trace":
        return m.Trace(code=draw(st.integers(-2**31, 2**31 - 1)), trace=draw(_text))
    if kind == "guarded":
        return _guarded(m, draw(st.integers(0, 255)),
                        draw(st.integers(0, 2**64 - 1) | st.integers(0, 64)), draw(st.booleans()))
    if kind == "counted":
        return m.Counted(v=draw(st.integers(0, 2**64 - 1)), flag=draw(st.booleans()),
                         blob=draw(st.binary(max_size=200)),
                         items=draw(st.lists(item, max_size=4)))
    return m.Open(rest=draw(item | other))


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_frames_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    frame = m.Frame(body=data.draw(_bodies(m)))
    kind, _ = same(frame.encode)
    if kind == "value":
        wire = frame.encode()
        assert same_decodes(m.Frame, wire) == "value"
        assert m.Frame.decode(wire) == frame


@settings(max_examples=scaled(100), deadline=None)
@given(writer=st.uuids(), sizes=st.integers(-2**31, 2**31 - 1),
       data=st.binary(max_size=200), num=st.integers(-2**31, 2**31 - 1),
       last=st.integers(-2**63, 2**63 - 1), request=st.integers(-2**63, 2**63 - 1))
def test_pravega_append_block_end_round_trips(writer: uuid.UUID, sizes: int, data: bytes,
                                              num: int, last: int, request: int) -> None:
    frame = pravega.Frame(body=pravega.AppendBlockEnd(
        writer_id=writer, size_of_whole_events=sizes, data=data, num_events=num,
        last_event_number=last, request_id=request))
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(pravega.Frame, wire) == "value"
    assert pravega.Frame.decode(wire) == frame


def test_the_bench_frames_agree() -> None:
    wire = frames_protocols.pravega_ours_encode()
    assert same(frames_protocols.pravega_ours_encode)[1] == repr(wire)
    same(lambda: frames_protocols.pravega_ours_decode(wire))
    assert frames_protocols.pravega_ours_decode(wire) == frames_protocols.PRAVEGA_EXPECTED
    batch = frames_protocols.pravega_batch()
    assert same_decodes(pravega.EventRun, batch) == "value"
    same(lambda: pravega.EventRun.decode(batch).encode())


def test_decoded_uuids_are_what_uuid_builds() -> None:
    wire = frames_protocols.pravega_ours_encode()
    body = pravega.Frame.decode(wire).body
    assert isinstance(body, pravega.AppendBlockEnd)
    made = uuid.UUID(bytes=wire[8:24])
    assert type(body.writer_id) is uuid.UUID
    assert body.writer_id == made and body.writer_id.is_safe is made.is_safe
    assert hash(body.writer_id) == hash(made) and str(body.writer_id) == str(made)


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    texts = m.Texts(id=uuid.UUID(int=0x1234), name="héllo", java="java", blob=b"\x00\x01",
                    tail=9)
    bodies = [texts, m.Run(items=[m.Item(data=b"ab"), m.Item(data=b"")]), m.Other(a=1, b=b"\x02"),
              m.Item(data=b"xyz"), m.Open(rest=m.Item(data=b"q")), m.Open(rest=m.Other(a=0)),
              m.Counted(v=2**63 + 5, flag=True, blob=b"\x01" * 130,
                        items=[m.Item(data=b"i"), m.Item(data=b"")]),
              _guarded(m, 0xFC, 1, True), _guarded(m, 1, 0, False), _guarded(m, 5, 1, False),
              _guarded(m, 3, 5, True), m.Trace(code=-4, trace="at x.java:3"),
              m.Trace(code=1, trace="")]
    out = [(m.Frame, m.Frame(body=b).encode()) for b in bodies]
    out += [(m.Texts, texts.encode()), (m.Run, bodies[1].encode())]
    out += [(pravega.Frame, frames_protocols.pravega_ours_encode()),
            (pravega.EventRun, pravega.EventRun(events=[
                pravega.Event(data=b"e1"), pravega.Event(data=b"")]).encode()),
            (pravega.Padding, pravega.Padding(zeros=bytes(3)).encode()),  # a negative constant
            (pravega.PartialEvent, pravega.PartialEvent(data=b"\x00\x00").encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=21, rounds=scaled(150))


def test_sizes_and_prefixes_past_their_region_match(m: ModuleType) -> None:
    u = bytes(16)
    cases = [
        b"\x04" + struct.pack(">i", -1) + b"",  # a negative frame size
        b"\x04" + struct.pack(">i", 100) + struct.pack(">ii", 7, 1) + b"a",  # past the end
        b"\x04" + struct.pack(">i", 9) + struct.pack(">ii", 7, 2) + b"a",  # body size too small
        b"\x04" + struct.pack(">i", 12) + struct.pack(">ii", 7, -3) + b"abcd",  # negative size
        b"\x04" + struct.pack(">i", 12) + struct.pack(">ii", 8, 4) + b"abcd",  # a bad constant
        b"\x09" + struct.pack(">i", 0),  # an unknown type
        b"\x01" + struct.pack(">i", 21) + u + b"\x05ab",  # a prefix past the body
        b"\x01" + struct.pack(">i", 24) + u + b"\x00\x00\x05ab\x00",  # u16 prefix past it
        b"\x01" + struct.pack(">i", 23) + u + b"\x00\x00\x00\xff\xff",  # a negative i16
        b"\x01" + struct.pack(">i", 21) + u + b"\x00\x00\x00\x00\x00",  # no tail: the default
        b"\x01" + struct.pack(">i", 24) + u + b"\x00\x00\x00\x00\x00\x00\x00\x01",  # short tail
        b"\x01" + struct.pack(">i", 30) + u + b"\x00\x00\x00\x00\x00" + bytes(9),  # skipped
        b"\x05" + struct.pack(">i", 2) + b"\x00\x03",  # an unknown case of the open switch
        b"\x05" + struct.pack(">i", 3) + b"\x00\x02\x05",  # a Python case
        b"\x05" + struct.pack(">i", 3) + b"\x00\x02\x01",  # a Python case, truncated
        b"\x02" + struct.pack(">i", 3) + b"\x00\x00\x00",  # a run ending mid-item
        b"\x06" + struct.pack(">i", 13) + b"\xff" * 9 + b"\x7f\x01\x00\x00",  # 10 bytes
        b"\x06" + struct.pack(">i", 14) + b"\xff" * 11 + b"\x01\x00\x00",  # 11 bytes
        b"\x06" + struct.pack(">i", 2) + b"\xff\xff",  # a varint cut by the body's end
        b"\x06" + struct.pack(">i", 5) + b"\x01\x02\x05ab",  # a prefix past the body
        b"\x06" + struct.pack(">i", 5) + b"\x01\x02\xff\xff\x7f",  # a huge prefix
        b"\x06" + struct.pack(">i", 4) + b"\x01\x02\x00\x03",  # more items than bytes
        b"\x06" + struct.pack(">i", 4) + b"\x01\x00\x00\x00",  # a false bool, no items
    ]
    kinds = [same_decodes(m.Frame, data) for data in cases]
    assert kinds.count("value") == 6, kinds


@pytest.mark.parametrize("text", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x00", b"\xe2\x82\xac"])
def test_bad_and_unusual_text_bytes_match(m: ModuleType, text: bytes) -> None:
    u = bytes(16)
    for body in (u + bytes([len(text)]) + text + b"\x00\x00\x00\x00",  # as UTF-8
                 u + b"\x00" + struct.pack(">H", len(text)) + text + b"\x00\x00"):  # as mutf8
        same_decodes(m.Texts, body)
        same_decodes(m.Frame, b"\x01" + struct.pack(">i", len(body)) + body)
    # Java's two-byte NUL and a surrogate pair written as two three-byte sequences.
    for java in (b"a\xc0\x80b", b"\xed\xa0\xbd\xed\xb8\x80"):
        same_decodes(m.Texts, u + b"\x00" + struct.pack(">H", len(java)) + java + b"\x00\x00")


# --- odd values on encode -----------------------------------------------------------------------


class _Uuid(uuid.UUID):
    pass


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    good: dict[str, Any] = {"id": uuid.UUID(int=5), "name": "n", "java": "j", "blob": b"b",
                            "tail": 1}
    odd: list[dict[str, Any]] = [
        {"id": "not a uuid"}, {"id": _Uuid(int=3)}, {"id": None},
        {"name": "x" * 256}, {"name": "\ud800"}, {"name": b"bytes"}, {"name": None},
        {"java": "é\x00€😀"}, {"java": "nul\x00"}, {"java": "x" * 70000}, {"java": 3},
        {"blob": bytearray(b"ab")}, {"blob": b"x" * 40000}, {"blob": "text"},
        {"tail": -1}, {"tail": 2**32}, {"tail": None}, {"tail": True},
    ]
    for change in odd:
        texts = m.Texts(**{**good, **change})
        same(texts.encode)
        same(m.Frame(body=texts).encode)
    weird_uuid = uuid.UUID(int=1)
    object.__setattr__(weird_uuid, "int", 2**128)  # out of range: .bytes raises
    same(m.Texts(**{**good, "id": weird_uuid}).encode)
    for items in ([m.Item(data=b"a"), "x"], (m.Item(data=b"a"),), [m.Other(a=0)], None):
        same(m.Run(items=items).encode)
        same(m.Frame(body=m.Run(items=items)).encode)
        same(m.Counted(v=1, flag=False, blob=b"", items=items).encode)
    plain: dict[str, Any] = {"v": 1, "flag": True, "blob": b"", "items": []}
    for change in ({"v": -1}, {"v": 2**64}, {"v": True}, {"v": 1.0}, {"flag": 1},
                   {"flag": None}, {"blob": b"x" * 20000}, {"blob": "x"},
                   {"items": [m.Item(data=b"")] * 256}, {"items": [m.Item(data=b"")] * 255}):
        same(m.Counted(**{**plain, **change}).encode)
        same(m.Frame(body=m.Counted(**{**plain, **change})).encode)
    for body in ("x", None, m.Frame(body=m.Other(a=0)), m.Run(items=[m.Item(data=b"x" * 10)])):
        same(m.Frame(body=body).encode)
        same(m.Open(rest=body).encode)


def test_conditions_encode_as_the_python_codec_does(m: ModuleType) -> None:
    rng = random.Random(5)
    for _ in range(scaled(300)):
        kind, flags = rng.randrange(256), rng.choice([rng.randrange(64), rng.randrange(2**64)])
        value = _guarded(m, kind, flags, rng.random() < 0.5, odd=rng.choice([0, 0, 1 << 6]) |
                         (1 << rng.randrange(6) if rng.random() < 0.3 else 0))
        kind_seen, _ = same(value.encode)
        same(m.Frame(body=value).encode)
        if kind_seen == "value":
            same_decodes(m.Guarded, value.encode())
    for odd in ({"kind": "x"}, {"kind": True}, {"flags": -1}, {"on": 1}, {"a": "x"}):
        fields = {"kind": 0xFC, "flags": 0, "on": False, "a": 1, "b": None, "c": None,
                  "d": None, "e": None, "g": 5, **odd}
        same(m.Guarded(**fields).encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    for cls, wire in _samples(m):
        value = cls.decode(wire)
        for name in type(value).__slots__:
            broken = cls.decode(wire)
            delattr(broken, name)
            same(broken.encode)
            if cls is m.Frame:
                inner = cls.decode(wire)
                delattr(inner.body, next(iter(type(inner.body).__slots__)))
                same(inner.encode)
    payload = pulsar_frames.Payload(metadata=pulsar_api.MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=2), data=b"x")
    for name in ("metadata", "data"):
        broken = pulsar_frames.Payload(metadata=payload.metadata, data=b"x")
        delattr(broken, name)
        same(broken.encode)


def test_an_omitted_default_is_stored_by_both_constructors(m: ModuleType) -> None:
    made = m.Texts(id=uuid.UUID(int=1), name="", java="", blob=b"")
    with compiled.pure_python():
        reference = m.Texts(id=uuid.UUID(int=1), name="", java="", blob=b"")
    assert made == reference and made.tail == 5
    guarded = m.Guarded(kind=1, flags=0, on=False)
    with compiled.pure_python():
        assert guarded == m.Guarded(kind=1, flags=0, on=False) and guarded.a is None
    trace = m.Trace(code=1)
    with compiled.pure_python():
        assert trace == m.Trace(code=1) and trace.trace == "none"
    # Without the bytes, the default; with a cut prefix or text, the Python code's error.
    for data in (b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00", b"\x00\x00\x00\x01\x00\x02a",
                 b"\x00\x00\x00\x01\x00\x01\xe9"):
        same_decodes(m.Trace, data)


# --- resources ----------------------------------------------------------------------------------


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks(m: ModuleType) -> None:
    samples = _samples(m)
    values = [(cls, wire, cls.decode(wire)) for cls, wire in samples]
    broken = [(cls, wire[:-1]) for cls, wire in samples]

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
    assert sys.getallocatedblocks() - before < 300  # one block a call would show 5,000+


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    cls = make_dataclass("Odd", [("body", object), ("key", int)], slots=True)
    ops = vocabulary.OPS

    def codec(*rows: tuple[Any, ...]) -> object:
        return _framecodec.FrameCodec(cls, rows, True, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None)

    switch: tuple[Any, ...] = (ops["switch"], "body", 0, 0, -1, 0, {}, None, {}, None)
    with pytest.raises(ValueError, match="key row before it"):
        codec(switch)
    with pytest.raises(ValueError, match="switch row after it"):
        codec((ops["switch_key"], None, 1, 0, 0, 0, None, None, None, None))
    with pytest.raises(ValueError, match="last row"):
        codec((ops["skip_trailing"], None, 0, 0, -1, 0, None, None, None, None),
              (ops["int"], "key", 1, 0, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="text kind"):
        codec((ops["prefixed"], "key", 1, 0, -1, 9, None, None, None, None))
    with pytest.raises(ValueError, match="default integer"):
        codec((ops["default"], "key", 1, 0, -1, 0, None, None, None, None))
    key = (ops["int"], "key", 1, 0, -1, 0, None, None, None, None)
    field, const, eq = vocabulary.EXPR["field"], vocabulary.EXPR["const"], vocabulary.EXPR["eq"]
    for program, why in ((((field, 1), (const, 1), (eq, 0)), "earlier integer rows"),
                         (((const, 1), (eq, 0)), "does not balance"),
                         (((const, 1), (const, 1)), "does not balance"),
                         (((99, 0),), "unknown step")):
        with pytest.raises(ValueError, match=why):
            codec(key, (ops["condition"], "body", 1, 0, -1, 0, program, None, None, None))
    with pytest.raises(TypeError, match="not a slot"):
        codec((ops["uuid"], "key", 0, 0, -1, 0, int, 0, None, None))


def test_well_formed_frames_stay_in_c(m: ModuleType) -> None:
    """Valid input and plain values never reach the Python methods, except through a switch
    case the C codec does not take (Other), whose own methods run."""
    for cls, wire in _samples(m):
        module = sys.modules[cls.__module__]
        value = cls.decode(wire)
        calls = python_calls(module, lambda: cls.decode(wire))  # noqa: B023
        calls += python_calls(module, value.encode)
        if "Other" in repr(value):
            assert set(calls) <= {"Other.decode_from", "Other.encode", "Other.encode_to"}, calls
        else:
            assert calls == [], (cls, calls)
    # A give-up does run them: the check above would see it.
    assert python_calls(m, lambda: outcome(lambda: m.Frame.decode(b"\x04"))) != []
