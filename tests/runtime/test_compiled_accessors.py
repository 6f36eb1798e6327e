"""The compiled accessors (runtime/codec/_wirecodec.c's Accessor) against the generated
properties they stand in for: an optional field's (the slot's value, or the field's default when
it is None) and a sparse field's (its entry in the present dict, or None).

The property is the reference: on every instance, of the class or of a subclass, with the field
set, unset, or its storage tampered with, reading, writing and deleting through the accessor
must give what the property gives (the same object, the same state afterwards, the same error
and text). Looked up on the class, the accessor is the property itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from protoframe.generated.pulsar import pulsar_api as pa
from protoframe.runtime.codec import compiled
from tests.support.generate import generate_package, import_generated
from tests.support.proto_values import class_index

pytestmark = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built (no C compiler when installing?) or "
    "PROTOFRAME_PURE_PYTHON is set; the generated properties run everywhere",
)

PULSAR = sorted(class_index(pa).items())


class Token:
    """A value equal only to itself, so that where it ends up is unambiguous."""


def _accessors(cls: type) -> list[tuple[str, property, Any]]:
    return compiled._accessors.get(cls, [])


def _outcome(action: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("value", action())
    except Exception as exc:  # noqa: BLE001 (the error itself is compared)
        return ("raised", (type(exc), str(exc)))


def _state(obj: Any) -> tuple[Any, ...]:
    """Every slot of obj (the objects themselves; a dict's items), or a marker for unset."""
    out: list[Any] = []
    for klass in type(obj).__mro__:
        for name in klass.__dict__.get("__slots__", ()):
            value = getattr(obj, name, "<unset>") if hasattr(obj, name) else "<unset>"
            out.append((name, tuple(value.items()) if isinstance(value, dict) else value))
    return tuple(out)


def test_optional_and_sparse_properties_have_accessors() -> None:
    accessor_type = type(pa.BaseCommand.__dict__["send"])
    assert accessor_type.__name__ == "Accessor"
    cases: list[tuple[type, str]] = [
        (pa.BaseCommand, "send"), (pa.BaseCommand, "ack"), (pa.CommandSend, "num_messages"),
        (pa.MessageMetadata, "compression"), (pa.SingleMessageMetadata, "partition_key"),
        (pa.MessageIdData, "partition")]
    for cls, name in cases:
        assert type(cls.__dict__[name]) is accessor_type, (cls, name)
    # Every optional field behind a property and every sparse field of Pulsar's messages.
    count = sum(len(_accessors(cls)) for _, cls in PULSAR)
    expected = 0
    for _, cls in PULSAR:
        layout = compiled.layout(cls) or ()
        names = {storage: name for name, storage, _ in getattr(cls, "FIELD_NAMES", ())}
        for _, _, mode, storage, *_ in layout:
            if (mode == "optional" and names[storage] != storage) or mode == "sparse":
                expected += 1
    assert count == expected > 250


def test_class_access_gives_the_property() -> None:
    for _, cls in PULSAR:
        for name, prop, accessor in _accessors(cls):
            assert getattr(cls, name) is prop
            assert accessor.__wrapped__ is prop
            assert accessor.__get__(None, cls) is prop


@pytest.mark.parametrize("cls", [cls for _, cls in PULSAR if _accessors(cls)],
                         ids=lambda cls: cls.__name__)
def test_reads_and_writes_match_the_property(cls: type) -> None:
    obj: Any = object.__new__(cls)
    for name, storage, _ in cls.FIELD_NAMES:  # type: ignore[attr-defined]
        if name == storage and storage not in {a[0] for a in _accessors(cls)}:
            setattr(obj, storage, None)
    if "_present" in getattr(cls, "__slots__", ()):
        obj._present = {}
    for name, prop, accessor in _accessors(cls):
        _check_against_the_property(obj, cls, name, prop, accessor)


def _check_against_the_property(obj: Any, cls: type, name: str, prop: property,
                                accessor: Any) -> None:
    # Unset, then set to a value of no particular type, then unset again.
    for value in (None, Token(), None, 0, ""):
        fast = _outcome(lambda: accessor.__set__(obj, value))  # noqa: B023 (called at once)
        after_fast = _state(obj)
        read_fast = _outcome(lambda: getattr(obj, name))
        slow = _outcome(lambda: prop.__set__(obj, value))  # noqa: B023 (called at once)
        after_slow = _state(obj)
        read_slow = _outcome(lambda: prop.__get__(obj, cls))
        assert fast == slow and after_fast == after_slow, (name, value)
        assert read_fast == read_slow and read_fast[0] == "value", (name, value)
        if read_fast[1] is not None and value is not None:
            assert read_fast[1] is value
    # Deleting is the property's business (it has no deleter).
    assert _outcome(lambda: accessor.__delete__(obj)) == _outcome(
        lambda: prop.__delete__(obj))


def test_defaults_are_the_properties() -> None:
    send = pa.CommandSend(producer_id=1, sequence_id=2)
    assert send.num_messages == 1 and send.is_chunk is False and send.txnid_least_bits == 0
    md = pa.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    assert md.compression is pa.CompressionType.NONE
    with compiled.pure_python():
        assert type(pa.CommandSend.__dict__["num_messages"]) is property
        assert (send.num_messages, md.compression) == (1, pa.CompressionType.NONE)
    assert type(pa.CommandSend.__dict__["num_messages"]).__name__ == "Accessor"


def test_sparse_fields_read_and_write_the_present_dict() -> None:
    cmd = pa.BaseCommand(type_=pa.BaseCommand.Type.PING, ping=pa.CommandPing())
    ping = cmd.ping
    assert cmd.ping is cmd._present["ping"] and cmd.pong is None
    pong = pa.CommandPong()
    cmd.pong = pong
    assert list(cmd._present.items()) == [("ping", ping), ("pong", pong)]
    cmd.ping = None
    cmd.ping = None  # popping what is not there is no error, as with the property
    assert cmd._present == {"pong": pong}
    decoded = pa.BaseCommand.decode(cmd.encode())
    assert decoded.ping is None and decoded.pong == pong


def test_tampered_storage_goes_to_the_property() -> None:
    cmd: Any = pa.BaseCommand(type_=pa.BaseCommand.Type.PING, ping=pa.CommandPing())
    prop = compiled._accessors[pa.BaseCommand][0][1]
    name = compiled._accessors[pa.BaseCommand][0][0]
    present: object
    for present in ({"nonsense": 1}, [], None):
        cmd._present = present
        assert _outcome(lambda: getattr(cmd, name)) == _outcome(
            lambda: prop.__get__(cmd, pa.BaseCommand))
        assert _outcome(lambda: setattr(cmd, name, Token())) == _outcome(
            lambda: prop.__set__(cmd, Token()))
    del cmd._present
    assert _outcome(lambda: cmd.ping) == _outcome(
        lambda: pa.BaseCommand.ping.__get__(cmd, pa.BaseCommand))
    assert _outcome(lambda: cmd.ping)[0] == "raised"
    send: Any = object.__new__(pa.CommandSend)  # the slot never set
    assert _outcome(lambda: send.num_messages) == _outcome(
        lambda: pa.CommandSend.num_messages.__get__(send, pa.CommandSend))
    assert _outcome(lambda: send.num_messages)[0] == "raised"


def test_subclass_instances_use_the_property() -> None:
    seen: list[str] = []

    class Watched(pa.CommandSend):
        __slots__ = ()

        @property
        def _num_messages(self) -> Any:
            seen.append("get")
            return 5

        @_num_messages.setter
        def _num_messages(self, value: Any) -> None:
            seen.append("set")

    obj = Watched(producer_id=1, sequence_id=2)
    seen.clear()
    assert obj.num_messages == 5 and seen == ["get"]
    obj.num_messages = 7
    assert seen == ["get", "set"]

    class Plain(pa.BaseCommand):
        __slots__ = ()

    cmd = Plain(type_=pa.BaseCommand.Type.PING, ping=pa.CommandPing())
    assert cmd.ping is cmd._present["ping"] and cmd.pong is None


@pytest.fixture
def fresh_leaf(tmp_path_factory: pytest.TempPathFactory) -> type:
    """A Leaf class of its own, for tests that change the class."""
    tmp = tmp_path_factory.mktemp("accessor_mutable")
    generate_package(tmp, "allkinds", package="accessor_mutable_pkg")
    module = import_generated(tmp, "allkinds.kinds2", package="accessor_mutable_pkg")
    leaf: type = module.Leaf
    assert [name for name, _, _ in _accessors(leaf)] == ["label"]
    return leaf


def test_a_changed_class_is_honoured(fresh_leaf: type) -> None:
    leaf_cls: Any = fresh_leaf
    leaf = leaf_cls(id_=1, label="x")
    assert leaf.label == "x"
    slot = leaf_cls.__dict__["_label"]
    stored: list[Any] = []
    leaf_cls._label = property(lambda self: "prop", lambda self, v: stored.append(v))
    assert leaf.label == "prop"
    leaf.label = "y"
    assert stored == ["y"]
    leaf_cls._label = slot
    assert leaf.label == "x"

    # An attribute hook on the class: the property's `self._label` goes through it.
    looked: list[str] = []

    def getattribute(self: Any, name: str) -> Any:
        looked.append(name)
        return object.__getattribute__(self, name)

    leaf_cls.__getattribute__ = getattribute
    assert leaf.label == "x" and "_label" in looked
    del leaf_cls.__getattribute__
    set_names: list[str] = []

    def setattr_(self: Any, name: str, value: Any) -> None:
        set_names.append(name)
        object.__setattr__(self, name, value)

    leaf_cls.__setattr__ = setattr_
    leaf.label = "z"
    assert set_names == ["label", "_label"] and leaf.label == "z"
    del leaf_cls.__setattr__

    # The accessor replaced by something else on the class, then put back.
    accessor = leaf_cls.__dict__["label"]
    leaf_cls.label = property(lambda self: "other")
    assert leaf.label == "other"
    assert accessor.__get__(leaf, leaf_cls) == "z"  # through the property it wraps
    leaf_cls.label = accessor
    leaf.label = None
    assert leaf.label == accessor.__wrapped__.__get__(leaf, leaf_cls)


def test_reference_counts_are_kept() -> None:
    send = pa.CommandSend(producer_id=1, sequence_id=2, num_messages=300)
    value = send._num_messages
    cmd = pa.BaseCommand(type_=pa.BaseCommand.Type.SEND, send=send)
    none = pa.CompressionType.NONE

    def counts() -> tuple[int, int, int]:
        return (sys.getrefcount(value), sys.getrefcount(send), sys.getrefcount(none))

    before = counts()
    md = pa.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    for _ in range(1000):
        got = cmd.send
        assert got is not None
        read = (got.num_messages, cmd.ack, md.compression)
        cmd.send = send
        send.num_messages = value
    assert read == (300, None, none)
    del read, got
    assert counts() == before
