"""proto3 semantics of generated code, checked against the official runtime."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated
from tests.support.paths import DATA
from tests.support.proto_values import build_official, build_ours, class_index, message_values


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("proto3")
    generate_package(tmp, "proto3")
    return import_generated(tmp, "proto3.sample3")


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    out = tmp_path_factory.mktemp("proto3_official")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{DATA / 'proto3'}",
                    f"--python_out={out}", str(DATA / "proto3" / "sample3.proto")], check=True)
    spec = importlib.util.spec_from_file_location("sample3_pb2", Path(out) / "sample3_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_implicit_presence_zero_values_are_not_written(ours: Any) -> None:
    assert ours.Scalars().encode() == b""
    assert ours.Scalars(i32=0, s="", b=False).encode() == b""
    assert ours.Scalars(i32=-1).encode() == bytes.fromhex("28ffffffffffffffffff01")
    assert ours.Scalars(d=-0.0).encode() == b"\x09" + b"\x00" * 7 + b"\x80"


def test_proto3_optional_has_presence(ours: Any, theirs: Any) -> None:
    h = ours.Holder(maybe=0)
    assert h.has_maybe() and h.encode() == theirs.Holder(maybe=0).SerializeToString()
    assert not ours.Holder().has_maybe() and ours.Holder().maybe == 0


def test_open_enum_keeps_unknown_numbers(ours: Any, theirs: Any) -> None:
    data = bytes.fromhex("8001 07")  # colour = 7, not a declared member
    decoded = ours.Scalars.decode(data)
    assert decoded.colour == 7 and decoded.unknown_fields == b""
    assert decoded.encode() == theirs.Scalars.FromString(data).SerializeToString()


def test_repeated_scalars_are_packed_by_default(ours: Any, theirs: Any) -> None:
    h = ours.Holder(numbers=[1, 2, 300], colours=[1, 2])
    assert h.encode() == theirs.Holder(numbers=[1, 2, 300], colours=[1, 2]).SerializeToString()
    unpacked = bytes.fromhex("1001 1002 10ac02")
    assert ours.Holder.decode(unpacked).numbers == [1, 2, 300]


def test_maps_round_trip(ours: Any, theirs: Any) -> None:
    official = theirs.Holder()
    official.counts["a"] = 1
    official.counts["b"] = -5
    official.inners[3].name = "x"
    decoded = ours.Holder.decode(official.SerializeToString())
    assert decoded.counts == {"a": 1, "b": -5}
    assert decoded.inners[3].name == "x"
    assert theirs.Holder.FromString(decoded.encode()) == official


def test_oneof_members_exclude_each_other(ours: Any, theirs: Any) -> None:
    h = ours.Holder(text="hello")
    assert h.which_choice() == "text"
    h.boxed = ours.Inner(name="n")
    assert h.which_choice() == "boxed" and not h.has_text()
    both = theirs.Holder(text="t").SerializeToString() + \
        theirs.Holder(boxed=theirs.Inner(name="b")).SerializeToString()
    assert ours.Holder.decode(both).which_choice() == "boxed"


def test_names_are_renamed_by_the_documented_rule(ours: Any) -> None:
    h = ours.Holder(from_=1, type_="t", encode_=True)
    assert ours.Holder.decode(h.encode()) == h
    assert [p for _, _, p in ours.Holder.FIELD_NAMES][-3:] == ["from", "type", "encode"]


@settings(max_examples=scaled(60), deadline=None)
@given(data=st.data())
def test_scalars_match_official_runtime(ours: Any, theirs: Any, data: st.DataObject) -> None:
    tree = data.draw(message_values(theirs.Scalars.DESCRIPTOR))
    official = build_official(theirs.Scalars, tree)
    mine = build_ours(class_index(sys.modules[ours.__name__]), theirs.Scalars.DESCRIPTOR, tree)
    assert mine.encode() == official.SerializeToString()
    assert theirs.Scalars.FromString(mine.encode()) == official
    assert ours.Scalars.decode(official.SerializeToString()).encode() == mine.encode()


@settings(max_examples=scaled(60), deadline=None)
@given(data=st.data())
def test_holder_matches_official_runtime(ours: Any, theirs: Any, data: st.DataObject) -> None:
    tree = data.draw(message_values(theirs.Holder.DESCRIPTOR))
    official = build_official(theirs.Holder, tree)
    mine = build_ours(class_index(sys.modules[ours.__name__]), theirs.Holder.DESCRIPTOR, tree)
    assert mine.encode() == official.SerializeToString()
    assert theirs.Holder.FromString(mine.encode()) == official


def test_out_of_range_fixed_values_raise_typed_errors_and_floats_saturate(
    ours: Any, theirs: Any
) -> None:
    from protoframe.runtime.errors import ValueOutOfRangeError

    for bad in (dict(fx32=-1), dict(sfx32=2**31), dict(fx64=2**64), dict(sfx64=-(2**63) - 1)):
        with pytest.raises(ValueOutOfRangeError, match="sample.v3.Scalars"):
            ours.Scalars(**bad).encode()
    with pytest.raises(ValueOutOfRangeError):
        ours.Holder(inner=ours.Inner(), numbers=[2**31]).encode()
    # Like upb, a float field stores a value beyond float32's range as infinity.
    assert ours.Scalars(f=1e300).encode() == theirs.Scalars(f=1e300).SerializeToString()
    assert ours.Scalars(f=-1e300).encode() == theirs.Scalars(f=-1e300).SerializeToString()
