"""The compiled codec (runtime/codec/_wirecodec.c) against the generated Python codec it stands in
for.

The Python codec is the reference: for every input, valid or damaged, and every value, plain
or odd, the compiled codec must give the same bytes, the same decoded message (unknown fields
included) or the same error type and message. Correctness against the official runtime is
covered by tests/generated/pulsar/test_protobuf_conformance.py, which runs on whichever codec
is installed.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from protoframe.generated.demo import events
from protoframe.generated.pravega import controller
from protoframe.generated.pulsar import pulsar_api as pa
from protoframe.generated.tubemq import broker_service, master_service, rpc
from protoframe.generator.ir import Presence
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import compiled
from protoframe.runtime.errors import DecodeError
from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated
from tests.support.official import official_module
from tests.support.paths import DATA, ROOT
from tests.support.proto_values import build_ours, class_index, message_values
from tests.support.varints import EDGES, varint

pytestmark = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built (no C compiler when installing?) or "
    "PROTOFRAME_PURE_PYTHON is set; the Python codec runs everywhere",
)

MODULES: list[ModuleType] = [pa, rpc, master_service, broker_service, controller, events]
PB = official_module("pulsar", "PulsarApi.proto")
OURS = class_index(pa)


def _descriptors() -> list[Any]:
    out: list[Any] = []

    def walk(desc: Any) -> None:
        if not desc.GetOptions().map_entry:
            out.append(desc)
            for nested in desc.nested_types:
                walk(nested)

    for desc in PB.DESCRIPTOR.message_types_by_name.values():
        walk(desc)
    return out


DESCRIPTORS = _descriptors()


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """What calling ``fn`` gives: its value, or the type and text of what it raised."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))
    if hasattr(value, "unknown_fields"):
        # repr tells enum members from ints and shows NaN, which equality would not match;
        # the Python codec's encoding pins down the rest, unknown fields included.
        with compiled.pure_python():
            return "value", (type(value), repr(value), value.encode())
    return "value", value


def _python(fn: Callable[[], Any]) -> tuple[str, Any]:
    with compiled.pure_python():
        return _outcome(fn)


# --- what is compiled -------------------------------------------------------------------------


def test_every_pulsar_message_is_compiled() -> None:
    python_only = [name for name, cls in OURS.items() if not compiled.is_compiled(cls)]
    # CommandWatchScalableTopicsUpdate, with a oneof, too (tests/runtime/
    # test_compiled_maps_oneofs.py covers oneofs, maps and implicit presence).
    assert python_only == []
    assert len(OURS) >= 90


@pytest.mark.parametrize("protocol", ["pulsar", "tubemq", "pravega", "demo"])
def test_every_message_of_every_protocol_is_compiled(protocol: str) -> None:
    ir = load_protocol(ROOT / "specs", protocol, "specs")
    modules = {m.__name__.rsplit(".", 1)[-1]: class_index(m) for m in MODULES}
    checked = 0
    constructs = set()
    for proto in ir.files:
        index = modules[proto.module]
        for msg in proto.all_messages():
            if msg.is_map_entry:
                continue
            assert compiled.is_compiled(index[msg.full_name]), msg.full_name
            checked += 1
            constructs |= {"oneof"} if msg.oneofs else set()
            constructs |= {"map" for f in msg.fields if f.is_map}
            constructs |= {"implicit" for f in msg.fields if f.presence is Presence.IMPLICIT}
    assert checked
    # Which of the new constructs each protocol's schema has, so the check covers them.
    assert constructs == {"pulsar": {"oneof"}, "tubemq": set(), "pravega": {"map", "implicit"},
                          "demo": {"implicit"}}[protocol]


def test_pure_python_switch_swaps_every_class_and_back() -> None:
    with compiled.pure_python():
        assert not compiled.is_compiled(pa.BaseCommand)
        assert not compiled.is_compiled(pa.KeyValue)
    assert compiled.is_compiled(pa.BaseCommand)


@pytest.mark.slow  # a fresh interpreter per setting
def test_environment_variable_keeps_the_python_codec() -> None:
    code = ("from protoframe.runtime.codec import compiled; "
            "from protoframe.generated.pulsar import pulsar_api as p; "
            "print(compiled.available(), compiled.is_compiled(p.BaseCommand))")
    env = {**os.environ, "PROTOFRAME_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]


# --- valid values: the same bytes and the same messages --------------------------------------


def _check_round_trip(msg: Any) -> None:
    cls = type(msg)
    wire = msg.encode()
    assert _python(msg.encode) == ("value", wire)
    got = _outcome(lambda: cls.decode(wire))
    assert got == _python(lambda: cls.decode(wire))
    assert got[0] == "value" and got[1][0] is cls and got[1][2] == wire
    # decode_from inside a larger buffer, as frame decoders call it; other buffer types.
    framed = b"\xff" * 3 + wire + b"\xee" * 2
    inner = cls.decode_from(framed, 3, 3 + len(wire))
    assert _outcome(lambda: inner) == got
    assert _outcome(lambda: cls.decode(bytearray(wire))) == got
    assert _outcome(lambda: cls.decode(memoryview(framed)[3:3 + len(wire)])) == got


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: d.full_name.split(".", 2)[-1])
@settings(max_examples=scaled(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_pulsar_messages_match_the_python_codec(desc: Any, data: st.DataObject) -> None:
    msg = build_ours(OURS, desc, data.draw(message_values(desc)))
    _check_round_trip(msg)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    tmp = tmp_path_factory.mktemp("allkinds")
    generate_package(tmp, "allkinds", package="allkinds_pkg")
    return (import_generated(tmp, "allkinds.kinds2", package="allkinds_pkg"),
            importlib.import_module("allkinds_pkg.allkinds.kinds3"))


def _official(tmp: Path, name: str) -> ModuleType:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{DATA / 'allkinds'}",
                    f"--python_out={tmp}", str(DATA / "allkinds" / f"{name}.proto")],
                   check=True, timeout=120)
    spec = importlib.util.spec_from_file_location(f"{name}_pb2", tmp / f"{name}_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kinds_official(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    tmp = tmp_path_factory.mktemp("allkinds_official")
    return _official(tmp, "kinds2"), _official(tmp, "kinds3")


def test_every_kind_is_compiled(kinds: tuple[ModuleType, ModuleType]) -> None:
    k2, k3 = kinds
    for cls in (k2.Kinds, k2.Leaf, k3.Explicit, k3.Sub):
        assert compiled.is_compiled(cls), cls


@pytest.mark.parametrize("which", ["Kinds", "Explicit"])
@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_kind_matches_the_python_codec_and_upb(
    kinds: tuple[ModuleType, ModuleType], kinds_official: tuple[ModuleType, ModuleType],
    which: str, data: st.DataObject,
) -> None:
    module, official = (kinds[0], kinds_official[0]) if which == "Kinds" else (
        kinds[1], kinds_official[1])
    desc = getattr(official, which).DESCRIPTOR
    tree = data.draw(message_values(desc))
    msg = build_ours(class_index(module), desc, tree)
    _check_round_trip(msg)
    theirs = getattr(official, which)()
    theirs.ParseFromString(msg.encode())
    assert theirs.SerializeToString(deterministic=True) == msg.encode()


# --- damaged bytes: the same messages or the same errors --------------------------------------


def _damage(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        if op == 0 and out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[rng.randrange(len(out))] = rng.choice((0x00, 0x7F, 0x80, 0xFF, 0x0A, 0x12))
        elif op == 2:
            at = rng.randint(0, len(out))
            out[at:at] = rng.randbytes(rng.randint(1, 4))
        elif op == 3 and out:
            del out[rng.randrange(len(out))]
        elif op == 4:
            del out[rng.randint(0, len(out)):]
        else:
            # Fields this schema does not know, groups, a field number 0, an overlong varint.
            out += rng.choice((b"\xf8\x07\x01", b"\x9a\x3f\x02hi", b"\x0b\x0c", b"\x0b\x10\x01\x0c",
                               b"\x08" + b"\xff" * 10 + b"\x01", b"\xfd\x07abcd", b"\x00",
                               b"\x0a\x02\xc3\x28", b"\x12\x01"))
    return bytes(out)


def _samples(descriptors: list[Any], index: dict[str, type], per: int) -> list[tuple[Any, bytes]]:
    """``per`` valid encodings of each message, drawn by hypothesis (its database off, so
    the corpus does not grow between runs)."""
    out: list[tuple[Any, bytes]] = []
    for desc in descriptors:

        @settings(max_examples=per, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(tree=message_values(desc))
        def collect(tree: dict[str, Any]) -> None:
            msg = build_ours(index, desc, tree)  # noqa: B023 - run before desc moves on
            out.append((type(msg), msg.encode()))

        collect()
    return out


def _compare_damaged(samples: list[tuple[Any, bytes]], rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    errors = 0
    for _ in range(rounds):
        cls, wire = rng.choice(samples)
        bad = _damage(wire, rng)
        got = _outcome(lambda: cls.decode(bad))  # noqa: B023 - called right here
        assert got == _python(lambda: cls.decode(bad)), (cls.__qualname__, bad)  # noqa: B023
        if got[0] == "raised":
            assert issubclass(got[1][0], DecodeError), got
            errors += 1
    # The damage has to reach both outcomes for the comparison to mean something.
    assert rounds // 10 < errors < rounds * 9 // 10


def test_damaged_pulsar_bytes_decode_or_fail_alike() -> None:
    _compare_damaged(_samples(DESCRIPTORS, OURS, 2), scaled(4000), seed=7)


def test_damaged_bytes_of_every_kind_decode_or_fail_alike(
    kinds: tuple[ModuleType, ModuleType], kinds_official: tuple[ModuleType, ModuleType],
) -> None:
    samples = []
    for module, official, name in ((kinds[0], kinds_official[0], "Kinds"),
                                   (kinds[1], kinds_official[1], "Explicit")):
        samples += _samples([getattr(official, name).DESCRIPTOR], class_index(module), 40)
    _compare_damaged(samples, scaled(3000), seed=11)


def test_unknown_fields_are_kept_alike() -> None:
    send = pa.CommandSend(producer_id=1, sequence_id=2).encode()
    extra = (b"\xf8\x07\x05" + b"\x9a\x3f\x03abc" + b"\xfd\x07\x01\x02\x03\x04" + b"\xf9\x07"
             + bytes(8))
    for data in (send + extra, extra + send):
        got = pa.CommandSend.decode(data)
        assert _outcome(lambda: pa.CommandSend.decode(data)) == _python(  # noqa: B023
            lambda: pa.CommandSend.decode(data))  # noqa: B023
        assert got.unknown_fields == extra
        assert got.encode() == send + extra


def test_unknown_numbers_of_a_closed_enum_become_unknown_fields(
    kinds: tuple[ModuleType, ModuleType],
) -> None:
    k2 = kinds[0]
    base = k2.Kinds(**{f"req_{k}": v for k, v in (
        ("int32", 1), ("int64", 1), ("uint32", 1), ("uint64", 1), ("sint32", 1), ("sint64", 1),
        ("bool", True), ("fixed32", 1), ("sfixed32", 1), ("fixed64", 1), ("sfixed64", 1),
        ("float", 1.0), ("double", 1.0), ("string", ""), ("bytes", b""), ("color", k2.Color.RED))})
    wire = base.encode()
    cases = [
        b"\xa0\x02\x07",  # opt_color (36) = 7: not a Color
        b"\xc0\x03\x07",  # rep_color (56), unpacked, = 7
        b"\xc0\x03\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # rep_color = -3 (INFRARED)
        b"\xd2\x04\x04\x01\x07\x02\x63",  # pk_color (74), packed: 1, 7, 2, 99
        b"\x80\x7d\x07",  # far_color (2000) = 7
    ]
    for extra in cases:
        data = wire + extra
        got = _outcome(lambda: k2.Kinds.decode(data))  # noqa: B023
        assert got == _python(lambda: k2.Kinds.decode(data))  # noqa: B023
        assert got[0] == "value"
    packed = k2.Kinds.decode(wire + cases[3])
    assert packed.pk_color == [k2.Color.GREEN, k2.Color.BLUE]
    assert packed.unknown_fields == b"\xd0\x04\x07\xd0\x04\x63"
    assert k2.Kinds.decode(wire + cases[2]).rep_color == [k2.Color.INFRARED]


def test_integer_and_enum_edges_decode_alike(kinds: tuple[ModuleType, ModuleType]) -> None:
    k2, k3 = kinds
    wires = []
    for number in (1, 2, 3, 4, 5, 6, 7, 16):  # varint kinds of Explicit, the open enum last
        wires += [varint(number << 3) + varint(v) for v in EDGES]
        wires.append(varint(number << 3))  # the tag, then the buffer ends
    for number, wire_type, size in ((8, 5, 4), (9, 5, 4), (10, 1, 8), (11, 1, 8)):
        wires += [varint(number << 3 | wire_type) + (v % 2 ** (8 * size)).to_bytes(size, "little")
                  for v in EDGES]
    for wire in wires:
        got = _outcome(lambda: k3.Explicit.decode(wire))  # noqa: B023 - called right here
        assert got == _python(lambda: k3.Explicit.decode(wire)), wire  # noqa: B023
    base = k2.Kinds(**{f"req_{k}": v for k, v in (
        ("int32", 1), ("int64", 1), ("uint32", 1), ("uint64", 1), ("sint32", 1), ("sint64", 1),
        ("bool", True), ("fixed32", 1), ("sfixed32", 1), ("fixed64", 1), ("sfixed64", 1),
        ("float", 1.0), ("double", 1.0), ("string", ""), ("bytes", b""), ("color", k2.Color.RED))})
    for value in (0, 1, 2, 7, 0x7F, 0x80, 2**64 - 3):  # opt_color (36), a closed enum
        data = base.encode() + b"\xa0\x02" + varint(value)
        got = _outcome(lambda: k2.Kinds.decode(data))  # noqa: B023
        assert got == _python(lambda: k2.Kinds.decode(data)), value  # noqa: B023
    assert k3.Explicit.decode(b"\x20" + varint(2**64 - 1)).opt_uint64 == 2**64 - 1
    assert type(k3.Explicit.decode(b"\x18\x05").opt_uint32) is int

# --- odd values on encode: the same bytes or the same errors ----------------------------------


def _encode_alike(make: Callable[[], Any]) -> tuple[str, Any]:
    got = _outcome(lambda: make().encode())
    assert got == _python(lambda: make().encode())
    return got


@pytest.mark.parametrize("value", [
    -1, 2**64, 2**64 - 1, 0, True, pa.BaseCommand.Type.SEND, 1.5, "7", None, 2**100,
])
def test_uint64_values(value: Any) -> None:
    _encode_alike(lambda: pa.CommandSend(producer_id=value, sequence_id=1))


@pytest.mark.parametrize("value", [-(2**31), 2**31 - 1, 2**31, -(2**31) - 1, -1, False])
def test_int32_values(value: Any) -> None:
    _encode_alike(lambda: pa.CommandSend(producer_id=1, sequence_id=1, num_messages=value))


@pytest.mark.parametrize("value", [True, False, 1, 0, 2, "", "x"])
def test_bool_values(value: Any) -> None:
    _encode_alike(lambda: pa.CommandSend(producer_id=1, sequence_id=1, is_chunk=value))


@pytest.mark.parametrize("value", ["", "ascii", "żółw 🐢", "\ud800", b"bytes", 5])
def test_string_values(value: Any) -> None:
    _encode_alike(lambda: pa.KeyValue(key=value, value="v"))


@pytest.mark.parametrize("value", [b"", b"\x00\xff", bytearray(b"ba"), memoryview(b"mv"), "s"])
def test_bytes_values(value: Any) -> None:
    _encode_alike(lambda: pa.Schema(name="n", schema_data=value, type_=pa.Schema.Type.None_))


@pytest.mark.parametrize("value", [
    [], [pa.KeyValue(key="a", value="b")], (pa.KeyValue(key="a", value="b"),),
    [pa.KeyValue(key="a", value="b"), None], [pa.MessageIdData(ledgerId=1, entryId=2)],
])
def test_repeated_message_values(value: Any) -> None:
    _encode_alike(lambda: pa.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2,
                                             properties=value))


@pytest.mark.parametrize(("field", "value"), [
    (field, value)
    for field in ("opt_float", "opt_double")
    for value in (0.0, -0.0, 1.5, 1e39, -1e39, 3.4028235e38, float("inf"), float("nan"), 3,
                  2**2000, True, "1.0", -(2**63))
] + [
    (field, value)
    for field in ("opt_sint32", "opt_sint64", "opt_fixed32", "opt_sfixed32", "opt_fixed64",
                  "opt_sfixed64", "opt_int64", "opt_uint32")
    for value in (0, -1, 1, 2**31 - 1, -(2**31), 2**31, 2**32 - 1, 2**32, 2**63 - 1, -(2**63),
                  2**63, 2**64 - 1, 2**64, 1.0, True)
] + [("rep_shade", [0, 1, 5, -7, 2**31]), ("opt_shade", 9), ("rep_string", ["a", 1])])
def test_numeric_values_of_every_kind(kinds: tuple[ModuleType, ModuleType], field: str,
                                      value: Any) -> None:
    k3 = kinds[1]
    _encode_alike(lambda: k3.Explicit(**{field: value}))


def test_required_fields_unset_and_errors_inside_nested_messages() -> None:
    _encode_alike(lambda: pa.CommandSubscribe(
        topic="t", subscription="s", subType=pa.CommandSubscribe.SubType.Shared, consumer_id=1,
        request_id=None))  # type: ignore[arg-type]
    # An error deep inside gives the Python codec's error for the whole message.
    _encode_alike(lambda: pa.BaseCommand(type_=pa.BaseCommand.Type.SEND, send=pa.CommandSend(
        producer_id=1, sequence_id=1, message_id=pa.MessageIdData(ledgerId=-5, entryId=1))))


def test_deep_nesting_falls_back_and_matches(kinds: tuple[ModuleType, ModuleType]) -> None:
    leaf_type = kinds[0].Leaf
    leaf = leaf_type(id_=0)
    for depth in range(1, 150):
        leaf = leaf_type(id_=depth, children=[leaf])
    wire = _encode_alike(lambda: leaf)
    assert wire[0] == "value"
    data = wire[1]
    assert _outcome(lambda: leaf_type.decode(data)) == _python(lambda: leaf_type.decode(data))


def test_sparse_envelope_values() -> None:
    cmd = pa.BaseCommand(type_=pa.BaseCommand.Type.PING, ping=pa.CommandPing(),
                         pong=pa.CommandPong(), connect=pa.CommandConnect(client_version="v"))
    assert _encode_alike(lambda: cmd)[0] == "value"
    odd = pa.BaseCommand(type_=pa.BaseCommand.Type.PING)
    odd._present["ping"] = None
    assert _encode_alike(lambda: odd)[0] == "raised"
    odd._present["ping"] = pa.CommandPong()  # a message of another type in the field
    _encode_alike(lambda: odd)
    odd._present = {"nonsense": pa.CommandPong()}
    _encode_alike(lambda: odd)


def test_subclasses_buffers_and_arguments() -> None:
    class Send(pa.CommandSend):
        __slots__ = ()

    wire = pa.CommandSend(producer_id=1, sequence_id=2).encode()
    got = Send.decode(wire)
    assert type(got) is Send and got.producer_id == 1
    assert type(Send.decode_from(wire, 0, len(wire))) is Send
    assert Send(producer_id=1, sequence_id=2).encode() == wire
    for args in ((b"xx" + wire, 2, 100), (b"xx" + wire, -1, 3), (bytearray(wire), 0, len(wire)),
                 (b"xx" + wire, 2, 2 + len(wire))):
        assert _outcome(lambda: pa.CommandSend.decode_from(*args)) == _python(  # noqa: B023
            lambda: pa.CommandSend.decode_from(*args))  # noqa: B023
    # decode converts its argument with bytes(), as the Python codec does: an int is that
    # many zero bytes, a str is refused with bytes()'s own error.
    odd_inputs: list[Any] = [5, 0, "text", [8, 1, 16, 2], object()]
    for data in odd_inputs:
        assert _outcome(lambda: pa.CommandSend.decode(data)) == _python(  # noqa: B023
            lambda: pa.CommandSend.decode(data))  # noqa: B023
    with pytest.raises(TypeError):
        pa.CommandSend.decode()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        pa.CommandSend(producer_id=1, sequence_id=2).encode(1)  # type: ignore[call-arg]
    bound = pa.CommandSend(producer_id=1, sequence_id=2).encode
    assert bound() == wire
    assert pa.CommandSend.encode(pa.CommandSend(producer_id=1, sequence_id=2)) == wire


@pytest.mark.slow  # a leak check: many rounds, counted
def test_decoding_and_encoding_keep_reference_counts() -> None:
    wire = pa.BaseCommand(type_=pa.BaseCommand.Type.SEND, send=pa.CommandSend(
        producer_id=1, sequence_id=2, is_chunk=True)).encode()
    member = pa.BaseCommand.Type.SEND

    def counts() -> tuple[int, ...]:
        gc.collect()
        return (sys.getrefcount(member), sys.getrefcount(pa.CommandSend),
                sys.getrefcount(pa.BaseCommand))

    def run(times: int) -> int:
        failed = 0
        for _ in range(times):
            pa.BaseCommand.decode(wire).encode()
            try:
                pa.BaseCommand.decode(wire[:-1])
            except DecodeError:
                failed += 1
        return failed

    run(100)
    before = counts()
    assert run(1000) == 1000
    assert counts() == before


@pytest.mark.parametrize("length", [0, 1, 2, 7, 8, 9, 15, 16, 17, 40])
def test_ascii_and_other_strings_decode_alike(length: int) -> None:
    """Strings of ASCII bytes are made without the UTF-8 decoder; one byte that is not ASCII,
    at any place of the eight-byte blocks scanned, sends the string back to it, and invalid
    UTF-8 there to the Python codec."""
    ascii = "".join(chr(0x21 + (i * 7) % 90) for i in range(length))
    cases = [ascii]
    for at in range(length):
        cases.append(ascii[:at] + "é" + ascii[at + 1:])
        cases.append(ascii[:at] + "\u20ac" + ascii[at + 1:])
    for text in cases:
        data = pa.KeyValue(key=text, value=ascii).encode()
        fast = pa.KeyValue.decode(data)
        with compiled.pure_python():
            slow = pa.KeyValue.decode(data)
        assert (fast.key, fast.value) == (slow.key, slow.value) == (text, ascii)
        assert type(fast.key) is str and fast.key.isascii() == text.isascii()
    for at in range(length):
        raw = bytearray(pa.KeyValue(key=ascii, value="v").encode())
        raw[2 + at] = 0xFF  # after the key's tag and one-byte length
        outcomes: list[tuple[str, object]] = []
        for python in (False, True):
            try:
                if python:
                    with compiled.pure_python():
                        got = pa.KeyValue.decode(bytes(raw))
                else:
                    got = pa.KeyValue.decode(bytes(raw))
                outcomes.append(("value", got.key))
            except Exception as exc:  # noqa: BLE001 (the error itself is compared)
                outcomes.append(("raised", (type(exc), str(exc))))
        assert outcomes[0] == outcomes[1] and outcomes[0][0] == "raised"
