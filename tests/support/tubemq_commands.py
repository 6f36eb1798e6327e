"""TubeMQ command cases shared by the tests of the generated bindings, the client and the Spark
rows: every routed command with its frame builder and body class, frame bytes written by hand,
message values (random and hypothesis-drawn), and a transport that records what it sends.
"""

from __future__ import annotations

import inspect
import random
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from protoframe.generated.tubemq import broker_service as bs
from protoframe.generated.tubemq import machines as m
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.frames import Frame
from protoframe.generated.tubemq.rpc import RspExceptionBody

TOKEN = 0xFF7FF4FE
Builder = Callable[..., Frame]

# (command, builder, body class) for every command the spec routes.
COMMANDS: list[tuple[str, Builder, type]] = [
    ("REGISTER_P2M", m.frame_of_register_p2m, ms.RegisterRequestP2M),
    ("HEARTBEAT_P2M", m.frame_of_heartbeat_p2m, ms.HeartRequestP2M),
    ("CLOSE_P2M", m.frame_of_close_p2m, ms.CloseRequestP2M),
    ("REGISTER_C2M", m.frame_of_register_c2m, ms.RegisterRequestC2M),
    ("HEARTBEAT_C2M", m.frame_of_heartbeat_c2m, ms.HeartRequestC2M),
    ("CLOSE_C2M", m.frame_of_close_c2m, ms.CloseRequestC2M),
    ("REGISTER_B2M", m.frame_of_register_b2m, ms.RegisterRequestB2M),
    ("HEARTBEAT_B2M", m.frame_of_heartbeat_b2m, ms.HeartRequestB2M),
    ("CLOSE_B2M", m.frame_of_close_b2m, ms.CloseRequestB2M),
    ("REGISTER_C2M_V2", m.frame_of_register_c2m_v2, ms.RegisterRequestC2MV2),
    ("HEARTBEAT_C2M_V2", m.frame_of_heartbeat_c2m_v2, ms.HeartRequestC2MV2),
    ("GET_PART_META_C2M", m.frame_of_get_part_meta_c2m, ms.GetPartMetaRequestC2M),
    ("SEND_MESSAGE_P2B", m.frame_of_send_message_p2b, bs.SendMessageRequestP2B),
    ("REGISTER_C2B", m.frame_of_register_c2b, bs.RegisterRequestC2B),
    ("HEARTBEAT_C2B", m.frame_of_heartbeat_c2b, bs.HeartBeatRequestC2B),
    ("GET_MESSAGE_C2B", m.frame_of_get_message_c2b, bs.GetMessageRequestC2B),
    ("COMMIT_OFFSET_C2B", m.frame_of_commit_offset_c2b, bs.CommitOffsetRequestC2B),
    ("REGISTER_M2P", m.frame_of_register_m2p, ms.RegisterResponseM2P),
    ("HEARTBEAT_M2P", m.frame_of_heartbeat_m2p, ms.HeartResponseM2P),
    ("CLOSE_M2P", m.frame_of_close_m2p, ms.CloseResponseM2P),
    ("REGISTER_M2C", m.frame_of_register_m2c, ms.RegisterResponseM2C),
    ("HEARTBEAT_M2C", m.frame_of_heartbeat_m2c, ms.HeartResponseM2C),
    ("CLOSE_M2C", m.frame_of_close_m2c, ms.CloseResponseM2C),
    ("REGISTER_M2B", m.frame_of_register_m2b, ms.RegisterResponseM2B),
    ("HEARTBEAT_M2B", m.frame_of_heartbeat_m2b, ms.HeartResponseM2B),
    ("CLOSE_M2B", m.frame_of_close_m2b, ms.CloseResponseM2B),
    ("REGISTER_M2C_V2", m.frame_of_register_m2c_v2, ms.RegisterResponseM2CV2),
    ("HEARTBEAT_M2C_V2", m.frame_of_heartbeat_m2c_v2, ms.HeartResponseM2CV2),
    ("GET_PART_META_M2C", m.frame_of_get_part_meta_m2c, ms.GetPartMetaResponseM2C),
    ("SEND_MESSAGE_B2P", m.frame_of_send_message_b2p, bs.SendMessageResponseB2P),
    ("REGISTER_B2C", m.frame_of_register_b2c, bs.RegisterResponseB2C),
    ("HEARTBEAT_B2C", m.frame_of_heartbeat_b2c, bs.HeartBeatResponseB2C),
    ("GET_MESSAGE_B2C", m.frame_of_get_message_b2c, bs.GetMessageResponseB2C),
    ("COMMIT_OFFSET_B2C", m.frame_of_commit_offset_b2c, bs.CommitOffsetResponseB2C),
    ("EXCEPTION", m.frame_of_exception, RspExceptionBody),
]
INT32 = (-(2**31), 2**31 - 1)


def frame_bytes(serial_no: int, *blocks: bytes) -> bytes:
    out = struct.pack(">III", TOKEN, serial_no, len(blocks))
    for block in blocks:
        out += struct.pack(">I", len(block)) + block
    return out


# -- message values -----------------------------------------------------------------------------


def _fields(cls: type) -> list[tuple[str, Any, bool]]:
    """(name, type, required) of each constructor argument of a generated message."""
    hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    out = []
    for name, param in params.items():
        if name == "self":
            continue
        hint = hints[name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out.append((name, hint, param.default is inspect.Parameter.empty))
    return out


def filled(cls: type, rng: random.Random, rate: float) -> Any:
    """An instance: required fields set, optional ones with probability ``rate``."""
    kwargs: dict[str, Any] = {}
    for name, hint, required in _fields(cls):
        if not required and rng.random() >= rate:
            continue
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            kwargs[name] = [_value(item, rng, rate) for _ in range(rng.randint(0, 2))]
        else:
            kwargs[name] = _value(hint, rng, rate)
    return cls(**kwargs)


def _value(tp: Any, rng: random.Random, rate: float) -> Any:
    if tp is bool:
        return rng.random() < 0.5
    if tp is int:
        return rng.choice([0, 1, 31, 32, 200, -1, 2**31 - 1, rng.randrange(2**31)])
    if tp is str:
        return rng.choice(["", "t", "127.0.0.1", "\u00e9\u4e2d"])
    if tp is bytes:
        return rng.randbytes(rng.randint(0, 12))
    return filled(tp, rng, rate)


@st.composite
def messages(draw: st.DrawFn, cls: type) -> Any:
    kwargs: dict[str, Any] = {}
    for name, hint, required in _fields(cls):
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            value: Any = st.lists(_strategy(item), max_size=3)
        else:
            value = _strategy(hint)
        kwargs[name] = draw(value if required else st.none() | value)
    return cls(**kwargs)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(*INT32)
    if tp is str:
        return st.text(max_size=12)
    if tp is bytes:
        return st.binary(max_size=40)
    return messages(tp)


class Loopback:
    """A transport that records frames; the test answers them, in any order."""

    def __init__(self) -> None:
        self.sent: list[Frame] = []

    async def send_frame(self, frame: Frame) -> None:
        self.sent.append(frame)
