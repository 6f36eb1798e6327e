"""Bit fields and switches on a derived key in the compiled frame codec (issue #21's AMQP and
WebSocket rows), against the Python methods.

An integer of named bits (``bits:``) is a ``bits`` row and one ``bit_field`` row per part: bools,
small integers and enum members, reserved bits that must be zero, parts packed from a
``value:`` (``has(x)``, ``len(x)``, an ``if``/``else``), and conditions, guards and values
reading the parts (AMQP's property flags, WebSocket's 7-bit length). AMQP's method frame is
a switch on a key derived from two value rows (``derived_key``), and its field tables runs of
nested structs filling the size of a size field before them (``struct_run_sized``). Each is
checked as
``test_compiled_frame_ops_examples.py`` checks its rows: the same bytes, values and errors
with both codecs on random values, odd values, every truncation and random damage, and
well-formed frames never reach the Python methods.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_examples
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    bare_codec,
    check_emptied_slots,
    check_random_damage,
    check_stays_in_c,
    check_truncations,
    outcome,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import amqp, needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: xbits
doc: Bit fields and a switch on a derived key.
byte_order: big
enums:
  Kind:
    ZERO: 0
    ONE: 1
    FIVE: 5
    FIFTEEN: 15
structs:
  Flags:
    doc: A bool, a small integer and an enum in one byte; wide parts and reserved bits.
    fields:
      - name: b0
        type: u8
        bits:
          - {name: fin, type: bool}
          - {width: 1, reserved: true}
          - {name: small, width: 2}
          - {name: kind, width: 4, enum: Kind}
      - name: b1
        type: u16
        bits:
          - {width: 3, reserved: true}
          - {name: wide, width: 12}
          - {name: last, type: bool}
      - {name: tail, type: u8, when: fin}
      - {name: after, type: u16, when: "small == 2 and last"}
  Wide:
    doc: Parts of a u32 and a u64, the top bit of each.
    fields:
      - name: w
        type: u32
        bits:
          - {name: top, type: bool}
          - {name: rest, width: 31}
      - name: q
        type: u64
        bits:
          - {name: high, width: 40}
          - {width: 23, reserved: true}
          - {name: low, type: bool}
  Props:
    doc: Presence flags packed from has(), each guarding a field after them.
    fields:
      - name: flags
        type: u16
        bits:
          - {name: has_text, type: bool, value: "has(text)"}
          - {name: has_num, type: bool, value: "has(num)"}
          - {name: has_blob, type: bool, value: "has(blob)"}
          - {width: 13, reserved: true}
      - {name: text, type: string, prefix: u8, when: has_text}
      - {name: num, type: u32, when: has_num}
      - {name: blob, type: bytes, prefix: u16, when: has_blob}
  Sized:
    doc: A 7-bit length, a longer one after it when it says 126 (WebSocket's form).
    fields:
      - {name: pad, type: string, prefix: u8, const: ""}
      - name: b
        type: u8
        bits:
          - {name: flag, type: bool}
          - {name: len7, width: 7, value: "len(data) if len(data) < 126 else 126"}
      - {name: len16, type: u16, when: "len7 == 126", value: "len(data)"}
      - {name: data, type: bytes, size: rest}
  A:
    doc: One body of a call.
    fields: [{name: x, type: u8}]
  B:
    doc: Another.
    fields: [{name: y, type: u16}]
  Call:
    doc: A group and a code, the body chosen by both (AMQP's class and method ids).
    fields:
      - {name: group, type: u8, value: "op >> 8"}
      - {name: code, type: u8, value: "op & 0xff"}
      - {name: op, type: u16, derive: "(group << 8) | code"}
      - name: body
        type: switch
        on: op
        cases: {0x0101: A, 0x0102: B, 0x0201: Flags}
  Table:
    doc: Items filling the size before them (AMQP's field tables).
    fields:
      - {name: size, type: u16, size_of: items}
      - {name: items, type: array, of: Call, until_end: true}
      - {name: after, type: u8}
frame:
  name: Frame
  doc: A kind, a size and the body the kind chooses.
  fields:
    - {name: kind, type: u8}
    - {name: size, type: u32, size_of: body}
    - name: body
      type: switch
      on: kind
      cases: {1: Flags, 2: Props, 3: Sized, 4: Call, 5: Wide, 6: Table}
"""

_AMQP_COMPILED = ("Method", "BasicPublish", "BasicDeliver", "BasicGet", "BasicGetOk",
                  "BasicGetEmpty", "BasicAck", "ChannelOpen", "ChannelOpenOk",
                  "ConnectionOpen", "ConnectionOpenOk", "Frame", "ContentHeader",
                  "QueueDeclare", "BasicConsume", "ConnectionStart", "ConnectionStartOk",
                  "FieldTable", "FieldArray", "FieldTable1", "FieldArray1", "FieldTable2",
                  "FieldArray2", "TableValue1", "ArrayValue1")


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("xbits"), "xbits", SPEC, "xbits_pkg")


def test_bit_fields_and_derived_keys_are_compiled(m: ModuleType) -> None:
    for name in ("Frame", "Flags", "Wide", "Props", "Sized", "A", "B", "Call", "Table"):
        assert compiled.is_compiled(getattr(m, name)), name
    for name in _AMQP_COMPILED:
        assert compiled.is_compiled(getattr(amqp, name)), name


# --- random values ------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    kind = draw(st.sampled_from(["flags", "wide", "props", "sized", "call", "table"]))
    if kind == "table":
        return m.Table(items=draw(st.lists(_calls(m), max_size=4)), after=draw(
            st.integers(0, 255)))
    if kind == "flags":
        return _flags(m, draw)
    if kind == "wide":
        return m.Wide(top=draw(st.booleans()), rest=draw(st.integers(0, 2**31 - 1)),
                      high=draw(st.integers(0, 2**40 - 1)), low=draw(st.booleans()))
    if kind == "props":
        return m.Props(text=draw(st.none() | _text),
                       num=draw(st.none() | st.integers(0, 2**32 - 1)),
                       blob=draw(st.none() | st.binary(max_size=30)))
    if kind == "sized":
        return m.Sized(flag=draw(st.booleans()),
                       data=draw(st.binary(max_size=130) | st.sampled_from(
                           [b"\x01" * 125, b"\x02" * 126, b"\x03" * 300])))
    return draw(_calls(m))


@st.composite
def _calls(draw: st.DrawFn, m: ModuleType) -> Any:
    body = draw(st.sampled_from(["a", "b", "flags"]))
    return m.Call(body=m.A(x=draw(st.integers(0, 255))) if body == "a" else m.B(
        y=draw(st.integers(0, 2**16 - 1))) if body == "b" else _flags(m, draw))


# AMQP's field values: scalars and strings, and tables and arrays of them two deep.
_SCALARS: list[tuple[str, st.SearchStrategy[Any]]] = [
    ("BoolValue", st.booleans()), ("I8Value", st.integers(-128, 127)),
    ("U8Value", st.integers(0, 255)), ("I16Value", st.integers(-2**15, 2**15 - 1)),
    ("U16Value", st.integers(0, 2**16 - 1)), ("I32Value", st.integers(-2**31, 2**31 - 1)),
    ("U32Value", st.integers(0, 2**32 - 1)), ("I64Value", st.integers(-2**63, 2**63 - 1)),
    ("U64Value", st.integers(0, 2**64 - 1)), ("F64Value", st.floats(allow_nan=False)),
    ("LongStringValue", st.binary(max_size=20)), ("TimestampValue", st.integers(0, 2**64 - 1)),
    ("ByteArrayValue", st.binary(max_size=5))]


def _field_values(depth: int) -> st.SearchStrategy[Any]:
    suffix = "" if depth == 0 else str(depth)
    value_cls = getattr(amqp, f"FieldValue{suffix}")
    scalars = st.one_of([st.builds(getattr(amqp, name), value=strategy)
                         for name, strategy in _SCALARS]
                        + [st.just(amqp.VoidValue()),
                           st.builds(lambda s, v: amqp.DecimalValue(scale=s, value=v),
                                     st.integers(0, 255), st.integers(-2**31, 2**31 - 1))])
    if depth < 2:
        inner = _field_values(depth + 1)
        table_cls, array_cls = (getattr(amqp, f"FieldTable{depth + 1}"),
                                getattr(amqp, f"FieldArray{depth + 1}"))
        entry_cls = getattr(amqp, f"FieldEntry{depth + 1}")
        scalars = scalars | st.builds(
            lambda entries: getattr(amqp, f"TableValue{depth + 1}")(value=table_cls(
                entries=[entry_cls(name=k, value=v) for k, v in entries])),
            st.lists(st.tuples(_text, inner), max_size=3)) | st.builds(
            lambda items: getattr(amqp, f"ArrayValue{depth + 1}")(value=array_cls(
                items=items)), st.lists(inner, max_size=3))
    return scalars.map(lambda v: value_cls(value=v))


_tables = st.lists(st.tuples(_text, _field_values(0)), max_size=4).map(
    lambda entries: amqp.FieldTable(entries=[amqp.FieldEntry(name=k, value=v)
                                             for k, v in entries]))


def _flags(m: ModuleType, draw: st.DrawFn) -> Any:
    fin, small, last = draw(st.booleans()), draw(st.integers(0, 3)), draw(st.booleans())
    return m.Flags(fin=fin, small=small, kind=draw(st.sampled_from(list(m.Kind))),
                   wide=draw(st.integers(0, 2**12 - 1)), last=last,
                   tail=draw(st.integers(0, 255)) if fin else None,
                   after=draw(st.integers(0, 2**16 - 1)) if small == 2 and last else None)


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_frames_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    frame = m.Frame(body=data.draw(_bodies(m)))
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(m.Frame, wire) == "value"
    assert m.Frame.decode(wire) == frame


@settings(max_examples=scaled(100), deadline=None)
@given(mandatory=st.booleans(), immediate=st.booleans(), exchange=_text, key=_text,
       tag=st.integers(0, 2**64 - 1))
def test_random_amqp_methods_round_trip(mandatory: bool, immediate: bool, exchange: str,
                                        key: str, tag: int) -> None:
    for args in (amqp.BasicPublish(exchange=exchange, routing_key=key, mandatory=mandatory,
                                   immediate=immediate),
                 amqp.BasicAck(delivery_tag=tag, multiple=mandatory),
                 amqp.BasicDeliver(consumer_tag=key, delivery_tag=tag, redelivered=immediate,
                                   exchange=exchange, routing_key=key),
                 amqp.BasicGetOk(delivery_tag=tag, redelivered=mandatory, exchange=exchange,
                                 routing_key=key, message_count=tag & 0xFFFFFFFF),
                 amqp.ChannelOpen(), amqp.ConnectionOpen(virtual_host=key, reserved_2=immediate)):
        _amqp_round_trip(amqp.Method(arguments=args), tag)


def _amqp_round_trip(payload: Any, channel: int) -> None:
    frame = amqp.Frame(channel=channel & 0xFFFF, payload=payload)
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(amqp.Frame, wire) == "value"
    assert amqp.Frame.decode(wire) == frame


@settings(max_examples=scaled(150), deadline=None)
@given(table=_tables, props=st.lists(st.booleans(), min_size=14, max_size=14),
       text=_text, number=st.integers(0, 255), big=st.integers(0, 2**64 - 1))
def test_random_field_tables_and_content_headers_round_trip(
        table: Any, props: list[bool], text: str, number: int, big: int) -> None:
    """Tables of every kind of value, nested two deep, in the methods that carry them, and
    content headers with every mix of properties."""
    values: list[Any] = [text, text, table, number, number, text, text, text, text, big, text,
                         text, text, text]
    names = ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
             "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
             "user_id", "app_id", "cluster_id")
    header = amqp.ContentHeader(class_id=60, body_size=big, **{
        name: value if on else None for name, value, on in zip(names, values, props,
                                                               strict=True)})
    _amqp_round_trip(header, number)
    for args in (amqp.QueueDeclare(queue=text, no_wait=props[0], auto_delete=props[1],
                                   exclusive=props[2], durable=props[3], passive=props[4],
                                   arguments=table),
                 amqp.BasicConsume(queue=text, consumer_tag=text, no_wait=props[5],
                                   exclusive=props[6], no_ack=props[7], no_local=props[8],
                                   arguments=table),
                 amqp.ConnectionStartOk(client_properties=table, mechanism="PLAIN",
                                        response=b"\x00u\x00p", locale=text)):
        _amqp_round_trip(amqp.Method(arguments=args), big)


def test_the_bench_frames_agree() -> None:
    wire = frames_examples.amqp_ours_encode()
    assert same(frames_examples.amqp_ours_encode)[1] == repr(wire)
    assert same(lambda: frames_examples.amqp_ours_decode(wire))[0] == "value"
    assert frames_examples.amqp_ours_decode(wire) == frames_examples.amqp_hand_decode(wire)


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    flags = m.Flags(fin=True, small=2, kind=m.Kind.FIVE, wide=0xABC, last=True, tail=7,
                    after=0x1234)
    bodies = [flags,
              m.Flags(fin=False, small=1, kind=m.Kind.FIFTEEN, wide=0, last=False, tail=None,
                      after=None),
              m.Wide(top=True, rest=2**31 - 1, high=2**40 - 1, low=True),
              m.Wide(top=False, rest=5, high=1, low=False),
              m.Props(text="tëxt", num=None, blob=b"\x00\xff"),
              m.Props(text=None, num=2**32 - 1, blob=None),
              m.Props(text=None, num=None, blob=None),
              m.Sized(flag=True, data=b"d" * 5), m.Sized(flag=False, data=b"e" * 200),
              m.Call(body=m.A(x=3)), m.Call(body=m.B(y=0xBEEF)), m.Call(body=flags)]
    out = [(m.Frame, m.Frame(body=b).encode()) for b in bodies]
    out += [(type(b), b.encode()) for b in bodies]
    method = amqp.Frame(channel=1, payload=amqp.Method(arguments=amqp.BasicPublish(
        exchange="ex", routing_key="rk", mandatory=True, immediate=False)))
    table = amqp.FieldTable(entries=[
        amqp.FieldEntry(name="b", value=amqp.FieldValue(value=amqp.BoolValue(value=True))),
        amqp.FieldEntry(name="t", value=amqp.FieldValue(value=amqp.TableValue1(
            value=amqp.FieldTable1(entries=[amqp.FieldEntry1(name="n", value=amqp.FieldValue1(
                value=amqp.I32Value(value=-5)))])))),
        amqp.FieldEntry(name="a", value=amqp.FieldValue(value=amqp.ArrayValue1(
            value=amqp.FieldArray1(items=[amqp.FieldValue1(value=amqp.LongStringValue(
                value=b"s")), amqp.FieldValue1(value=amqp.U8Value(value=9))]))))])
    header = amqp.ContentHeader(class_id=60, body_size=5, content_type="text/plain",
                                headers=table, delivery_mode=2, timestamp=7, cluster_id="c")
    out += [(amqp.FieldTable, table.encode()), (amqp.ContentHeader, header.encode()),
            (amqp.Frame, amqp.Frame(channel=1, payload=header).encode()),
            (amqp.Method, amqp.Method(arguments=amqp.QueueDeclare(
                queue="q", no_wait=False, auto_delete=True, exclusive=False, durable=True,
                passive=False, arguments=table)).encode()),
            (m.Table, m.Table(items=[m.Call(body=m.A(x=1)), m.Call(body=m.B(y=2))],
                              after=3).encode())]
    out += [(amqp.Frame, method.encode()), (amqp.Method, method.payload.encode()),
            (amqp.Method, amqp.Method(arguments=amqp.ChannelOpenOk()).encode()),
            (amqp.Method, amqp.Method(arguments=amqp.BasicAck(delivery_tag=9,
                                                               multiple=True)).encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=6455, rounds=scaled(150))


def test_every_byte_of_the_bits_decodes_alike(m: ModuleType) -> None:
    """Reserved bits set, enum values Kind lacks (the Python codec's UnknownEnumValueError),
    and each part's values, through every value of the bits' bytes."""
    for b0 in range(256):
        same_decodes(m.Flags, bytes([b0]) + b"\x00\x01" + b"\x07\x00\x02")
        same_decodes(m.Flags, b"\x20\x00\x01")
    for b1 in (0x0000, 0x2000, 0x8000, 0x1FFF, 0xFFFF, 0x0001):
        same_decodes(m.Flags, b"\x05" + b1.to_bytes(2, "big") + b"\x00\x00")
    for b in range(256):
        same_decodes(m.Sized, b"\x00" + bytes([b]) + b"\x00\x7e" + b"x" * 3)
        same_decodes(m.Props, bytes([b, 0]) + b"\x01a\x00\x00\x00\x01\x00\x01z")
        same_decodes(amqp.BasicPublish, b"\x00\x00\x00\x00" + bytes([b]))
        same_decodes(amqp.ContentHeader, b"\x00\x3c\x00\x00" + bytes(8) + bytes([b, b]))
    same_decodes(m.Wide, bytes(8) + b"\x00\x00\x00\x01")
    same_decodes(m.Wide, bytes(4) + b"\x00\x00\x00\x00\x00\x00\x00\x02")


def test_unknown_and_mismatched_derived_keys_decode_alike(m: ModuleType) -> None:
    for group, code in ((1, 1), (1, 2), (2, 1), (1, 3), (0, 0), (0xFF, 0xFF)):
        same_decodes(m.Call, bytes([group, code]) + b"\x05\x00\x00\x01\x00\x00")
    for method in (0x003C0028, 0x003C0029, 0x000A000A, 0):
        same_decodes(amqp.Method, method.to_bytes(4, "big") + b"\x00\x00\x00\x00\x00")


# --- odd values on encode -----------------------------------------------------------------------


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    good = {"fin": True, "small": 1, "kind": m.Kind.ONE, "wide": 1, "last": False, "tail": 1,
            "after": None}
    odd: dict[str, list[Any]] = {
        "fin": [1, 0, None, "x", 2], "small": [4, -1, True, 3.0, None, 2**70, m.Kind.ONE],
        "kind": [1, 5, 16, -1, True, None, "ONE", 2**64], "wide": [2**12, -1, 2**63, None],
        "last": [1, None], "tail": [None, 256, -1], "after": [5]}
    for name, values in odd.items():
        for value in values:
            flags = m.Flags(**good)
            setattr(flags, name, value)
            same(flags.encode)
            same(m.Frame(body=flags).encode)
    for text, num, blob in ((1, None, None), (None, "1", None), (None, None, "b"),
                            (None, 2**32, None), ("x" * 256, None, None),
                            (None, None, b"z" * 0x10000), (None, True, None)):
        same(m.Props(text=text, num=num, blob=blob).encode)
    for data in (b"", b"a" * 125, b"a" * 126, b"a" * 0xFFFF, b"a" * 0x10000, "text",
                 bytearray(b"xy"), None):
        same(m.Sized(flag=True, data=data).encode)
    same(m.Sized(flag=2, data=b"").encode)
    for body in (m.A(x=1), m.B(y=1), None, m.Call(body=m.A(x=1)), 5, m.A(x=256)):
        same(m.Call(body=body).encode)
    for args in (amqp.BasicPublish(exchange="e", routing_key="k", mandatory=1, immediate=False),
                 amqp.BasicAck(delivery_tag=2**64, multiple=False), amqp.Heartbeat()):
        same(amqp.Method(arguments=args).encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    check_emptied_slots(_samples(m))


def test_constructors_agree(m: ModuleType) -> None:
    kwargs = {"fin": False, "small": 0, "kind": m.Kind.ZERO, "wide": 0, "last": True}
    made = m.Flags(**kwargs)
    with compiled.pure_python():
        reference = m.Flags(**kwargs)
    assert made == reference and made.tail is None and reference.after is None
    assert same(lambda: m.Flags(fin=True))[0] == "raised"


# --- C stays in C -------------------------------------------------------------------------------


def test_well_formed_frames_stay_in_c(m: ModuleType) -> None:
    check_stays_in_c(_samples(m))
    # A give-up does run them: the check above would see it.
    assert python_calls(m, lambda: outcome(lambda: m.Flags.decode(b"\x40\x00\x00"))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from protoframe.runtime.codec import vocabulary

    codec = bare_codec
    ops, x = vocabulary.OPS, vocabulary.EXPR
    bits = (ops["bits"], None, 1, 0, -1, 0, None, None, None, None)
    codec(bits, (ops["bit_field"], "key", 1, 16, 0, 7, None, None, None, None))
    with pytest.raises(ValueError, match="right after its bits row"):
        codec((ops["bit_field"], "key", 1, 16, 0, 7, None, None, None, None))
    with pytest.raises(ValueError, match="inside its integer"):
        codec(bits, (ops["bit_field"], "key", 2, 0, 0, 7, None, None, None, None))
    with pytest.raises(ValueError, match="one bit"):
        codec(bits, (ops["bit_field"], "key", 2, 16, 0, 0, None, None, None, None))
    with pytest.raises(ValueError, match="width"):
        codec((ops["bits"], None, 3, 0, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="enum part"):
        codec(bits, (ops["bit_field"], "key", 1, 0, 0, 0, {}, None, None, None))
    with pytest.raises(ValueError, match="need a slot"):  # a part with a value is not stored
        codec(bits, (ops["bit_field"], "key", 1, 0, 0, 0, None, ((x["const"], 1),), None,
                     None))
    with pytest.raises(ValueError, match="read a stored field"):
        codec(bits, (ops["bit_field"], None, 1, 0, 0, 0, None, ((x["has"], 0),), None, None))
    with pytest.raises(ValueError, match="encode only"):  # a key's program runs on decode
        codec((ops["int"], "key", 1, 0, -1, 0, None, None, None, None),
              (ops["derived_key"], None, 0, 0, 2, 0, None, ((x["has"], 0),), None, None))
    with pytest.raises(ValueError, match="switch row after it"):
        codec((ops["derived_key"], None, 0, 0, -1, 0, None, ((x["const"], 1),), None, None))
