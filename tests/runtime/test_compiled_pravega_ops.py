"""The operations Pravega's table entries brought to the compiled frame codec (issue #21),
against the Python methods: an integer worked out on encode as a constant plus the length of
later bytes (``len_value``: a table key's payload length), an integer there when a condition
reading the length of earlier bytes holds (``int_when``: a key's version), and a signed size
of the rest (a table value's payload length); and the tails of commands: bytes read when
bytes remain, None when not (``prefixed_optional``: a key range's bounds), and a bool read when
its byte remains, a default when not (``default_bool``). With them a table key, a table value
and an entry are compiled, and so are the commands carrying arrays of them.

As in ``test_compiled_frame_ops.py``: the same bytes, the same values and the same errors, on
random values, every truncation, random damage and odd values; a one-file spec holds the
shapes Pravega does not (another constant, a bare length, a length that overflows its field,
conditions mixing lengths with integers).
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pravega
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import check_random_damage, check_truncations, same, same_decodes
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: pops
doc: Lengths for the compiled frame codec.
byte_order: little
structs:
  Lens:
    doc: Values worked out from the length of bytes, and conditions reading it.
    fields:
      - {name: total, type: u16, value: "len(blob) + 3"}
      - {name: bare, type: u8, value: "len(blob)"}
      - {name: small, type: u8, value: "200 + len(blob)"}
      - {name: kind, type: u8}
      - {name: blob, type: bytes, prefix: u8}
      - {name: extra, type: i32, when: "len(blob) > 2 and kind != 0"}
      - {name: tag, type: u8, when: "len(blob) == 0 or kind == 9"}
  Tail:
    doc: Values read when bytes remain.
    fields:
      - {name: a, type: u8}
      - {name: flag, type: bool, when_remaining: true, default: true}
      - {name: note, type: string, prefix: u8, when_remaining: true}
      - {name: blob, type: bytes, prefix: varint, when_remaining: true}
frame:
  name: Frame
  doc: A kind and its lengths.
  fields:
    - {name: size, type: u32, size_of: rest}
    - {name: lens, type: struct, struct: Lens}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("pops"), "pops", SPEC, "pops_pkg")


_TABLE_COMMANDS = (pravega.CreateTableSegment, pravega.ReadTableKeys,
                   pravega.ReadTableEntries, pravega.UpdateTableEntries, pravega.RemoveTableKeys,
                   pravega.ReadTable, pravega.TableRead, pravega.TableKeysRead,
                   pravega.TableEntriesRead, pravega.TableEntriesDeltaRead)


def test_the_table_structs_are_compiled(m: ModuleType) -> None:
    for cls in (m.Frame, m.Lens, m.Tail, pravega.TableKey, pravega.TableValue, pravega.TableEntry,
                *_TABLE_COMMANDS):
        assert compiled.is_compiled(cls), cls.__name__


# --- random values ------------------------------------------------------------------------------

_I64 = st.integers(-2**63, 2**63 - 1)


def _key(data: bytes, version: int) -> Any:
    return pravega.TableKey(data=data, key_version=version if data else None)


_keys = st.builds(_key, st.binary(max_size=30), _I64)
_entries = st.builds(lambda k, v: pravega.TableEntry(key=k, value=pravega.TableValue(data=v)),
                     _keys, st.binary(max_size=30))
_text = st.text(st.characters(max_codepoint=0x7F), max_size=12)


@st.composite
def _commands(draw: st.DrawFn) -> Any:
    rid, segment, token = draw(_I64), draw(_text), draw(_text)
    entries, keys = draw(st.lists(_entries, max_size=4)), draw(st.lists(_keys, max_size=4))
    cont = draw(st.binary(max_size=10))
    bound = st.none() | st.binary(max_size=6)
    bounds = {"prefix_filter": draw(bound), "from_key": draw(bound), "to_key": draw(bound)}
    return draw(st.sampled_from([
        pravega.CreateTableSegment(request_id=rid, segment=segment, delegation_token=token,
                                   sorted_deprecated=draw(st.booleans()),
                                   key_length=draw(st.integers(-2**31, 2**31 - 1)),
                                   rollover_size_bytes=draw(_I64)),
        pravega.ReadTableKeys(request_id=rid, segment=segment, delegation_token=token,
                              suggested_key_count=3, continuation_token=cont, **bounds),
        pravega.ReadTableEntries(request_id=rid, segment=segment, delegation_token=token,
                                 suggested_entry_count=4, continuation_token=cont, **bounds),
        pravega.UpdateTableEntries(request_id=rid, segment=segment, delegation_token=token,
                                   entries=entries, table_segment_offset=draw(_I64)),
        pravega.RemoveTableKeys(request_id=rid, segment=segment, delegation_token=token,
                                keys=keys, table_segment_offset=-1),
        pravega.ReadTable(request_id=rid, segment=segment, delegation_token=token, keys=keys),
        pravega.TableRead(request_id=rid, segment=segment, entries=entries),
        pravega.TableKeysRead(request_id=rid, segment=segment, keys=keys,
                              continuation_token=cont),
        pravega.TableEntriesRead(request_id=rid, segment=segment, entries=entries,
                                 continuation_token=cont),
        pravega.TableEntriesDeltaRead(request_id=rid, segment=segment, entries=entries,
                                      should_clear=draw(st.booleans()), reached_end=True,
                                      last_position=draw(_I64)),
    ]))


@settings(max_examples=scaled(200), deadline=None)
@given(body=_commands())
def test_random_table_commands_round_trip_the_same_with_both_codecs(body: Any) -> None:
    frame = pravega.Frame(body=body)
    assert same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert same_decodes(pravega.Frame, wire) == "value"
    bounds = [getattr(body, name, None) for name in ("prefix_filter", "from_key", "to_key")]
    first_left_out = next((i for i, b in enumerate(bounds) if b is None), len(bounds))
    # (a bound left out before one that is not reads back as the earlier bound)
    if all(b is None for b in bounds[first_left_out:]):
        assert pravega.Frame.decode(wire) == frame


@settings(max_examples=scaled(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.integers(0, 255), blob=st.binary(max_size=70), extra=st.integers(-2**31, 2**31 - 1),
       tag=st.integers(0, 255))
def test_random_lengths_round_trip_the_same_with_both_codecs(m: ModuleType, kind: int,
                                                             blob: bytes, extra: int,
                                                             tag: int) -> None:
    lens = m.Lens(kind=kind, blob=blob, extra=extra if len(blob) > 2 and kind != 0 else None,
                  tag=tag if not blob or kind == 9 else None)
    kind_seen, _ = same(m.Frame(lens=lens).encode)  # past 55 bytes `small` overflows
    assert (kind_seen == "value") == (len(blob) <= 55)
    if kind_seen == "value":
        wire = m.Frame(lens=lens).encode()
        assert same_decodes(m.Frame, wire) == "value"
        assert m.Frame.decode(wire).lens == lens


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    entries = [pravega.TableEntry(key=_key(b"k1", 5), value=pravega.TableValue(data=b"v")),
               pravega.TableEntry(key=_key(b"", 0), value=pravega.TableValue(data=b""))]
    bodies: list[Any] = [
        pravega.UpdateTableEntries(request_id=1, segment="s", delegation_token="",
                                   entries=entries, table_segment_offset=-1),
        pravega.TableKeysRead(request_id=2, segment="t", keys=[_key(b"abc", -1)],
                              continuation_token=b"c")]
    out: list[tuple[Any, bytes]] = [(pravega.Frame, pravega.Frame(body=b).encode())
                                    for b in bodies]
    out += [(pravega.TableKey, _key(b"key", 2**63 - 1).encode()),
            (pravega.TableKey, _key(b"", 0).encode()),
            (pravega.TableValue, pravega.TableValue(data=b"val").encode()),
            (pravega.TableEntry, entries[0].encode())]
    lens = [m.Lens(kind=1, blob=b"abcd", extra=-7, tag=None),
            m.Lens(kind=9, blob=b"", extra=None, tag=3),
            m.Lens(kind=0, blob=b"xyz", extra=None, tag=None)]
    out += [(m.Frame, m.Frame(lens=v).encode()) for v in lens]
    out += [(m.Tail, m.Tail(a=1, flag=False, note="n\u00e9", blob=b"\x00" * 130).encode()),
            (pravega.Frame, pravega.Frame(body=pravega.ReadTableKeys(
                request_id=3, segment="s", delegation_token="d", suggested_key_count=1,
                continuation_token=b"", prefix_filter=b"", from_key=b"a", to_key=b"z")).encode()),
            (pravega.Frame, pravega.Frame(body=pravega.CreateTableSegment(
                request_id=4, segment="s", delegation_token="", sorted_deprecated=True,
                key_length=16, rollover_size_bytes=0)).encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=17, rounds=scaled(200))


def test_odd_table_layouts_match() -> None:
    def key(length: int, data: bytes, version: bytes = b"") -> bytes:
        return struct.pack(">ii", length, len(data)) + data + version

    def value(length: int, data: bytes) -> bytes:
        return struct.pack(">ii", length, len(data)) + data

    cases = [
        (pravega.TableKey, key(99, b"ab", bytes(8))),  # a wrong payload length: not checked
        (pravega.TableKey, key(12, b"", bytes(8))),  # a version after an empty key: left over
        (pravega.TableKey, struct.pack(">ii", 0, -1)),  # a negative data length
        (pravega.TableValue, value(-1, b"")),  # a negative payload length
        (pravega.TableValue, value(5, b"a")),  # the payload length it should have
        (pravega.TableValue, value(6, b"a") + b"\x00"),  # a byte left over in the payload
        (pravega.TableValue, value(3, b"a")),  # a payload shorter than its data
        (pravega.TableValue, struct.pack(">ii", 2**31 - 1, 1) + b"a"),  # past the end
    ]
    kinds = [same_decodes(cls, data) for cls, data in cases]
    assert kinds.count("value") == 2, kinds


# --- odd values on encode -----------------------------------------------------------------------


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    odd_keys: list[Any] = [
        pravega.TableKey(data=b"ab", key_version=None), pravega.TableKey(data=b"", key_version=1),
        pravega.TableKey(data=b"ab", key_version=2**63), pravega.TableKey(data=b"ab",
                                                                          key_version=True),
        pravega.TableKey(data=bytearray(b"ab"), key_version=1),  # type: ignore[arg-type]
        pravega.TableKey(data=None, key_version=None),  # type: ignore[arg-type]
        pravega.TableKey(data="ab", key_version=1),  # type: ignore[arg-type]
    ]
    odd_values: list[Any] = [pravega.TableValue(data=bytearray(b"x")),  # type: ignore[arg-type]
                             pravega.TableValue(data=None)]  # type: ignore[arg-type]
    for key in odd_keys:
        same(key.encode)
        same(pravega.TableEntry(key=key, value=pravega.TableValue(data=b"")).encode)
        same(pravega.Frame(body=pravega.ReadTable(request_id=1, segment="s",
                                                   delegation_token="", keys=[key])).encode)
    for val in odd_values:
        same(val.encode)
        same(pravega.TableEntry(key=_key(b"", 0), value=val).encode)
    odd_lens: list[dict[str, Any]] = [
        {"kind": 1, "blob": b"abc", "extra": None, "tag": None},
        {"kind": 0, "blob": b"abc", "extra": 1, "tag": None},
        {"kind": 9, "blob": b"abc", "extra": 2**31, "tag": 1},
        {"kind": 9, "blob": b"", "extra": None, "tag": None},
        {"kind": 9, "blob": b"x" * 56, "extra": 1, "tag": 1},  # `small` is 256
        {"kind": 9, "blob": b"x" * 255, "extra": 1, "tag": 1},
        {"kind": 9, "blob": b"x" * 256, "extra": 1, "tag": 1},  # past the u8 prefix
        {"kind": 1, "blob": bytearray(b"abc"), "extra": 1, "tag": None},
    ]
    for fields in odd_lens:
        same(m.Lens(**fields).encode)
        same(m.Frame(lens=m.Lens(**fields)).encode)


def test_values_read_when_bytes_remain_match(m: ModuleType) -> None:
    tails = [b"\x01", b"\x01\x00", b"\x01\x07", b"\x01\x01\x02ab", b"\x01\x01\x02a",
             b"\x01\x00\x00\x00", b"\x01\x00\x01\xff\x01x", b"\x01\x00\x00\x80\x01",
             b"\x01\x00\x00\x01x", b"\x01\x00\x00\x00\x00"]
    kinds = [same_decodes(m.Tail, wire) for wire in tails]
    # Cut text, bad UTF-8, a prefix past the end and a byte left over are errors.
    assert [i for i, kind in enumerate(kinds) if kind == "raised"] == [4, 6, 7, 9], kinds
    odd: list[dict[str, Any]] = [
        {"flag": 1}, {"flag": None}, {"note": None, "blob": b"x"}, {"note": b"bytes"},
        {"note": "x" * 256}, {"note": "\ud800"}, {"blob": bytearray(b"x")}, {"blob": "x"},
        {"flag": True, "note": None, "blob": None}]
    for change in odd:
        same(m.Tail(**{"a": 1, "flag": False, "note": "n", "blob": b"", **change}).encode)
    keys: dict[str, Any] = {"request_id": 1, "segment": "s", "delegation_token": "",
                            "suggested_key_count": 1, "continuation_token": b""}
    for bounds in ({"prefix_filter": None, "from_key": b"a"}, {"to_key": bytearray(b"z")},
                   {"prefix_filter": "text"}, {"from_key": b"x" * 70000}):
        same(pravega.ReadTableKeys(**keys, **bounds).encode)
        same(pravega.Frame(body=pravega.ReadTableKeys(**keys, **bounds)).encode)
    flags: list[Any] = [1, None, "yes"]
    for flag in flags:
        same(pravega.CreateTableSegment(request_id=1, segment="s", delegation_token="",
                                         sorted_deprecated=flag).encode)
