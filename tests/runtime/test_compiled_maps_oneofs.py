"""The compiled codec on maps, oneofs and proto3 implicit presence (tests/data/mapsoneofs)
against the generated Python codec, and both against the official runtime (upb).

As in tests/runtime/test_compiled.py, the Python codec is the reference: the same bytes, the
same decoded values (unknown fields included) and the same errors, valid input or damaged.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec import compiled
from protoframe.runtime.errors import DecodeError
from tests.runtime.test_compiled import _check_round_trip, _damage, _outcome, _python
from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated
from tests.support.paths import DATA
from tests.support.proto_values import (
    build_ours,
    class_index,
    fill_official,
    message_values,
    scalar_strategy,
)

pytestmark = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)

FD = FieldDescriptor
NAMES = ("Maps", "Choice", "Plain", "Closed")


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mapsoneofs")
    generate_package(tmp, "mapsoneofs", package="mapsoneofs_pkg")
    index = class_index(import_generated(tmp, "mapsoneofs.maps3", package="mapsoneofs_pkg"))
    index.update(class_index(importlib.import_module("mapsoneofs_pkg.mapsoneofs.maps2")))
    return {full.rsplit(".", 1)[-1]: cls for full, cls in index.items()}


def _official_module(tmp: Path, name: str) -> ModuleType:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{DATA / 'mapsoneofs'}",
                    f"--python_out={tmp}", str(DATA / "mapsoneofs" / f"{name}.proto")],
                   check=True, timeout=120)
    spec = importlib.util.spec_from_file_location(f"{name}_pb2", tmp / f"{name}_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mapsoneofs_official")
    m3, m2 = _official_module(tmp, "maps3"), _official_module(tmp, "maps2")
    return {name: getattr(m3 if hasattr(m3, name) else m2, name) for name in NAMES}


def _maps(desc: Descriptor) -> st.SearchStrategy[dict[str, Any]]:
    """Values of ``desc``'s map fields (proto_values leaves maps out): key -> value, a
    value tree for message values."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in desc.fields:
        if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name[
                "value"]
            values = (message_values(value.message_type, 1) if value.type == FD.TYPE_MESSAGE
                      else scalar_strategy(value))
            fields[f.name] = st.dictionaries(scalar_strategy(key), values, max_size=4)
    return st.fixed_dictionaries({}, optional=fields)


def _trees(desc: Descriptor) -> st.SearchStrategy[tuple[dict[str, Any], dict[str, Any]]]:
    return st.tuples(message_values(desc), _maps(desc))


def _build(ours: dict[str, Any], official: dict[str, Any], name: str,
           trees: tuple[dict[str, Any], dict[str, Any]]) -> tuple[Any, Any]:
    tree, maps = trees
    desc = official[name].DESCRIPTOR
    index = {cls.FULL_NAME: cls for cls in ours.values()}
    msg = build_ours(index, desc, tree)
    theirs = official[name]()
    fill_official(theirs, tree)
    py_names = {proto: py for py, _, proto in type(msg).FIELD_NAMES}
    for field, entries in maps.items():
        value_desc = desc.fields_by_name[field].message_type.fields_by_name["value"]
        target = getattr(theirs, field)
        ours_map: dict[Any, Any] = {}
        for k, v in entries.items():
            if value_desc.type == FD.TYPE_MESSAGE:
                fill_official(target[k], v)
                ours_map[k] = build_ours(index, value_desc.message_type, v)
            else:
                target[k] = v
                ours_map[k] = v
        setattr(msg, py_names[field], ours_map)
    return msg, theirs


def _generated_frames(fn: Any, module_file: str) -> int:
    """How many Python frames of the generated module ``fn()`` runs: none when the compiled
    codec takes it all, one or more when it gives the message to the Python codec."""
    seen = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal seen
        if event == "call" and frame.f_code.co_filename == module_file:
            seen += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_maps_oneofs_and_implicit_presence_are_compiled(ours: dict[str, Any]) -> None:
    for name in (*NAMES, "Leaf"):
        assert compiled.is_compiled(ours[name]), name


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_round_trips_match_the_python_codec_and_upb(
    ours: dict[str, Any], official: dict[str, Any], name: str, data: st.DataObject,
) -> None:
    msg, theirs = _build(ours, official, name, data.draw(_trees(official[name].DESCRIPTOR)))
    _check_round_trip(msg)
    wire = msg.encode()
    # Valid values never fall back: the compiled codec did the work the checks above compared.
    module_file = sys.modules[type(msg).__module__].__file__
    assert module_file is not None
    assert _generated_frames(msg.encode, module_file) == 0
    assert _generated_frames(lambda: type(msg).decode(wire), module_file) == 0
    # Map entries come in the dict's order, so compare messages, not bytes, for maps.
    parsed = official[name]()
    parsed.ParseFromString(wire)
    assert parsed == theirs
    if not any(f.message_type is not None and f.message_type.GetOptions().map_entry
               for f in theirs.DESCRIPTOR.fields):
        assert theirs.SerializeToString(deterministic=True) == wire
    assert type(msg).decode(theirs.SerializeToString()) == msg


def test_implicit_defaults_are_not_written_and_read_back(ours: dict[str, Any]) -> None:
    plain = ours["Plain"]
    assert plain().encode() == b""
    zero = plain.decode(b"")
    assert _outcome(lambda: zero) == _python(lambda: plain.decode(b""))
    assert (zero.d, zero.s, zero.raw, zero.b, zero.i64, zero.tint.value) == (
        0.0, "", b"", False, 0, 0)
    # A negative zero is not the default on the wire.
    assert plain(d=-0.0).encode() == b"\x09" + bytes(7) + b"\x80"
    _check_round_trip(plain(d=-0.0, f=-0.0, s="x", far=5, maybe=0))
    # Zeros on the wire decode to the defaults and are not written again.
    assert plain.decode(b"\x18\x00\x4a\x00").encode() == b""
    # The frame count the round trips rely on sees the Python codec when it runs.
    module_file = sys.modules[plain.__module__].__file__
    assert module_file is not None
    assert _generated_frames(plain(s="x").encode, module_file) == 0
    with compiled.pure_python():
        assert _generated_frames(plain(s="x").encode, module_file) > 0


def _same_decode(cls: Any, data: bytes) -> tuple[str, Any]:
    got = _outcome(lambda: cls.decode(data))
    assert got == _python(lambda: cls.decode(data)), data
    return got


def test_the_last_oneof_member_on_the_wire_wins(ours: dict[str, Any]) -> None:
    choice, closed = ours["Choice"], ours["Closed"]
    data = b"\x12\x02hi\x18\x05\x39" + bytes(8) + b"\x40\x01"
    got = _same_decode(choice, data)
    assert got[0] == "value"
    msg = choice.decode(data)
    assert (msg.which_pick(), msg.number, msg.which_other(), msg.flag) == ("number", 5, "flag",
                                                                          True)
    assert not msg.has_text() and not msg.has_ratio()
    msg = choice.decode(b"\x18\x05\x22\x02\x0a\x00\x12\x00")
    assert (msg.which_pick(), msg.text) == ("text", "")
    assert _same_decode(choice, b"\x18\x05\x22\x02\x0a\x00\x12\x00") == got[:1] + (
        _outcome(lambda: msg)[1],)
    # A closed-enum member of unknown number is kept as an unknown field and still clears
    # the member before it.
    got = _same_decode(closed, b"\x1a\x01x\x10\x07")
    assert got[0] == "value"
    msg = closed.decode(b"\x1a\x01x\x10\x07")
    assert (msg.which_which(), msg.unknown_fields) == (None, b"\x10\x07")


@pytest.mark.parametrize("data", [
    b"\x0a\x04\x08\x01\x12\x00",            # by_int32 {1: ""}
    b"\x0a\x00",                            # an empty entry: both defaults
    b"\x0a\x02\x08\x01",                    # no value
    b"\x0a\x02\x12\x00",                    # no key
    b"\x0a\x06\x12\x01a\x08\x02",           # value before key
    b"\x0a\x07\x08\x01\x18\x05\x12\x01a",   # an unknown field inside the entry
    b"\x0a\x05\x88\x00\x12\x01a",           # a key tag of two bytes: skipped, not the key
    b"\x0a\x04\x08\x01\x08\x02" + b"\x0a\x02\x08\x02",  # the last key wins; twice the same
    b"\x0a\x03\x0d\x01\x02",                # the key with a wrong wire type, cut short
    b"\x0a\x06\x0d\x01\x02\x03\x04\x00",    # the key with a wrong wire type
    b"\x0a\x03\x08\x01",                    # the entry longer than the message
    b"\x0a\x02\x08\x80",                    # a varint running past the entry
    b"\x0a\x03\x08\x80\x01",                # a varint running past the entry, inside bytes
    b"\x0a\x04\x12\x02\xc3\x28",            # bad UTF-8 in a value
    b"\x62\x04\x0a\x02\xc3\x28",            # bad UTF-8 in a key
    b"\x62\x05\x0a\x01a\x10\x09",           # an enum value no member has: kept (open enum)
    b"\x6a\x07\x0a\x01k\x12\x02\x10\x03",   # a message value
    b"\x6a\x03\x0a\x01k",                   # a message value missing
    b"\x6a\x05\x0a\x01k\x12\x05",           # a message value running past the entry
    b"\x0a\x04\x08\x01\x13\x14",            # a group inside the entry
    b"\x0a\x03\x08\x01\x00",                # field number 0 inside the entry
    b"\x0b\x0c",                            # the map's number as a group
    b"\x08\x01",                            # the map's number with a varint: unknown
    b"\x72\x05\x08\x01\x11\x01\x02",        # a fixed64 value cut short
    b"\x5a\x04\x08\x02\x12\x00",            # by_bool with key 2
])
def test_map_entries_decode_or_fail_alike(ours: dict[str, Any], data: bytes) -> None:
    _same_decode(ours["Maps"], data)


def test_closed_enum_map_values_of_unknown_number_keep_the_default(
    ours: dict[str, Any],
) -> None:
    closed = ours["Closed"]
    got = _same_decode(closed, b"\x0a\x05\x0a\x01a\x10\x07" + b"\x0a\x05\x0a\x01b\x10\x02")
    assert got[0] == "value"
    with compiled.pure_python():
        python = closed.decode(b"\x0a\x05\x0a\x01a\x10\x07")
    assert python.lv == {"a": closed.decode(b"\x0a\x05\x0a\x01a\x10\x00").lv["a"]}
    assert python.unknown_fields == b""


@pytest.mark.parametrize("build", [
    lambda c: c["Maps"](by_int32={1: None}),
    lambda c: c["Maps"](by_int32={"x": "y"}),
    lambda c: c["Maps"](by_bool={2: "x"}),
    lambda c: c["Maps"](by_int32={2**40: "x"}),
    lambda c: c["Maps"](leaves={"a": c["Leaf"](label="x")}, name="n"),
    lambda c: c["Maps"](leaves={"a": None}),
    lambda c: c["Maps"](by_uint64={1: 1}),
    lambda c: c["Plain"](d=None),
    lambda c: c["Plain"](s=None, i32=None),
    lambda c: c["Plain"](i32=2**40),
    lambda c: c["Plain"](raw=bytearray(b"ab")),
    lambda c: c["Plain"](f=1e300, d=float("nan")),
    lambda c: c["Choice"](text="a", number=3),
    lambda c: c["Choice"](tint=7, flag=False),
])
def test_odd_values_encode_or_fail_alike(ours: dict[str, Any], build: Any) -> None:
    msg = build(ours)
    assert _outcome(msg.encode) == _python(msg.encode)


def test_a_map_that_is_none_or_not_a_dict_fails_alike(ours: dict[str, Any]) -> None:
    for value in (None, [(1, "a")], {1: "a"}.items()):
        msg = ours["Maps"]()
        msg.by_int32 = value
        assert _outcome(msg.encode) == _python(msg.encode)


def test_damaged_bytes_decode_or_fail_alike(
    ours: dict[str, Any], official: dict[str, Any],
) -> None:
    samples: list[tuple[Any, bytes]] = []
    for name in NAMES:

        @settings(max_examples=40, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(trees=_trees(official[name].DESCRIPTOR))
        def collect(trees: tuple[dict[str, Any], dict[str, Any]]) -> None:
            msg, _ = _build(ours, official, name, trees)  # noqa: B023 - run before name moves
            samples.append((type(msg), msg.encode()))

        collect()
    rng = random.Random(23)
    rounds, errors = scaled(3000), 0
    for _ in range(rounds):
        cls, wire = rng.choice(samples)
        bad = _damage(wire, rng)
        got = _same_decode(cls, bad)
        if got[0] == "raised":
            assert issubclass(got[1][0], DecodeError), got
            errors += 1
    assert rounds // 10 < errors < rounds * 9 // 10


def test_decoding_and_encoding_keep_reference_counts(ours: dict[str, Any]) -> None:
    maps, choice, plain = ours["Maps"], ours["Choice"], ours["Plain"]
    tint = type(plain().tint).PALE
    default_tint = plain().tint
    leaf = ours["Leaf"]
    wires = [
        maps(hues={"a": tint, "b": tint}, leaves={"x": leaf(label="l")}, by_bool={True: "t"},
             name="n").encode(),
        maps.decode(b"\x62\x00\x6a\x03\x0a\x01k").encode(),  # defaults, a fresh message value
        choice.decode(b"\x12\x02hi\x18\x05\x22\x00\x28\x01").encode(),  # members cleared
        plain(tint=tint, s="s", d=-0.0).encode(),
        b"",
    ]
    damaged = [b"\x0a\x04\x12\x02\xc3\x28", b"\x62\x05\x0a\x01a\x10", b"\x22\x02\x0a"]

    def counts() -> tuple[int, ...]:
        gc.collect()
        return (sys.getrefcount(tint), sys.getrefcount(default_tint), sys.getrefcount(leaf),
                sys.getrefcount(maps), sys.getrefcount(choice), sys.getrefcount(plain))

    def run(times: int) -> int:
        failed = 0
        for _ in range(times):
            for cls in (maps, choice, plain):
                for wire in wires:
                    with contextlib.suppress(DecodeError):
                        cls.decode(wire).encode()
                for bad in damaged:
                    try:
                        cls.decode(bad)
                    except DecodeError:
                        failed += 1
        return failed

    run(50)
    before = counts()
    assert run(500) > 0
    assert counts() == before
