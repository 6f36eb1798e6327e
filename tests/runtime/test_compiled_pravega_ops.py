"""The operations Pravega's table entries brought to the compiled frame codec (issue #21),
against the Python methods: an integer worked out on encode as a constant plus the length of
later bytes (``len_value``: a table key's payload length), an integer there when a condition
reading the length of earlier bytes holds (``int_when``: a key's version), and a signed size
of the rest (a table value's payload length). With them a table key, a table value and an
entry are compiled, and so are the commands carrying arrays of them.

As in ``test_compiled_frame_ops.py``: the same bytes, the same values and the same errors, on
random values, every truncation, random damage and odd values; a one-file spec holds the
shapes Pravega does not (another constant, a bare length, a length that overflows its field,
conditions mixing lengths with integers).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pravega
from protoframe.runtime.codec import compiled, compiled_frames
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)

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


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))
    return "value", repr(value)


def _same(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn``'s outcome, the same with the compiled codecs as with the Python ones."""
    fast = _outcome(fn)
    with compiled.pure_python():
        python = _outcome(fn)
    assert fast == python
    return fast


def _same_decodes(cls: type, data: bytes) -> str:
    kind = _same(lambda: cls.decode(data))[0]  # type: ignore[attr-defined]
    _same(lambda: cls.decode_from(data, 0, len(data)))  # type: ignore[attr-defined]
    return kind


_TABLE_COMMANDS = (pravega.UpdateTableEntries, pravega.RemoveTableKeys, pravega.ReadTable,
                   pravega.TableRead, pravega.TableKeysRead, pravega.TableEntriesRead,
                   pravega.TableEntriesDeltaRead)


def test_the_table_structs_are_compiled(m: ModuleType) -> None:
    for cls in (m.Frame, m.Lens, pravega.TableKey, pravega.TableValue, pravega.TableEntry,
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
    return draw(st.sampled_from([
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
    assert _same(frame.encode)[0] == "value"
    wire = frame.encode()
    assert _same_decodes(pravega.Frame, wire) == "value"
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
    kind_seen, _ = _same(m.Frame(lens=lens).encode)  # past 55 bytes `small` overflows
    assert (kind_seen == "value") == (len(blob) <= 55)
    if kind_seen == "value":
        wire = m.Frame(lens=lens).encode()
        assert _same_decodes(m.Frame, wire) == "value"
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
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    for cls, wire in _samples(m):
        for cut in range(len(wire)):
            _same_decodes(cls, wire[:cut])
        _same_decodes(cls, wire + b"\x00")


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    rng = random.Random(17)
    outcomes = {"value": 0, "raised": 0}
    for cls, wire in _samples(m):
        for _ in range(scaled(200)):
            bad = bytearray(wire)
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            outcomes[_same_decodes(cls, bytes(bad))] += 1
    assert min(outcomes.values()) > 0, outcomes


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
    kinds = [_same_decodes(cls, data) for cls, data in cases]
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
        _same(key.encode)
        _same(pravega.TableEntry(key=key, value=pravega.TableValue(data=b"")).encode)
        _same(pravega.Frame(body=pravega.ReadTable(request_id=1, segment="s",
                                                   delegation_token="", keys=[key])).encode)
    for val in odd_values:
        _same(val.encode)
        _same(pravega.TableEntry(key=_key(b"", 0), value=val).encode)
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
        _same(m.Lens(**fields).encode)
        _same(m.Frame(lens=m.Lens(**fields)).encode)
