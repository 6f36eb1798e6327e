"""Pulsar frame cases shared by the tests of the generated bindings and of the compiled codec:
hypothesis strategies for every command (built from the generated classes), message metadata,
batches and whole frames with and without a payload.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from functools import cache
from typing import Any

from hypothesis import strategies as st

from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
)
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    BrokerEntryMetadata,
    CommandConnect,
    CommandSend,
    KeyValue,
    MessageMetadata,
    SingleMessageMetadata,
)
from protoframe.runtime.codec.protowire import read_varint

Type = BaseCommand.Type


# --- building commands generically -----------------------------------------------------------
# Every BaseCommand.Type selects the sub-message field with the same field number. The table
# below is derived from the generated classes (constructor type hints and the encoded field
# tag), not copied from frames.py, so it checks the dispatch table instead of trusting it.

_SAFE_INT = st.integers(min_value=0, max_value=2**31 - 1)  # fits every protobuf integer kind
_TEXT = st.text(max_size=12)


def _strip_optional(hint: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _required_params(cls: type) -> dict[str, Any]:
    """Constructor parameters without a default, with their (resolved) types."""
    hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return {name: hints[name] for name, p in params.items()
            if name != "self" and p.default is inspect.Parameter.empty}


def _optional_scalars(cls: type) -> dict[str, Any]:
    """Optional parameters of a plain scalar type (no floats: float32 fields would round)."""
    hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    required = _required_params(cls)
    out: dict[str, Any] = {}
    for name, hint in hints.items():
        if name in required or name == "return":
            continue
        inner = _strip_optional(hint)
        if inner in (int, str, bool, bytes) or (isinstance(inner, type)
                                               and issubclass(inner, enum.IntEnum)):
            out[name] = inner
    return out


def _scalar_strategy(tp: Any) -> st.SearchStrategy[Any]:
    if tp is bool:
        return st.booleans()
    if tp is int:
        return _SAFE_INT
    if tp is str:
        return _TEXT
    if tp is bytes:
        return st.binary(max_size=12)
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type):
        return message_strategy(tp)
    raise AssertionError(f"no strategy for {tp!r}")


@cache
def message_strategy(cls: type) -> st.SearchStrategy[Any]:
    """Instances of a generated message: required fields always, optional scalars sometimes."""
    required = {name: _scalar_strategy(tp) for name, tp in _required_params(cls).items()}
    optional = {name: _scalar_strategy(tp) for name, tp in _optional_scalars(cls).items()}
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))


def minimal(cls: type) -> Any:
    kwargs: dict[str, Any] = {}
    for name, tp in _required_params(cls).items():
        if tp is int:
            kwargs[name] = 1
        elif tp is str:
            kwargs[name] = "x"
        elif tp is bytes:
            kwargs[name] = b"x"
        elif tp is bool:
            kwargs[name] = True
        elif issubclass(tp, enum.IntEnum):
            kwargs[name] = list(tp)[0]
        else:
            kwargs[name] = minimal(tp)
    return cls(**kwargs)


@cache
def body_fields() -> dict[BaseCommand.Type, tuple[str, type]]:
    """Command type -> (BaseCommand attribute, body class), by field number."""
    hints = typing.get_type_hints(BaseCommand.__init__)
    by_number: dict[int, tuple[str, type]] = {}
    for name, hint in hints.items():
        if name in ("type_", "return"):
            continue
        body_cls = _strip_optional(hint)
        raw = BaseCommand(type_=Type.PING, **{name: minimal(body_cls)}).encode()
        assert raw[:2] == b"\x08\x12"
        tag, _ = read_varint(raw, 2)
        by_number[tag >> 3] = (name, body_cls)
    return {t: by_number[t.value] for t in Type}


def command_strategy(types: list[BaseCommand.Type] | None = None) \
        -> st.SearchStrategy[BaseCommand]:
    def build(t: BaseCommand.Type) -> st.SearchStrategy[BaseCommand]:
        name, cls = body_fields()[t]
        return message_strategy(cls).map(lambda body: BaseCommand(type_=t, **{name: body}))

    return st.sampled_from(types if types is not None else list(Type)).flatmap(build)


key_values = st.builds(KeyValue, key=_TEXT, value=_TEXT)
message_metadata = st.builds(
    MessageMetadata,
    producer_name=_TEXT,
    sequence_id=st.integers(0, 2**64 - 1),
    publish_time=st.integers(0, 2**63 - 1),
    properties=st.lists(key_values, max_size=5),
    event_time=st.none() | st.integers(0, 2**63 - 1),
    partition_key=st.none() | _TEXT,
    schema_version=st.none() | st.binary(max_size=8),
)
broker_entries = st.none() | st.builds(
    BrokerEntry,
    metadata=st.builds(BrokerEntryMetadata,
                       broker_timestamp=st.none() | st.integers(0, 2**63 - 1),
                       index=st.none() | st.integers(0, 2**63 - 1)),
)
batch_entries = st.builds(
    BatchEntry,
    metadata=st.builds(
        SingleMessageMetadata,
        payload_size=st.just(0),  # filled in on encode
        properties=st.lists(key_values, max_size=3),
        partition_key=st.none() | _TEXT,
        event_time=st.none() | st.integers(0, 2**63 - 1),
        sequence_id=st.none() | st.integers(0, 2**63 - 1),
        compacted_out=st.none() | st.booleans(),
        ordering_key=st.none() | st.binary(max_size=8),
    ),
    data=st.binary(max_size=300),
)
batches = st.builds(Batch, entries=st.lists(batch_entries, max_size=12))


def send_command(producer_id: int = 1, sequence_id: int = 0) -> BaseCommand:
    return BaseCommand(type_=Type.SEND,
                       send=CommandSend(producer_id=producer_id, sequence_id=sequence_id))


payload_frames = st.builds(
    Frame,
    command=st.builds(send_command, producer_id=_SAFE_INT, sequence_id=st.integers(0, 2**63)),
    payload=st.builds(Payload, broker_entry=broker_entries, metadata=message_metadata,
                      data=st.binary(max_size=2000)),
)
simple_frames = st.builds(Frame, command=command_strategy())
any_frames = simple_frames | payload_frames


def sample_wire_frames() -> list[bytes]:
    """CONNECT, a SEND with a payload, CONNECT again: each encoded."""
    connect = Frame(command=BaseCommand(
        type_=Type.CONNECT, connect=CommandConnect(client_version="t")))
    send = Frame(
        command=BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=2, num_messages=1)),
        payload=Payload(metadata=MessageMetadata(
            producer_name="p", sequence_id=2, publish_time=3), data=b"hello"))
    return [connect.encode(), send.encode(), connect.encode()]
