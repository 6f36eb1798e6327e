"""The rows MariaDB's greeting and the last Python-only structs brought to the compiled frame
codec, against the Python methods: a size of the rest counting more or less than the rest
(``adjust:``, ``includes: self``), arrays of integers or structs counted by a stored integer
or by an expression (``count: n``, MariaDB's ``13 if ... else ... - 8``), under a condition
(a guard) or not, and structs with no fields (TANK's Ping, Pravega's KeepAlive, AMQP's
VoidValue). Checked as ``test_compiled_tank_consume.py`` checks its rows: the same bytes,
values and errors on random values, odd values, emptied slots, every truncation and random
damage; well-formed input stays in C; no leaks; rows that do not hold together are refused.
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pravega
from protoframe.generated.tank import frames as tank
from protoframe.runtime.codec import compiled, vocabulary
from tests.support.codec_agreement import (
    bare_codec,
    check_emptied_slots,
    check_no_leaks,
    check_random_damage,
    check_stays_in_c,
    check_truncations,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import amqp, mariadb, needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: carr
doc: Arrays counted by a field or an expression, sizes with adjustments, empty structs.
byte_order: big
structs:
  Empty:
    doc: No fields.
    fields: []
  Item:
    doc: One item.
    fields:
      - {name: a, type: u16}
  Counted:
    doc: Integers and structs counted by a stored integer and by an expression.
    fields:
      - {name: n, type: u8}
      - {name: m, type: i16}
      - {name: ints, type: array, of: u16, count: n}
      - {name: items, type: array, of: Item, count: "m - 1 if m > 0 else n"}
      - {name: empties, type: array, of: Empty, count: n}
      - {name: bytes_, type: array, of: i8, count: "n + m"}
  Guarded:
    doc: Integers counted by an expression under a condition, after a size one byte short.
    fields:
      - {name: length, type: u16, size_of: rest, adjust: -1}
      - {name: flags, type: u8}
      - {name: k, type: u8}
      - {name: scramble, type: array, of: u8, count: "13 if k < 21 else k - 8",
         when: "flags & 1"}
      - {name: tail, type: u8}
  Counting:
    doc: A size of the rest counting itself.
    fields:
      - {name: length, type: u32, size_of: rest, includes: self}
      - {name: data, type: bytes, size: rest}
frame:
  name: Frame
  doc: One frame.
  fields:
    - {name: type, type: u8}
    - {name: size, type: u32, size_of: body}
    - name: body
      type: switch
      on: type
      cases: {1: Counted, 2: Guarded, 3: Counting, 4: Empty}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("carr"), "carr", SPEC, "carr_pkg")


def test_the_new_rows_are_compiled(m: ModuleType) -> None:
    for cls in (m.Empty, m.Item, m.Counted, m.Guarded, m.Counting, m.Frame, mariadb.Greeting,
                tank.Ping, tank.Frame, pravega.KeepAlive, amqp.VoidValue, amqp.Heartbeat):
        assert compiled.is_compiled(cls), cls
        assert compiled.has_compiled_constructor(cls), cls


# --- random values ------------------------------------------------------------------------------


def _greeting(rng: random.Random) -> Any:
    """A greeting whose conditional fields are there as its capabilities say, its scramble as
    long as its length says."""
    lower = rng.choice([0, 0x8000, 0xF7FF, 0xFFFF, rng.randrange(2**16)])
    upper = rng.choice([0, 0x0008, 0x81FF, rng.randrange(2**16)])
    length = rng.choice([0, 20, 21, 22, 255, rng.randrange(256)])
    count = 13 if length < 21 else length - 8
    return mariadb.Greeting(
        server_version=rng.choice(["", "11.4.2-MariaDB", "é" * rng.randrange(5)]),
        connection_id=rng.randrange(2**32), auth_plugin_data_1=rng.randbytes(8),
        capabilities_lower=lower, character_set=rng.randrange(256),
        status_flags=rng.randrange(2**16), capabilities_upper=upper,
        auth_plugin_data_length=length, mariadb_capabilities=rng.randrange(2**32),
        auth_plugin_data_2=[rng.randrange(256) for _ in range(count)] if lower & 0x8000
        else None,
        auth_plugin_name=rng.choice(["", "mysql_native_password"]) if upper & 0x8 else None)


def _bodies(m: ModuleType, rng: random.Random) -> list[Any]:
    n = rng.choice([0, 1, 2, rng.randrange(256)])
    mm = rng.choice([-2**15, -1, 0, 1, 2, rng.randrange(40)])
    count = mm - 1 if mm > 0 else n
    flags = rng.randrange(256)
    k = rng.choice([0, 20, 21, 22, 255, rng.randrange(256)])
    return [
        m.Counted(n=n, m=mm, ints=[rng.randrange(2**16) for _ in range(n)],
                  items=[m.Item(a=rng.randrange(2**16)) for _ in range(count)],
                  empties=[m.Empty() for _ in range(n)],
                  bytes_=[rng.randrange(-128, 128) for _ in range(max(0, n + mm))]),
        m.Guarded(flags=flags, k=k, tail=rng.randrange(256),
                  scramble=[rng.randrange(256) for _ in range(13 if k < 21 else k - 8)]
                  if flags & 1 else None),
        m.Counting(data=rng.randbytes(rng.randrange(40))),
        m.Empty(),
    ]


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32))
def test_random_values_round_trip_the_same_with_both_codecs(m: ModuleType, seed: int) -> None:
    rng = random.Random(seed)
    for value in [_greeting(rng), *_bodies(m, rng)]:
        kind, _ = same(value.encode)
        if kind != "value":
            assert type(value) is m.Counted  # n + m below zero: no list is that long
            continue
        wire = value.encode()
        assert same_decodes(type(value), wire) == "value"
        assert type(value).decode(wire) == value
        if type(value).__module__ == m.__name__ and type(value) is not m.Item:
            frame = m.Frame(body=value)
            assert same(frame.encode)[0] == "value"
            assert same_decodes(m.Frame, frame.encode()) == "value"


def test_the_empty_structs_of_each_protocol_agree() -> None:
    empties: tuple[Any, ...] = (tank.Ping, pravega.KeepAlive, amqp.VoidValue, amqp.Heartbeat)
    for cls in empties:
        same(lambda: cls().encode())  # noqa: B023
        for wire in (b"", b"\x00", b"\x01\x02"):
            same_decodes(cls, wire)
            same(lambda: cls.decode_from(wire, 0, len(wire)))  # noqa: B023
            same(lambda: cls.decode_from(wire, 1, len(wire)))  # noqa: B023
        same(lambda: cls(x=1))  # noqa: B023
        same(lambda: cls(1))  # noqa: B023
    ping = tank.Frame(body=tank.Ping())
    same(ping.encode)
    for to_server in (False, True):
        same(lambda: tank.Frame.decode(ping.encode(), to_server=to_server))  # noqa: B023


# --- odd values ---------------------------------------------------------------------------------


def test_odd_greetings_encode_as_the_python_codec_does() -> None:
    base = _greeting(random.Random(3))
    base.capabilities_lower |= 0x8000
    base.auth_plugin_data_length = 21
    base.auth_plugin_data_2 = list(range(13))
    changes: list[dict[str, Any]] = [
        {}, {"auth_plugin_data_2": None}, {"auth_plugin_data_2": list(range(12))},
        {"auth_plugin_data_2": list(range(14))}, {"auth_plugin_data_2": tuple(range(13))},
        {"auth_plugin_data_2": [256] + list(range(12))}, {"auth_plugin_data_2": [-1] * 13},
        {"auth_plugin_data_2": ["x"] * 13}, {"auth_plugin_data_2": [True] * 13},
        {"auth_plugin_data_2": b"x" * 13}, {"capabilities_lower": 0},
        {"capabilities_lower": 0, "auth_plugin_data_2": None},
        {"auth_plugin_data_length": 29}, {"auth_plugin_data_length": 29,
                                          "auth_plugin_data_2": list(range(21))},
        {"auth_plugin_data_length": 256}, {"auth_plugin_data_length": -1},
        {"auth_plugin_data_length": True}, {"auth_plugin_data_length": "21"},
        {"auth_plugin_data_length": 2**64}, {"capabilities_lower": 32768.0},
        {"server_version": "a" * 0xFFFFFF}, {"auth_plugin_name": "x"},
        {"capabilities_upper": 8, "auth_plugin_name": "a\x00"},
    ]
    for change in changes:
        value = _greeting(random.Random(3))
        for name in ("capabilities_lower", "auth_plugin_data_length", "auth_plugin_data_2"):
            setattr(value, name, getattr(base, name))
        for name, v in change.items():
            setattr(value, name, v)
        same(value.encode)


def test_odd_counted_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    item = m.Item(a=1)
    good: dict[str, Any] = {"n": 1, "m": 2, "ints": [1], "items": [item], "empties": [m.Empty()],
                            "bytes_": [1, 2, 3]}
    odd: list[dict[str, Any]] = [
        {}, {"n": 2}, {"n": 0}, {"n": -1}, {"n": True}, {"n": 1.0}, {"n": None}, {"n": 256},
        {"m": 1}, {"m": -1}, {"m": 2**15}, {"m": -4, "bytes_": []}, {"m": None},
        {"ints": []}, {"ints": [1, 2]}, {"ints": (1,)}, {"ints": [2**16]}, {"ints": None},
        {"items": [item, item]}, {"items": []}, {"items": [None]}, {"items": ["x"]},
        {"items": (item,)}, {"empties": []}, {"empties": [item]}, {"empties": [None]},
        {"bytes_": [128, 0, 0]}, {"bytes_": [-129, 0, 0]}, {"bytes_": [1, 2]},
    ]
    for change in odd:
        value = m.Counted(**{**good, **change})
        same(value.encode)
        same(m.Frame(body=value).encode)
    for flags, k, scramble in [(1, 0, None), (0, 0, [0] * 13), (1, 0, [0] * 12), (1, 22, [0] * 13),
                               (1, 22, [0] * 14), (1, 255, [0] * 247), (1, 0, [256] * 13),
                               (True, 0, [0] * 13), (1, -1, [0] * 13), (1, None, [0] * 13)]:
        same(m.Guarded(flags=flags, k=k, tail=0, scramble=scramble).encode)
    same(m.Guarded(flags=1, k=255, tail=0, scramble=[0] * 247).encode)
    for data in (b"", b"x" * 1000, "x", None, bytearray(b"x")):
        same(m.Counting(data=data).encode)


def test_left_out_fields_take_their_defaults_with_both_constructors() -> None:
    kwargs: dict[str, Any] = {
        "server_version": "v", "connection_id": 1, "auth_plugin_data_1": b"12345678",
        "capabilities_lower": 0, "character_set": 8, "status_flags": 2,
        "capabilities_upper": 0, "auth_plugin_data_length": 0, "mariadb_capabilities": 0}
    made = mariadb.Greeting(**kwargs)
    with compiled.pure_python():
        reference = mariadb.Greeting(**kwargs)
    assert made == reference and made.auth_plugin_data_2 is None
    same(lambda: mariadb.Greeting(**{**kwargs, "auth_plugin_name": None}))
    same(lambda: mariadb.Greeting(**{k: v for k, v in kwargs.items() if k != "character_set"}))


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[type, bytes]]:
    rng = random.Random(41)
    out: list[tuple[type, bytes]] = []
    for _ in range(4):
        greeting = _greeting(rng)
        out.append((mariadb.Greeting, greeting.encode()))
        for value in _bodies(m, rng):
            if type(value) is m.Counted and value.n + value.m < 0:
                continue
            out += [(type(value), value.encode()), (m.Frame, m.Frame(body=value).encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m), trailers=(b"\x00", b"\xff\xff"))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage([(cls, wire) for cls, wire in _samples(m) if wire], seed=42,
                        rounds=scaled(60))


def test_odd_lengths_decode_as_the_python_codec_does(m: ModuleType) -> None:
    greeting = _samples(m)[0][1]
    body = greeting[3:]
    for length in (0, 1, len(body) - 2, len(body) - 1, len(body), 0xFFFFFF):
        same_decodes(mariadb.Greeting, length.to_bytes(3, "little") + body)
    guarded = m.Guarded(flags=1, k=30, tail=7, scramble=list(range(22))).encode()
    for length in (0, 1, len(guarded) - 4, len(guarded) - 3, len(guarded) - 2, 0xFFFF):
        same_decodes(m.Guarded, length.to_bytes(2, "big") + guarded[2:])
    for length in (0, 3, 4, 5, 9, 2**32 - 1):
        same_decodes(m.Counting, length.to_bytes(4, "big") + b"data")
    for head in (b"\x00\x00\x00", b"\x02\x00\x01", b"\xff\x80\x00", b"\x01\x7f\xff",
                 b"\x03\x00\x00\x00\x01\x00\x02\x00\x03"):
        same_decodes(m.Counted, head + b"\x00" * 12)


def test_emptied_slots_encode_as_the_python_codec_does(m: ModuleType) -> None:
    check_emptied_slots([(cls, wire) for cls, wire in _samples(m) if cls is not m.Frame])


def test_well_formed_values_stay_in_c(m: ModuleType) -> None:
    check_stays_in_c(_samples(m))
    for cls, wire in ((tank.Ping, b""), (pravega.KeepAlive, b""), (amqp.VoidValue, b"")):
        check_stays_in_c([(cls, wire)])
    # A give-up does run them: the check above would see it.
    greeting = _samples(m)[0][1]
    assert python_calls(mariadb, lambda: same_decodes(mariadb.Greeting, greeting[:-1])) != []


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks(m: ModuleType) -> None:
    check_no_leaks([(cls, wire) for cls, wire in _samples(m)][:24])


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    ops = vocabulary.OPS
    x = vocabulary.EXPR

    def row(op: str, name: str | None, width: int = 0, index: int = -1, number: int = 0,
            attr: Any = None) -> tuple[Any, ...]:
        return (ops[op], name, width, 0, index, number, None, attr, None, None)

    with pytest.raises(ValueError, match="32-bit integer"):
        bare_codec(row("size_rest", None, 4, number=2**40), row("int", "key", 1))
    bare_codec(row("size_rest", None, 4, number=2**64 - 1), row("int", "key", 1))  # -1 holds
    count = ((x["field"], 0),)
    with pytest.raises(ValueError, match="no count_of row"):
        bare_codec(row("const", None, 1), row("int_array", "key", 1, index=0, attr=count))
    with pytest.raises(ValueError, match="earlier integer rows only"):
        bare_codec(row("const", None, 1), row("int_array", "key", 1, attr=count))
    with pytest.raises(ValueError, match="earlier integer rows only"):
        bare_codec(row("int_array", "key", 1, attr=((x["field"], 0),)))
    with pytest.raises(ValueError, match="earlier integer rows only"):
        bare_codec(row("int_array", "key", 1, attr=((x["has"], 0),)))
    with pytest.raises(ValueError, match="does not leave its values"):
        bare_codec(row("int_array", "key", 1, attr=((x["const"], 1), (x["const"], 2))))
    bare_codec(row("int_array", "key", 1, attr=((x["const"], 3),)))
