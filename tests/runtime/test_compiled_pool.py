"""What the compiled codec reuses (runtime/codec/_wirecodec.c): freed instances of a message
class kept for the next decode or construction, the members of an enum looked up by number in
a table, and the compiled constructor of classes with implicit-presence fields and maps.

The Python codec and the generated ``__init__`` stay the reference: an instance handed out again
must be indistinguishable from a fresh one (no field, unknown field or present field of the
message it was shows through), an enum number must decode to the member the Python decoder
picks, and ``Cls(**kwargs)`` must build what ``__init__`` builds.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.demo import events
from protoframe.generated.pravega import controller
from protoframe.generated.pulsar import pulsar_api as pa
from protoframe.generator.build import generate
from protoframe.generator.output import write_files
from protoframe.runtime.codec import compiled
from tests.runtime.test_compiled_constructors import (
    VALUES,
    _compare,
    _draw_kwargs,
    _fast_expected,
    _modes,
)
from tests.support.codec_agreement import same
from tests.support.examples import scaled
from tests.support.generate import import_generated

pytestmark = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)

# Implicit fields of each kind (the enum declared first, so that its member can be the
# keyword's default), maps, and a message whose enum is its enclosing class's (not bound while
# its class body runs: its keyword defaults to None, and that class keeps the generated
# __init__). Shade's numbers leave holes and go past the
# C codec's table of small numbers.
IMPLICIT_PROTO = """
syntax = "proto3";
package ctorimplicit;
enum Shade { SHADE_UNSET = 0; LIGHT = 1; DARK = 5; FAR = 300; NEGATIVE = -2; }
message Sub { int32 x = 1; }
message Implicit {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; sint64 s64 = 4; bool flag = 5;
  fixed32 f32 = 6; double dbl = 7; float flt = 8; string text = 9; bytes blob = 10;
  Shade shade = 11; Sub sub = 12; repeated int32 many = 13;
  map<string, int32> counts = 14; map<int32, Sub> subs = 15;
  optional int32 opt = 16;
}
message Outer {
  enum Tone { TONE_UNSET = 0; LOUD = 1; }
  message Late { Tone tone = 1; int32 n = 2; }
}
"""


@pytest.fixture(scope="module")
def implicit(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("ctor_implicit")
    spec_dir = tmp / "specs" / "ctorimplicit"
    spec_dir.mkdir(parents=True)
    (spec_dir / "ctorimplicit.proto").write_text(IMPLICIT_PROTO)
    out = generate(tmp / "specs", "specs", ["ctorimplicit"])
    write_files(Path(tmp) / "ctor_implicit_pkg", out.files, out.protocols)
    return import_generated(tmp, "ctorimplicit.ctorimplicit", package="ctor_implicit_pkg")


# --- the compiled constructor of implicit fields and maps ---------------------------------


def test_implicit_and_map_classes_have_a_compiled_constructor(implicit: ModuleType) -> None:
    assert compiled.has_compiled_constructor(implicit.Implicit)
    assert compiled.has_compiled_constructor(events.OrderPlaced)
    assert compiled.has_compiled_constructor(controller.StreamCut)
    # `Tone.TONE_UNSET if tone is None else tone`: not what the constructor does.
    assert not compiled.has_compiled_constructor(implicit.Outer.Late)
    assert compiled.is_compiled(implicit.Outer.Late)
    assert _modes(implicit.Implicit)["counts"] == "map"


MAP_VALUES: st.SearchStrategy[Any] = st.one_of(
    VALUES,
    st.dictionaries(st.text(max_size=2), st.integers(0, 9), max_size=2),
    st.builds(dict),
)


@settings(max_examples=scaled(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_instances_match_the_python_init(implicit: ModuleType, data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from([implicit.Implicit, implicit.Outer.Late, implicit.Sub,
                                     events.OrderPlaced, controller.StreamCut]))
    kwargs = _draw_kwargs(data, cls)
    for name, mode in _modes(cls).items():
        if mode == "map" and data.draw(st.booleans()):
            kwargs[name] = data.draw(MAP_VALUES)
    fast = _fast_expected(_modes(cls), kwargs) and compiled.has_compiled_constructor(cls)
    _compare(cls, kwargs, fast_expected=fast)


def test_a_missing_implicit_keyword_takes_its_default(implicit: ModuleType) -> None:
    cls = implicit.Implicit
    obj = cls(text="t")
    assert obj.shade is implicit.Shade.SHADE_UNSET and obj.i32 == 0 and obj.text == "t"
    assert obj.counts == {} and obj.subs == {} and obj.many == []
    assert obj.counts is not cls().counts
    given_map = {"a": 1}
    assert cls(counts=given_map).counts is given_map
    _compare(cls, {}, fast_expected=True)
    _compare(cls, {"counts": {}, "subs": None}, fast_expected=True)
    _compare(cls, {"counts": [("a", 1)]}, fast_expected=False)


def test_the_keyword_defaults_are_read_on_each_call(implicit: ModuleType) -> None:
    init = implicit.Implicit.__init__
    saved = dict(init.__kwdefaults__)
    try:
        init.__kwdefaults__ = {**saved, "i32": 7}
        _compare(implicit.Implicit, {}, fast_expected=True)
        assert implicit.Implicit().i32 == 7
        defaults = dict(saved)
        del defaults["text"]
        init.__kwdefaults__ = defaults
        # Python's call cannot bind `text`: its TypeError, from the Python path.
        _compare(implicit.Implicit, {"i32": 1}, fast_expected=False)
        _compare(implicit.Implicit, {"text": "x"}, fast_expected=True)
    finally:
        init.__kwdefaults__ = saved
    assert implicit.Implicit().i32 == 0


def test_implicit_instances_encode_alike(implicit: ModuleType) -> None:
    cls = implicit.Implicit
    obj = cls(i32=-1, i64=2, u32=3, s64=-4, flag=True, f32=6, dbl=0.5, flt=-0.0, text="é",
              blob=b"\x00", shade=implicit.Shade.FAR, sub=implicit.Sub(x=1), many=[1, 2],
              counts={"a": 1, "": 0}, subs={3: implicit.Sub()}, opt=0)
    assert same(obj.encode)[0] == "value"
    wire = obj.encode()
    assert same(lambda: cls.decode(wire))[0] == "value"


# --- enum members by number ---------------------------------------------------------------


def test_enum_numbers_decode_to_the_python_member(implicit: ModuleType) -> None:
    cls = implicit.Implicit
    for number in (0, 1, 2, 4, 5, 6, 255, 256, 299, 300, 301, -1, -2, -3, 2**31 - 1, -2**31):
        wire = cls(shade=number).encode() if number else b"\x58\x00"
        value = cls.decode(wire).shade
        with compiled.pure_python():
            python = cls.decode(wire).shade
        assert type(value) is type(python) and value == python, number
        if isinstance(python, implicit.Shade):
            assert value is python, number
    # A closed enum (proto2): a number it does not know is an unknown field, in or past the
    # table.
    ack = pa.CommandAck(consumer_id=1, ack_type=pa.CommandAck.AckType.Individual).encode()
    for number in (0, 1, 2, 3, 12, 20, 255, 256, 1000):
        wire = ack[:-1] + bytes([number & 0x7F])
        if number > 0x7F:
            wire = wire[:-1] + bytes([number & 0x7F | 0x80, number >> 7])
        assert same(lambda: pa.CommandAck.decode(wire))  # noqa: B023
        assert same(lambda: pa.CommandAck.decode(wire).unknown_fields)  # noqa: B023


# --- the instance pool ----------------------------------------------------------------------


def _wire_with_everything() -> bytes:
    """A BaseCommand with a slotted field, a sparse one and an unknown field (number 999)."""
    cmd = pa.BaseCommand(type_=pa.BaseCommand.Type.SEND, send=pa.CommandSend(
        producer_id=1, sequence_id=2, num_messages=3))
    return cmd.encode() + b"\xb8\x3e\x05"


def _state(obj: Any) -> tuple[Any, ...]:
    return (obj.type_, dict(obj._present), obj.unknown_fields, repr(obj))


def test_a_reused_decoded_instance_shows_nothing_of_the_last() -> None:
    gc.collect()
    full = pa.BaseCommand.decode(_wire_with_everything())
    assert full.unknown_fields and full.send is not None
    address = id(full)
    del full
    ping = pa.BaseCommand(type_=pa.BaseCommand.Type.PING, ping=pa.CommandPing()).encode()
    reused = pa.BaseCommand.decode(ping)
    assert id(reused) == address  # it did come from the pool
    assert gc.is_tracked(reused)
    with compiled.pure_python():
        fresh = pa.BaseCommand.decode(ping)
    assert _state(reused) == _state(fresh)
    assert reused.send is None and reused.unknown_fields == b""
    assert list(reused._present) == ["ping"]


def test_a_reused_constructed_instance_shows_nothing_of_the_last() -> None:
    gc.collect()
    first = pa.CommandSend(producer_id=1, sequence_id=2, num_messages=3, txnid_least_bits=4)
    first._unknown = b"\x08\x01"
    address = id(first)
    del first
    second = pa.CommandSend(producer_id=5, sequence_id=6)
    assert id(second) == address
    with compiled.pure_python():
        python = pa.CommandSend(producer_id=5, sequence_id=6)
    assert repr(second) == repr(python)
    assert second.num_messages == python.num_messages and second.unknown_fields == b""
    assert second.encode() == python.encode()


def test_reused_implicit_instances_start_from_the_defaults(implicit: ModuleType) -> None:
    cls = implicit.Implicit
    gc.collect()
    obj = cls(i32=5, text="x", counts={"a": 1}, many=[1])
    address = id(obj)
    del obj
    again = cls.decode(b"")
    assert id(again) == address
    assert repr(again) == repr(cls())
    assert again.counts == {} and again.many == [] and again.text == ""


def test_many_instances_freed_at_once() -> None:
    """More than the pool keeps: the rest go back to the allocator; every one decodes right."""
    wire = pa.KeyValue(key="k", value="v").encode()
    batch = [pa.KeyValue.decode(wire) for _ in range(200)]
    ids = {id(kv) for kv in batch}
    del batch
    again = [pa.KeyValue.decode(wire) for _ in range(200)]
    assert all(kv.key == "k" and kv.value == "v" and kv.unknown_fields == b"" for kv in again)
    assert len({id(kv) for kv in again}) == 200
    assert ids  # some addresses may come back, from the pool or the allocator


def test_subclass_instances_are_freed_as_before() -> None:
    class Sub(pa.KeyValue):
        __slots__ = ("extra", "__weakref__")
        extra: list[int]

    freed: list[int] = []
    obj = Sub(key="k", value="v")
    obj.extra = [1]
    ref = weakref.ref(obj, lambda _: freed.append(1))
    del obj
    assert freed == [1] and ref() is None
    kv = pa.KeyValue.decode(pa.KeyValue(key="a", value="b").encode())
    assert type(kv) is pa.KeyValue and (kv.key, kv.value) == ("a", "b")


def test_objects_held_by_a_pooled_instance_are_released() -> None:
    class Held:
        pass

    held = Held()
    ref = weakref.ref(held)
    kv = pa.KeyValue(key=held, value="v")  # type: ignore[arg-type]
    del held, kv
    assert ref() is None
