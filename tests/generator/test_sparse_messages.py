"""Messages with many optional sub-messages keep the set ones in a dict: same API, same bytes.

Pulsar's BaseCommand is the one such message in the shipped protocols; tests/data/sparse adds
a proto2 envelope whose sparse fields are split into runs by other fields (one named
``present``) and a proto3 one nested in another class, each checked against the official runtime.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import subprocess
import sys
import typing
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandFlow,
    CommandMessage,
    CommandSend,
    MessageIdData,
)
from tests.support.examples import scaled
from tests.support.generate import generate_package, import_generated
from tests.support.official import official_module
from tests.support.paths import DATA
from tests.support.proto_values import build_official, build_ours, class_index, message_values

PB = official_module("pulsar", "PulsarApi.proto")
SEND = BaseCommand.Type.SEND


def _send(seq: int = 8) -> CommandSend:
    return CommandSend(producer_id=0, sequence_id=seq, num_messages=1)


def _message() -> CommandMessage:
    return CommandMessage(consumer_id=3, message_id=MessageIdData(ledgerId=1, entryId=2))


def test_property_set_and_unset() -> None:
    cmd = BaseCommand(type_=SEND)
    assert cmd.send is None and not cmd.has_send()
    cmd.send = _send()
    assert cmd.send == _send() and cmd.has_send()
    cmd.send = None
    assert cmd.send is None and not cmd.has_send()
    cmd.send = None  # unsetting an unset field is fine
    assert cmd.encode() == PB.BaseCommand(type=PB.BaseCommand.SEND).SerializeToString()
    assert cmd == BaseCommand(type_=SEND)


def test_copies_do_not_share_which_fields_are_set() -> None:
    cmd = BaseCommand(type_=SEND, send=_send())
    shallow = copy.copy(cmd)
    deep = copy.deepcopy(cmd)
    assert shallow == cmd == deep
    assert shallow.send is cmd.send and deep.send is not cmd.send  # shallow: same sub-message
    shallow.send = None
    deep.flow = CommandFlow(consumer_id=1, messagePermits=2)
    assert cmd.send == _send() and not cmd.has_flow()
    assert shallow != cmd and deep != cmd


def test_constructor_skips_none_and_keeps_its_signature() -> None:
    assert BaseCommand(type_=SEND, send=None, flow=None) == BaseCommand(type_=SEND)
    params = inspect.signature(BaseCommand.__init__).parameters
    names = [n for n in params if n != "self"]
    assert names == [name for name, _, _ in BaseCommand.FIELD_NAMES]
    assert all(p.kind is p.KEYWORD_ONLY for n, p in params.items() if n != "self")
    assert params["type_"].default is inspect.Parameter.empty
    assert all(params[n].default is None for n in names[1:])
    with pytest.raises(TypeError):
        BaseCommand(type_=SEND, sned=_send())  # type: ignore[call-arg]


def test_field_names_and_repr_unchanged() -> None:
    assert ("send", "send", "send") in BaseCommand.FIELD_NAMES
    cmd = BaseCommand(type_=SEND, send=_send())
    assert repr(cmd) == ("BaseCommand(type_=<Type.SEND: 6>, send=CommandSend(producer_id=0, "
                         "sequence_id=8, num_messages=1))")


def test_equality_ignores_assignment_order() -> None:
    a = BaseCommand(type_=SEND, send=_send(), message=_message())
    b = BaseCommand(type_=SEND)
    b.message = _message()
    b.flow = CommandFlow(consumer_id=1, messagePermits=2)
    b.send = _send()
    assert a != b
    b.flow = None
    assert a == b
    b.send = _send(9)
    assert a != b


def test_two_bodies_encode_in_field_number_order() -> None:
    # Set in reverse order: message (9) after send (6) on the wire all the same.
    cmd = BaseCommand(type_=SEND)
    cmd.message = _message()
    cmd.send = _send()
    theirs = PB.BaseCommand(type=PB.BaseCommand.SEND)
    theirs.send.CopyFrom(PB.CommandSend.FromString(_send().encode()))
    theirs.message.CopyFrom(PB.CommandMessage.FromString(_message().encode()))
    assert cmd.encode() == theirs.SerializeToString()
    # A two-byte tag (ackResponse = 38) after one-byte ones.
    ack = CommandAck(consumer_id=1, ack_type=CommandAck.AckType.Individual)
    cmd.ack = ack
    theirs.ack.CopyFrom(PB.CommandAck.FromString(ack.encode()))
    assert cmd.encode() == theirs.SerializeToString()


def test_decode_with_two_bodies() -> None:
    theirs = PB.BaseCommand(type=PB.BaseCommand.MESSAGE)
    theirs.send.CopyFrom(PB.CommandSend.FromString(_send().encode()))
    theirs.message.CopyFrom(PB.CommandMessage.FromString(_message().encode()))
    data = theirs.SerializeToString()
    cmd = BaseCommand.decode(data)
    assert cmd.send == _send() and cmd.message == _message()
    assert cmd.has_send() and cmd.has_message() and not cmd.has_ack()
    assert cmd == BaseCommand(type_=BaseCommand.Type.MESSAGE, message=_message(), send=_send())
    assert cmd.encode() == data


def test_repeated_occurrence_replaces_as_for_other_message_fields() -> None:
    # Generated decoders keep the last occurrence of a singular message field (they do not
    # merge the two, as the official runtime does); the sparse fields do the same.
    first, last = _send(1).encode(), _send(2).encode()
    data = (BaseCommand(type_=SEND).encode() + b"\x32" + bytes([len(first)]) + first
            + b"\x32" + bytes([len(last)]) + last)
    assert BaseCommand.decode(data).send == _send(2)
    id_first = MessageIdData(ledgerId=1, entryId=2, partition=5).encode()
    id_last = MessageIdData(ledgerId=3, entryId=4).encode()
    msg = (b"\x08\x03" + b"\x12" + bytes([len(id_first)]) + id_first
           + b"\x12" + bytes([len(id_last)]) + id_last)
    assert CommandMessage.decode(msg).message_id == MessageIdData(ledgerId=3, entryId=4)


def test_unknown_fields_kept_after_the_bodies() -> None:
    base = BaseCommand(type_=SEND, send=_send()).encode()
    extra = bytes.fromhex("a006 2a")  # field 100, varint
    cmd = BaseCommand.decode(base + extra)
    assert cmd.unknown_fields == extra and cmd.send == _send()
    assert cmd.encode() == base + extra == PB.BaseCommand.FromString(base + extra) \
        .SerializeToString()


# -- generated from tests/data/sparse -------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    tmp = tmp_path_factory.mktemp("sparse")
    generate_package(tmp, "sparse")
    return import_generated(tmp, "sparse.sparse"), import_generated(tmp, "sparse.sparse3")


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    out = tmp_path_factory.mktemp("sparse_official")
    mods = []
    for stem in ("sparse", "sparse3"):
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{DATA / 'sparse'}",
                        f"--python_out={out}", str(DATA / "sparse" / f"{stem}.proto")],
                       check=True)
        spec = importlib.util.spec_from_file_location(f"{stem}_pb2", out / f"{stem}_pb2.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        mods.append(module)
    return mods[0], mods[1]


def test_runs_split_by_other_fields(generated: tuple[ModuleType, ModuleType],
                                    official: tuple[ModuleType, ModuleType]) -> None:
    ours, theirs = generated[0], official[0]
    body = ours.Body
    env = ours.Envelope(kind=1, c1=body(n=1), b0=body(n=2), a7=body(n=3), present=0,
                        from_=body(s="f"), type_=body(n=4), many=[body()], left=body(n=5),
                        tail="t")
    assert env.present == 0 and env.has_present() and env.from_ == body(s="f")
    ref = theirs.Envelope(kind=1, present=0, many=[theirs.Body()], tail="t")
    for name, value in (("a7", {"n": 3}), ("type", {"n": 4}), ("from", {"s": "f"}),
                        ("b0", {"n": 2}), ("left", {"n": 5}), ("c1", {"n": 1})):
        getattr(ref, name).CopyFrom(theirs.Body(**value))
    assert env.encode() == ref.SerializeToString()
    back = ours.Envelope.decode(env.encode())
    assert back == env and back.c1 == body(n=1) and back.c0 is None
    env.present = None
    env.type_ = None
    assert not env.has_present() and not env.has_type_() and env.has_from_()


def _check_against_official(ours: ModuleType, theirs: ModuleType, name: str,
                            tree: dict[str, Any]) -> None:
    desc = getattr(theirs, name).DESCRIPTOR
    mine = build_ours(class_index(ours), desc, tree)
    ref = build_official(getattr(theirs, name), tree)
    data = ref.SerializeToString()
    assert mine.encode() == data
    assert type(mine).decode(data) == mine


@settings(max_examples=scaled(150), deadline=None)
@given(data=st.data())
def test_proto2_envelope_matches_official(generated: tuple[ModuleType, ModuleType],
                                          official: tuple[ModuleType, ModuleType],
                                          data: st.DataObject) -> None:
    tree = data.draw(message_values(official[0].Envelope.DESCRIPTOR))
    _check_against_official(generated[0], official[0], "Envelope", tree)


@settings(max_examples=scaled(100), deadline=None)
@given(data=st.data())
def test_proto3_nested_holder_matches_official(generated: tuple[ModuleType, ModuleType],
                                               official: tuple[ModuleType, ModuleType],
                                               data: st.DataObject) -> None:
    tree = data.draw(message_values(official[1].Outer.DESCRIPTOR))
    _check_against_official(generated[1], official[1], "Outer", tree)


def test_constructor_keeps_the_keyword_dict_and_rejects_unknown_names() -> None:
    send = _send()
    cmd = BaseCommand(type_=SEND, send=send)
    assert cmd.send is send and cmd.has_send() and not cmd.has_flow()
    with pytest.raises(TypeError, match="unexpected keyword argument 'sned'"):
        BaseCommand(type_=SEND, send=None, **{"sned": send})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument '_present'"):
        BaseCommand(type_=SEND, **{"_present": {}})  # type: ignore[arg-type]
    fields = {"send": send, "flow": None}
    cmd = BaseCommand(type_=SEND, **fields)  # type: ignore[arg-type]
    assert cmd.send is send and not cmd.has_flow()
    assert fields == {"send": send, "flow": None}  # the caller's dict is never kept or changed
    cmd.flow = CommandFlow(consumer_id=1, messagePermits=2)
    assert fields == {"send": send, "flow": None}


def test_signature_is_spelled_out_in_field_order() -> None:
    hints = typing.get_type_hints(BaseCommand.__init__)
    assert hints["send"] == CommandSend | None
    assert "_fields" not in hints
