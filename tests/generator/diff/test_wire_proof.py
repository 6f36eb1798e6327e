"""What the diff calls wire-compatible is, on the wire; what it calls wire-breaking is not.

A small protocol (a .proto and a frame spec) is generated before and after each edit, into
temporary packages; values (from hypothesis) encoded by one version's generated code are
decoded by the other's. For compatible edits both directions read back the same values; for
breaking ones the other version misreads them or refuses the bytes.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.diff.compare import compare_protocols
from protoframe.generator.diff.rules import BREAKING, COMPATIBLE
from protoframe.runtime.errors import BadMagicError, DecodeError
from tests.generator.diff.support import load

PROTO = """syntax = "proto2";
package wiretest;

message Sample {
    optional int32 count = 1;
    optional string label = 2;
    optional sint32 delta = 3;
    optional uint64 ttl_seconds = 4;
    optional fixed32 code = 5;
}
"""
SPEC = """protocol: wiretest
doc: A frame holding a body.
proto: [wire.proto]
byte_order: big
structs:
  Body:
    trailing: ignore
    fields:
      - {name: a, type: u32}
frame:
  name: Frame
  fields:
    - {name: magic, type: u16, const: 0x0e01}
    - {name: size, type: u32, size_of: body}
    - {name: body, type: struct, struct: Body, size: size}
"""


@dataclass(frozen=True)
class Variant:
    rule: str
    wire: str
    file: str  # "wire.proto" or "wire.yaml"
    old: str
    new: str


VARIANTS = {
    "rename": Variant("FIELD_RENAMED", COMPATIBLE, "wire.proto", "ttl_seconds = 4",
                      "ttl_millis = 4"),
    "int32-int64": Variant("FIELD_TYPE_CHANGED", COMPATIBLE, "wire.proto", "int32 count",
                           "int64 count"),
    "string-bytes": Variant("FIELD_TYPE_CHANGED", COMPATIBLE, "wire.proto", "string label",
                            "bytes label"),
    "sint32-sint64": Variant("FIELD_TYPE_CHANGED", COMPATIBLE, "wire.proto", "sint32 delta",
                             "sint64 delta"),
    "fixed32-sfixed32": Variant("FIELD_TYPE_CHANGED", COMPATIBLE, "wire.proto", "fixed32 code",
                                "sfixed32 code"),
    "appended-when-remaining": Variant(
        "FRAME_FIELD_ADDED", COMPATIBLE, "wire.yaml", "      - {name: a, type: u32}\n",
        "      - {name: a, type: u32}\n"
        "      - {name: b, type: i64, when_remaining: true, default: -1}\n"),
    "int32-sint32": Variant("FIELD_TYPE_CHANGED", BREAKING, "wire.proto", "int32 count",
                            "sint32 count"),
    "renumbered": Variant("FIELD_NUMBER_CHANGED", BREAKING, "wire.proto", "label = 2",
                          "label = 6"),
    "magic": Variant("FRAME_CONST_CHANGED", BREAKING, "wire.yaml", "const: 0x0e01",
                     "const: 0x0e02"),
    "width": Variant("FRAME_FIELD_WIDTH_CHANGED", BREAKING, "wire.yaml",
                     "{name: size, type: u32", "{name: size, type: u16"),
}


@dataclass
class Versions:
    old: ModuleType  # the generated wire module (messages)
    new: ModuleType
    old_frames: ModuleType
    new_frames: ModuleType


def _write_protocol(root: Path, proto: str, spec: str) -> Path:
    target = root / "specs" / "wiretest"
    target.mkdir(parents=True)
    (target / "wire.proto").write_text(proto, encoding="utf-8")
    (target / "wire.yaml").write_text(spec, encoding="utf-8")
    return root / "specs"


def _generate(spec_dir: Path, package_root: Path, package: str) -> tuple[ModuleType, ModuleType]:
    output = generate(spec_dir, "specs", ["wiretest"], frozenset({"bindings", "frames"}))
    target = package_root / package
    target.mkdir(parents=True)
    (target / "__init__.py").write_text("", encoding="utf-8")
    for rel, text in output.files.items():
        if rel.startswith("wiretest/"):
            (target / rel.removeprefix("wiretest/")).write_text(text, encoding="utf-8")
    return (importlib.import_module(f"{package}.wire"),
            importlib.import_module(f"{package}.frames"))


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Versions]]:
    """Every variant's old and new generated code, classified by the diff first."""
    packages = tmp_path_factory.mktemp("packages")
    sys.path.insert(0, str(packages))
    base = _write_protocol(tmp_path_factory.mktemp("base"), PROTO, SPEC)
    old_snap = load(base, "wiretest")
    old, old_frames = _generate(base, packages, "wiretest_base")
    out = {}
    try:
        for name, v in VARIANTS.items():
            proto = PROTO.replace(v.old, v.new) if v.file == "wire.proto" else PROTO
            spec = SPEC.replace(v.old, v.new) if v.file == "wire.yaml" else SPEC
            assert (proto, spec) != (PROTO, SPEC), name
            spec_dir = _write_protocol(tmp_path_factory.mktemp(name), proto, spec)
            changes = compare_protocols(old_snap, load(spec_dir, "wiretest"))
            assert [(c.rule, c.wire) for c in changes] == [(v.rule, v.wire)], name
            new, new_frames = _generate(spec_dir, packages,
                                        f"wiretest_{name.replace('-', '_')}")
            out[name] = Versions(old, new, old_frames, new_frames)
        yield out
    finally:
        sys.path.remove(str(packages))


Check = Callable[[Versions, Any], None]

int32s = st.integers(-(2**31), 2**31 - 1)


def _both_ways(field_old: str, field_new: str, convert: Callable[[Any], Any] = lambda x: x,
               back: Callable[[Any], Any] = lambda x: x) -> Check:
    def check(v: Versions, value: Any) -> None:
        data = v.old.Sample(**{field_old: value}).encode()
        assert getattr(v.new.Sample.decode(data), field_new) == convert(value)
        data = v.new.Sample(**{field_new: convert(value)}).encode()
        assert getattr(v.old.Sample.decode(data), field_old) == back(convert(value))
    return check


COMPATIBLE_CASES: dict[str, tuple[st.SearchStrategy[Any], Check]] = {
    "rename": (st.integers(0, 2**64 - 1), _both_ways("ttl_seconds", "ttl_millis")),
    "int32-int64": (int32s, _both_ways("count", "count")),
    "string-bytes": (st.text(), _both_ways("label", "label", str.encode, bytes.decode)),
    "sint32-sint64": (int32s, _both_ways("delta", "delta")),
    "fixed32-sfixed32": (st.integers(0, 2**31 - 1), _both_ways("code", "code")),
}


@pytest.mark.parametrize("name", sorted(COMPATIBLE_CASES))
def test_wire_compatible_protobuf_edits_read_both_ways(versions: dict[str, Versions],
                                                       name: str) -> None:
    values, check = COMPATIBLE_CASES[name]

    @settings(max_examples=60, deadline=None)
    @given(values)
    def run(value: Any) -> None:
        check(versions[name], value)

    run()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(-(2**63), 2**63 - 1))
def test_a_field_appended_when_bytes_remain_reads_both_ways(
        versions: dict[str, Versions], a: int, b: int) -> None:
    v = versions["appended-when-remaining"]
    old_bytes = v.old_frames.Frame(body=v.old_frames.Body(a=a)).encode()
    decoded = v.new_frames.Frame.decode(old_bytes)
    assert (decoded.body.a, decoded.body.b) == (a, -1)
    new_bytes = v.new_frames.Frame(body=v.new_frames.Body(a=a, b=b)).encode()
    assert v.old_frames.Frame.decode(new_bytes).body.a == a


@settings(max_examples=60, deadline=None)
@given(int32s.filter(lambda n: n != 0))
def test_int32_to_sint32_misreads(versions: dict[str, Versions], value: int) -> None:
    v = versions["int32-sint32"]
    assert v.new.Sample.decode(v.old.Sample(count=value).encode()).count != value
    assert v.old.Sample.decode(v.new.Sample(count=value).encode()).count != value


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1))
def test_a_renumbered_field_is_lost(versions: dict[str, Versions], text: str) -> None:
    v = versions["renumbered"]
    assert not v.new.Sample.decode(v.old.Sample(label=text).encode()).has_label()
    assert not v.old.Sample.decode(v.new.Sample(label=text).encode()).has_label()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_changed_magic_is_refused(versions: dict[str, Versions], a: int) -> None:
    v = versions["magic"]
    with pytest.raises(BadMagicError):
        v.new_frames.Frame.decode(v.old_frames.Frame(body=v.old_frames.Body(a=a)).encode())
    with pytest.raises(BadMagicError):
        v.old_frames.Frame.decode(v.new_frames.Frame(body=v.new_frames.Body(a=a)).encode())


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_narrower_size_field_is_misread_or_refused(versions: dict[str, Versions],
                                                     a: int) -> None:
    v = versions["width"]
    data = v.old_frames.Frame(body=v.old_frames.Body(a=a)).encode()
    try:
        decoded = v.new_frames.Frame.decode(data)
    except DecodeError:
        return  # refused: the bytes after the narrower size field do not add up
    assert decoded.body.a != a
