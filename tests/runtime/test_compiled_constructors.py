"""The compiled constructors (runtime/codec/_wirecodec.c) against the generated ``__init__`` they
stand in for.

The generated ``__init__`` is the reference: for every set of keywords, plain or odd, ``Cls(**kw)``
must build the same instance (every slot, ``_unknown`` and the dict of present fields included,
holding the very objects passed in, but for the new list that replaces an empty or missing
repeated value) or raise the same error with the same text. Each check also looks at whether the
generated ``__init__`` ran (a profile hook sees its frame), so a constructor that always handed
the call to Python, or took calls it should not, fails too.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar import pulsar_api as pa
from protoframe.generator.build import generate
from protoframe.generator.output import write_files
from protoframe.runtime.codec import compiled
from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated
from tests.support.paths import ROOT
from tests.support.proto_values import class_index

pytestmark = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built (no C compiler when installing?) or "
    "PROTOFRAME_PURE_PYTHON is set; the Python constructors run everywhere",
)

PULSAR = sorted(class_index(pa).items())
PULSAR_COMPILED = [(name, cls) for name, cls in PULSAR if compiled.is_compiled(cls)]


class Token:
    """A value equal only to itself, so that where it ends up is unambiguous."""

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Token({self.n})"


class ListSub(list[Any]):
    """A list, but not exactly one: `value or []` is its own business."""


class StrSub(str):
    """A keyword that is a str, but not exactly one."""


MISSING = Token(-1)  # what a slot never set reads as


# --- helpers ----------------------------------------------------------------------------------


def _slots(cls: type) -> list[str]:
    return [name for klass in cls.__mro__ for name in klass.__dict__.get("__slots__", ())]


def _slot_value(obj: object, name: str) -> Any:
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            try:
                return klass.__dict__[name].__get__(obj, type(obj))
            except AttributeError:
                return MISSING
    raise AssertionError(name)


def _modes(cls: type) -> dict[str, str]:
    """keyword -> "required" / "optional" / "repeated" / "map" / "sparse", read off the
    generated class (its signature, annotations and slots), not off the layout table the C
    code uses."""
    params = inspect.signature(cls.__dict__["__init__"]).parameters
    slots = set(_slots(cls))
    modes: dict[str, str] = {}
    for name, storage, _ in cls.FIELD_NAMES:  # type: ignore[attr-defined]
        p = params[name]
        if storage not in slots:
            modes[name] = "sparse"
        elif p.default is p.empty:
            modes[name] = "required"
        elif cls.__annotations__[storage].startswith("list["):
            modes[name] = "repeated"
        elif cls.__annotations__[storage].startswith("dict["):
            modes[name] = "map"
        else:
            modes[name] = "optional"
    return modes


@contextmanager
def _counting_inits(cls: type) -> Iterator[list[int]]:
    """Count the frames of generated ``__init__`` functions (of ``cls``'s module) that run."""
    filename = inspect.getfile(cls)
    count = [0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name == "__init__" \
                and frame.f_code.co_filename == filename:
            count[0] += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(old)


def _build(cls: type, make: Callable[[], Any]) -> tuple[str, Any, int]:
    """("value", instance) or ("raised", (type, text)), and how many generated inits ran."""
    with _counting_inits(cls) as count:
        try:
            value = make()
        except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
            return "raised", (type(exc), str(exc)), count[0]
    return "value", value, count[0]


def _build_both(cls: type, make: Callable[[], Any]) -> tuple[tuple[str, Any, int],
                                                               tuple[str, Any, int]]:
    fast = _build(cls, make)
    with compiled.pure_python():
        slow = _build(cls, make)
    return fast, slow


def _assert_same(fast: Any, slow: Any, given: list[Any]) -> None:
    """Both instances hold the same things in every slot, with the identity rules of the
    generated ``__init__``: what was passed in is held as it is; anything made (a new list, the
    present dict, b"") is equal, and not an object passed in."""
    assert type(fast) is type(slow)
    assert gc.is_tracked(fast) == gc.is_tracked(slow)
    ids = {id(v) for v in given}
    for name in _slots(type(slow)):
        f, s = _slot_value(fast, name), _slot_value(slow, name)
        assert type(f) is type(s), name
        if id(s) in ids:
            assert f is s, name
            continue
        assert f == s, name
        assert id(f) not in ids or f is s, name  # an empty list passed in is not kept
        if isinstance(s, list | dict):
            assert f is not s, name
        if isinstance(s, dict):
            assert list(f) == list(s), name
            assert all(f[k] is s[k] for k in s), name


def _compare(cls: type, kwargs: dict[str, Any], *, fast_expected: bool) -> None:
    fast, slow = _build_both(cls, lambda: cls(**kwargs))
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "raised":
        # Python raises binding the arguments, before the __init__ frame starts: the text
        # says the call went there.
        assert fast[1] == slow[1]
        assert not fast_expected
    else:
        assert slow[2] == 1  # the Python path runs the generated __init__ once
        assert fast[2] == (0 if fast_expected else 1), (cls, kwargs)
        _assert_same(fast[1], slow[1], list(kwargs.values()))


def _fast_expected(modes: dict[str, str], kwargs: dict[str, Any]) -> bool:
    if any(mode == "required" and name not in kwargs for name, mode in modes.items()):
        return False
    return all((modes[name] != "repeated" or v is None or type(v) is list)
               and (modes[name] != "map" or v is None or type(v) is dict)
               for name, v in kwargs.items())


def _required(cls: type) -> dict[str, Any]:
    return {name: Token(i) for i, (name, mode) in enumerate(_modes(cls).items())
            if mode == "required"}


_counter = iter(range(1, 1 << 62))

VALUES = st.one_of(
    st.none(),
    st.builds(lambda: Token(next(_counter))),
    st.integers(-3, 300),
    st.text(max_size=3),
    st.binary(max_size=2),
    st.sampled_from([0, "", b"", False, True, 0.0]),
    st.lists(st.builds(lambda: Token(next(_counter))), max_size=3),
    st.lists(st.integers(0, 3), max_size=2).map(tuple),
    st.lists(st.integers(0, 3), max_size=2).map(ListSub),
)


def _draw_kwargs(data: st.DataObject, cls: type) -> dict[str, Any]:
    modes = _modes(cls)
    chosen: dict[str, Any] = {}
    for name, mode in modes.items():
        keep = data.draw(st.integers(0, 9)) > (0 if mode == "required" else 4)
        if keep:
            chosen[name] = data.draw(VALUES)
    order = data.draw(st.permutations(list(chosen)))
    return {name: chosen[name] for name in order}


# --- generated test packages ------------------------------------------------------------------

# tests/data/sparse's envelope without its oneof (which keeps a message on the Python codec): a
# compiled sparse message whose field "present" moves the dict of present fields to _present_.
SPARSE_PROTO = """
syntax = "proto2";
package ctorsparse;
message Body { optional int32 n = 1; }
message Envelope {
  required int32 kind = 1;
  optional Body a0 = 2; optional Body a1 = 3; optional Body a2 = 4; optional Body a3 = 5;
  optional Body a4 = 6; optional Body a5 = 7; optional Body a6 = 8; optional Body a7 = 9;
  optional int32 present = 10;
  optional Body type = 11;
  optional Body from = 12;
  optional Body b0 = 13; optional Body b1 = 14; optional Body b2 = 15; optional Body b3 = 16;
  optional Body b4 = 17; optional Body b5 = 18;
  repeated Body many = 19;
  repeated int32 packed = 20 [packed = true];
  optional Body c0 = 300; optional Body c1 = 301;
  optional string tail = 400;
}
message Empty {}
"""


def _generate_sparse(tmp: Path) -> ModuleType:
    spec_dir = tmp / "specs" / "ctorsparse"
    spec_dir.mkdir(parents=True)
    (spec_dir / "ctorsparse.proto").write_text(SPARSE_PROTO)
    out = generate(tmp / "specs", "specs", ["ctorsparse"])
    write_files(tmp / "ctor_sparse_pkg", out.files, out.protocols)
    return import_generated(tmp, "ctorsparse.ctorsparse", package="ctor_sparse_pkg")



@pytest.fixture(scope="module")
def test_classes(tmp_path_factory: pytest.TempPathFactory) -> list[type]:
    """Classes of tests/data/allkinds and SPARSE_PROTO with a compiled constructor."""
    tmp = tmp_path_factory.mktemp("ctor_allkinds")
    generate_package(tmp, "allkinds", package="ctor_allkinds_pkg")
    modules = [import_generated(tmp, "allkinds.kinds2", package="ctor_allkinds_pkg"),
               importlib.import_module("ctor_allkinds_pkg.allkinds.kinds3"),
               _generate_sparse(tmp_path_factory.mktemp("ctor_sparse"))]
    return [cls for module in modules for _, cls in sorted(class_index(module).items())
            if compiled.has_compiled_constructor(cls)]


@pytest.fixture()
def fresh_leaf(tmp_path_factory: pytest.TempPathFactory) -> type:
    """A Leaf class of its own, for tests that change the class."""
    tmp = tmp_path_factory.mktemp("ctor_mutable")
    generate_package(tmp, "allkinds", package="ctor_mutable_pkg")
    module = import_generated(tmp, "allkinds.kinds2", package="ctor_mutable_pkg")
    leaf: type = module.Leaf
    assert compiled.has_compiled_constructor(leaf)
    return leaf


def test_an_unchanged_class_is_looked_over_once(fresh_leaf: type) -> None:
    """The constructor checks the class again only after its version tag changed, which any
    class attribute assignment does (Python 3.13 no longer flags valid tags: 0 means none).

    A class of its own: 3.13 gives a class at most 1000 version tags, and the pure_python()
    switches of the other tests use those of the shared generated classes up (two a switch)."""
    leaf_cls: Any = fresh_leaf
    codec = compiled._constructors[leaf_cls]
    leaf_cls(id_=1)
    version = codec.constructor_version
    assert version != 0
    assert _build(leaf_cls, lambda: leaf_cls(id_=1))[2] == 0
    assert codec.constructor_version == version
    leaf_cls.probe = 1
    leaf_cls(id_=1)
    assert codec.constructor_version not in (0, version)


# --- what has one -----------------------------------------------------------------------------


def test_every_compiled_message_has_a_compiled_constructor() -> None:
    assert len(PULSAR_COMPILED) >= 90
    for name, cls in PULSAR:
        assert compiled.has_compiled_constructor(cls) is compiled.is_compiled(cls), name
    # Its oneof members are stored as given, as optional fields are.
    assert compiled.has_compiled_constructor(pa.CommandWatchScalableTopicsUpdate)


def test_the_test_packages_have_compiled_constructors(test_classes: list[type]) -> None:
    names = {cls.FULL_NAME for cls in test_classes}  # type: ignore[attr-defined]
    assert {"allkinds.Kinds", "allkinds.Leaf", "allkinds3.Explicit", "allkinds3.Sub",
            "ctorsparse.Envelope", "ctorsparse.Empty"} <= names
    envelope: Any = next(c for c in test_classes if c.__name__ == "Envelope")
    assert "_present_" in envelope.__slots__ and _modes(envelope)["a0"] == "sparse"
    body = envelope.__annotations__  # the generated class, not the C code, says what is where
    assert "_present" in body and "_present_" in body
    env = envelope(kind=1, present=5, a0=None, a1=Token(), type_=Token(), from_=Token(),
                   packed=[1])
    assert env._present == 5 and list(env._present_) == ["a1", "type_", "from_"]


def test_pure_python_switches_the_constructors_off_and_back_on() -> None:
    def make() -> Any:
        return pa.KeyValue(key="k", value="v")

    with compiled.pure_python():
        assert not compiled.has_compiled_constructor(pa.KeyValue)
        assert _build(pa.KeyValue, make)[2] == 1
    assert compiled.has_compiled_constructor(pa.KeyValue)
    assert _build(pa.KeyValue, make)[2] == 0


@pytest.mark.slow  # a fresh interpreter per setting
def test_environment_variable_keeps_the_python_constructors() -> None:
    code = ("import sys\nfrom protoframe.runtime.codec import compiled\n"
            "from protoframe.generated.pulsar import pulsar_api as p\ncalls = []\n"
            "sys.setprofile(lambda f, e, a: calls.append(f.f_code.co_name) if e == 'call' "
            "else None)\n"
            "p.KeyValue(key='k', value='v')\nsys.setprofile(None)\n"
            "print(compiled.has_compiled_constructor(p.KeyValue), calls.count('__init__'))")
    outputs = []
    for value in ("1", ""):
        env = {**os.environ, "PROTOFRAME_PURE_PYTHON": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True, timeout=60)
        outputs.append(out.stdout.split())
    assert outputs == [["False", "1"], ["True", "0"]]


# --- keywords ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cls", PULSAR_COMPILED, ids=[n for n, _ in PULSAR_COMPILED])
def test_each_keyword_sets_its_own_field(name: str, cls: type) -> None:
    params = inspect.signature(cls.__dict__["__init__"]).parameters
    keywords = [p for p in params if p != "self"]
    assert keywords == [n for n, _, _ in cls.FIELD_NAMES]  # type: ignore[attr-defined]
    modes = _modes(cls)
    required = _required(cls)
    for keyword, mode in modes.items():
        value: Any = [Token()] if mode == "repeated" else Token()
        kwargs = {**required, keyword: value}
        kind, obj, inits = _build(cls, lambda: cls(**kwargs))  # noqa: B023
        assert (kind, inits) == ("value", 0), (keyword, obj)
        assert getattr(obj, keyword) is value, keyword
        for other in modes:
            if other not in kwargs:
                expected: Any = [] if modes[other] == "repeated" else None
                got = getattr(obj, other)
                assert got == expected or modes[other] == "optional", other
        _compare(cls, kwargs, fast_expected=True)


def test_keywords_that_are_not_interned() -> None:
    kwargs = {"".join(["pro", "ducer_id"]): 3, "".join(["sequence", "_id"]): 4,
              "".join(["num_", "messages"]): 1}
    assert all(sys.intern(k) is not k for k in kwargs)
    _compare(pa.CommandSend, kwargs, fast_expected=True)
    cmd_kwargs = {"type_": pa.BaseCommand.Type.SEND, "".join(["se", "nd"]): pa.CommandSend(
        producer_id=1, sequence_id=2)}
    _compare(pa.BaseCommand, cmd_kwargs, fast_expected=True)


# --- the same instances -----------------------------------------------------------------------


@pytest.mark.parametrize("name,cls", PULSAR_COMPILED, ids=[n for n, _ in PULSAR_COMPILED])
@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_pulsar_instances_match_the_python_init(name: str, cls: type, data: st.DataObject) -> None:
    kwargs = _draw_kwargs(data, cls)
    _compare(cls, kwargs, fast_expected=_fast_expected(_modes(cls), kwargs))


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_test_package_instances_match_the_python_init(test_classes: list[type],
                                                      data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(test_classes))
    kwargs = _draw_kwargs(data, cls)
    _compare(cls, kwargs, fast_expected=_fast_expected(_modes(cls), kwargs))


def test_list_identity_rules() -> None:
    props = [pa.KeyValue(key="k", value="v")]
    empty: list[str] = []
    a = pa.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, properties=props,
                           replicate_to=empty)
    b = pa.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, properties=props,
                           replicate_to=empty)
    assert a.properties is props and b.properties is props
    assert a.replicate_to == [] and a.replicate_to is not empty
    assert a.replicate_to is not b.replicate_to
    assert a.encryption_keys == [] and a.encryption_keys is not b.encryption_keys
    a.replicate_to.append("x")
    assert empty == [] and b.replicate_to == []


def test_sparse_fields_go_to_a_fresh_present_dict() -> None:
    send, ping = pa.CommandSend(producer_id=1, sequence_id=2), pa.CommandPing()
    cmd = pa.BaseCommand(ping=ping, type_=pa.BaseCommand.Type.SEND, send=send, pong=None)
    assert list(cmd._present.items()) == [("ping", ping), ("send", send)]
    other = pa.BaseCommand(type_=pa.BaseCommand.Type.PING)
    assert other._present == {} and other._present is not cmd._present
    assert pa.BaseCommand(type_=pa.BaseCommand.Type.PING, ping=None)._present == {}
    assert cmd._unknown == b"" and cmd.type_ is pa.BaseCommand.Type.SEND


# --- unusual calls: the Python path, and its errors -------------------------------------------


Call = tuple[str, Callable[[], Any], list[Any]]  # label, the call, the values it passes


def _unusual_calls(cls: type) -> list[Call]:
    modes = _modes(cls)
    req = _required(cls)
    make: Any = cls

    def call(label: str, *args: Any, **kwargs: Any) -> Call:
        return label, lambda: make(*args, **kwargs), [*args, *kwargs.values()]

    int_key: dict[Any, Any] = {**req, 1: 2}
    twice = [Token()]
    calls: list[Call] = [
        call("positional", Token()),
        call("positional and keywords", 1, **req),
        call("unknown keyword", **req, bogus=1),
        call("unknown keyword None", **req, bogus=None),
        # Refused by CPython before the class is called.
        ("int keyword", lambda: make(**int_key), list(int_key.values())),
    ]
    for name in req:
        calls.append(call(f"missing {name}", **{k: v for k, v in req.items() if k != name}))
        calls.append((f"twice {name}", _twice(make, req, name, twice[0]),
                      [*req.values(), *twice]))
        calls.append(call(f"str subclass {name}",
                          **{(StrSub(k) if k == name else k): v for k, v in req.items()}))
    for name in (n for n, m in modes.items() if m == "repeated"):
        odd_values: list[Any] = [(), (Token(),), ListSub(), ListSub([Token()]), 0, "", "ab",
                                 False, Token()]
        for value in odd_values:
            calls.append(call(f"{name}={value!r}", **req, **{name: value}))
    return calls


def _twice(make: Any, req: dict[str, Any], name: str, value: Any) -> Callable[[], Any]:
    return lambda: make(**req, **{name: value})


def _check_unusual_calls(cls: type) -> None:
    """Each call raises Python's error, or builds its instance through the Python __init__."""
    for label, make, passed in _unusual_calls(cls):
        fast, slow = _build_both(cls, make)
        assert fast[0] == slow[0], (cls, label)
        if fast[0] == "raised":
            assert fast[1] == slow[1], (cls, label)
        else:
            _assert_same(fast[1], slow[1], passed)
            assert fast[2] == slow[2] == 1, (cls, label)


@pytest.mark.parametrize("name,cls", PULSAR_COMPILED, ids=[n for n, _ in PULSAR_COMPILED])
def test_unusual_calls_take_the_python_path(name: str, cls: type) -> None:
    _check_unusual_calls(cls)


def test_error_texts() -> None:
    with pytest.raises(TypeError, match=r"missing 1 required keyword-only argument: 'value'"):
        pa.KeyValue(key="k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"KeyValue.__init__\(\) takes 1 positional argument"):
        pa.KeyValue("k", value="v")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"BaseCommand.__init__\(\) got an unexpected keyword "
                                        r"argument 'bogus'"):
        pa.BaseCommand(type_=pa.BaseCommand.Type.PING, bogus=1)  # type: ignore[call-arg]


def test_unusual_calls_of_the_test_packages(test_classes: list[type]) -> None:
    for cls in test_classes:
        _check_unusual_calls(cls)


# --- subclasses and changed classes -----------------------------------------------------------


def test_subclasses_take_the_python_path() -> None:
    class Plain(pa.CommandSend):
        __slots__ = ()

    class Own(pa.CommandSend):
        __slots__ = ("extra",)

        def __init__(self, *, extra: object, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.extra = extra

    for sub in (Plain, Own):
        assert not compiled.has_compiled_constructor(sub)
    kind, plain, inits = _build(pa.CommandSend, lambda: Plain(producer_id=1, sequence_id=2))
    assert (kind, type(plain), inits) == ("value", Plain, 1)
    assert (plain.producer_id, plain.sequence_id, plain._unknown) == (1, 2, b"")
    token = Token()
    kind, own, inits = _build(pa.CommandSend,
                              lambda: Own(extra=token, producer_id=1, sequence_id=2))
    assert (kind, type(own), inits) == ("value", Own, 1)
    assert own.extra is token and own.producer_id == 1 and own.encode() == plain.encode()
    for sub in (Plain, Own):
        fast, slow = _build_both(pa.CommandSend, lambda sub=sub: sub(1))  # type: ignore[misc]
        assert fast == slow and fast[0] == "raised"
    # The base class keeps its constructor.
    assert _build(pa.CommandSend, lambda: pa.CommandSend(producer_id=1, sequence_id=2))[2] == 0


def test_a_replaced_init_is_called(fresh_leaf: type) -> None:
    leaf_cls: Any = fresh_leaf
    original = leaf_cls.__dict__["__init__"]
    seen: list[dict[str, Any]] = []

    def wrapper(self: Any, **kwargs: Any) -> None:
        seen.append(kwargs)
        original(self, **kwargs)
        self._label = "wrapped"

    leaf_cls.__init__ = wrapper
    leaf = leaf_cls(id_=1)
    assert seen == [{"id_": 1}] and leaf._label == "wrapped"
    leaf_cls.__init__ = original
    kind, leaf, inits = _build(leaf_cls, lambda: leaf_cls(id_=2))
    assert (kind, inits, leaf.id_, leaf._label) == ("value", 0, 2, None)
    assert len(seen) == 1


def test_a_replaced_setattr_new_or_slot_is_honoured(fresh_leaf: type) -> None:
    leaf_cls: Any = fresh_leaf
    seen: list[str] = []

    def setattr_(self: Any, name: str, value: Any) -> None:
        seen.append(name)
        object.__setattr__(self, name, value)

    leaf_cls.__setattr__ = setattr_
    leaf_cls(id_=1)
    assert seen == ["id_", "_label", "children", "_unknown"]
    del leaf_cls.__setattr__
    assert _build(leaf_cls, lambda: leaf_cls(id_=1))[2] == 0

    slot = leaf_cls.__dict__["_label"]
    stored: list[Any] = []
    leaf_cls._label = property(lambda self: "prop", lambda self, v: stored.append(v))
    leaf = leaf_cls(id_=1, label="x")
    assert stored == ["x"] and leaf.label == "prop"
    leaf_cls._label = slot
    kind, leaf, inits = _build(leaf_cls, lambda: leaf_cls(id_=1, label="y"))
    assert (kind, inits, leaf.label) == ("value", 0, "y")

    # Last: once __new__ has been set, CPython keeps calling it through the class's __new__
    # even after it is deleted, so the class is not used after this.
    made: list[type] = []

    def new(cls: type, **kwargs: Any) -> Any:
        made.append(cls)
        return object.__new__(cls)

    leaf_cls.__new__ = new
    kind, leaf, inits = _build(leaf_cls, lambda: leaf_cls(id_=1))
    assert (kind, inits, leaf.id_, made) == ("value", 1, 1, [leaf_cls])


# --- reference counts -------------------------------------------------------------------------


@pytest.mark.slow  # a leak check: many rounds, counted
def test_reference_counts_and_gc() -> None:
    name = "".join(["producer", "-", "name"])
    seq, when = 10**12 + 7, 10**12 + 9
    props = [pa.KeyValue(key="k", value="v")]
    empty: list[str] = []
    member = pa.BaseCommand.Type.SEND
    send = pa.CommandSend(producer_id=1, sequence_id=2)
    watched: tuple[Any, ...] = (name, seq, when, props, empty, member, send, pa.MessageMetadata,
                                pa.BaseCommand, pa.KeyValue, pa.CommandSend)

    def counts() -> list[int]:
        gc.collect()
        return [sys.getrefcount(v) for v in watched]

    def build() -> list[object]:
        return [pa.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=when,
                                   properties=props, replicate_to=empty),
                pa.BaseCommand(type_=member, send=send, ping=None)]

    key_value: Any = pa.KeyValue
    metadata: Any = pa.MessageMetadata
    command_send: Any = pa.CommandSend

    def run(times: int) -> None:
        for _ in range(times):
            build()
            bad_calls: tuple[Callable[[], object], ...] = (
                lambda: key_value(key=name),
                lambda: metadata(producer_name=name, sequence_id=seq, publish_time=when,
                                 bogus=props),
                lambda: command_send(seq, producer_id=name))
            for bad in bad_calls:
                try:
                    bad()
                except TypeError:
                    pass
            pa.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=when,
                               properties=tuple(props))  # type: ignore[arg-type]

    run(100)
    before = counts()
    run(2000)
    assert counts() == before
    # Each instance holds one reference to each value it was given, as with Python's __init__.
    kept = [build() for _ in range(2000)]
    held = counts()
    with compiled.pure_python():
        kept_py = [build() for _ in range(2000)]
        held_py = counts()
    deltas = [h - b for h, b in zip(held, before, strict=True)]
    deltas_py = [h - b for h, b in zip(held_py, held, strict=True)]
    assert deltas == deltas_py
    assert deltas[watched.index(name)] == 2000 and deltas[watched.index(props)] == 2000
    assert deltas[watched.index(empty)] == 0
    watched_ids = set(map(id, watched))
    for obj, obj_py in zip(kept[0], kept_py[0], strict=True):
        assert gc.is_tracked(obj)
        assert (set(map(id, gc.get_referents(obj))) & watched_ids
                == set(map(id, gc.get_referents(obj_py))) & watched_ids)
    del kept, kept_py, obj, obj_py
    gc.collect()
    assert gc.garbage == []
    assert counts() == before


# --- deallocation -------------------------------------------------------------------------------
#
# Classes with a compiled constructor also get a compiled tp_dealloc (slotted_dealloc in
# runtime/codec/_codec_common.h): it must free every slot once, run a __del__ added to the class,
# leave subclasses' own slots, dicts and weak references to CPython, and not overflow the C
# stack on deep nesting.


class _Freed:
    """Counts how many of its instances were freed."""

    count = 0

    def __del__(self) -> None:
        type(self).count += 1


def test_dealloc_frees_every_slot_once() -> None:
    _Freed.count = 0
    for _ in range(100):
        pa.MessageMetadata(producer_name=_Freed(), sequence_id=_Freed(),  # type: ignore[arg-type]
                           publish_time=_Freed(), replicated_from=_Freed(),  # type: ignore[arg-type]
                           properties=[_Freed()])  # type: ignore[list-item]
        cmd = pa.BaseCommand(type_=_Freed(), send=_Freed())  # type: ignore[arg-type]
        cmd._unknown = _Freed()  # type: ignore[assignment]
        del cmd
    assert _Freed.count == 100 * 8


def test_dealloc_leaves_subclass_dicts_and_weakrefs_to_cpython() -> None:
    import weakref

    class WithDict(pa.KeyValue):
        pass  # a __dict__ and __weakref__ of its own

    class WithSlot(pa.KeyValue):
        __slots__ = ("extra",)
        extra: object

    _Freed.count = 0
    called: list[object] = []
    obj = WithDict(key=_Freed(), value=_Freed())  # type: ignore[arg-type]
    obj.more = _Freed()  # type: ignore[attr-defined]
    ref = weakref.ref(obj, called.append)
    del obj
    assert _Freed.count == 3 and ref() is None and len(called) == 1
    other = WithSlot(key=_Freed(), value=_Freed())  # type: ignore[arg-type]
    other.extra = _Freed()
    del other
    assert _Freed.count == 6


@pytest.mark.slow  # builds a fresh compiled class
def test_dealloc_runs_a_del_added_to_the_class(fresh_leaf: type) -> None:
    leaf_cls: Any = fresh_leaf
    saved: list[Any] = []
    ran: list[int] = []

    def resurrect(self: Any) -> None:
        ran.append(self.id_)
        if self.id_ == 1:
            saved.append(self)

    leaf_cls.__del__ = resurrect
    leaf = leaf_cls(id_=1, label="kept", children=[leaf_cls(id_=2)])
    del leaf
    gc.collect()
    # id 1 came back to life in __del__, fields and all; it still holds id 2.
    assert ran == [1] and saved[0].label == "kept" and saved[0].children[0].id_ == 2
    saved.clear()  # a finalizer runs once: id 1 is freed now, and id 2 with it
    gc.collect()
    assert ran == [1, 2]


@pytest.mark.slow  # builds a deep nesting and a fresh compiled class
def test_dealloc_of_deep_nesting_does_not_overflow_the_stack(fresh_leaf: type) -> None:
    leaf_cls: Any = fresh_leaf
    _Freed.count = 0
    root = leaf_cls(id_=0, label=_Freed())
    for i in range(1, 300_000):
        root = leaf_cls(id_=i, children=[root])
    del root  # CPython's trashcan defers the nested frees; without it this would crash
    assert _Freed.count == 1


@pytest.mark.skipif(sys.maxsize < 2**32, reason="reads tp_dealloc at its 64-bit offset")
def test_pure_python_switches_the_dealloc_off_and_back_on() -> None:
    import ctypes

    def dealloc_of(cls: type) -> int:
        """The type's tp_dealloc pointer, read from the type object."""
        return ctypes.c_void_p.from_address(id(cls) + _TP_DEALLOC_OFFSET).value or 0

    compiled_dealloc = dealloc_of(pa.KeyValue)
    assert compiled_dealloc == dealloc_of(pa.CommandSend)

    class Plain:
        __slots__ = ("a",)

    assert dealloc_of(Plain) != compiled_dealloc
    with compiled.pure_python():
        assert dealloc_of(pa.KeyValue) == dealloc_of(Plain)
        _Freed.count = 0
        pa.KeyValue(key=_Freed(), value=_Freed())  # type: ignore[arg-type]
        assert _Freed.count == 2
    assert dealloc_of(pa.KeyValue) == compiled_dealloc


# PyTypeObject starts ob_refcnt, ob_type, ob_size, tp_name, tp_basicsize, tp_itemsize, then
# tp_dealloc: six 8-byte fields before it.
_TP_DEALLOC_OFFSET = 6 * 8
