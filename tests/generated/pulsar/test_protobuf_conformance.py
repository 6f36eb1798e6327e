"""Our generated Pulsar bindings against the official protobuf runtime (upb), message by message.

For every message type in PulsarApi.proto, hypothesis builds random values; the same values
build an official message and one of ours, and then:
- our encoding is byte-identical to the official canonical serialization,
- the official runtime parses our bytes back to an equal message,
- we decode the official bytes to a message equal to ours (presence included).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar import pulsar_api
from tests.support.examples import scaled
from tests.support.official import official_module
from tests.support.proto_values import build_official, build_ours, class_index, message_values

PB = official_module("pulsar", "PulsarApi.proto")
OURS = class_index(pulsar_api)


def _all_descriptors() -> list[Any]:
    out: list[Any] = []

    def walk(desc: Any) -> None:
        if desc.GetOptions().map_entry:
            return
        out.append(desc)
        for nested in desc.nested_types:
            walk(nested)

    for desc in PB.DESCRIPTOR.message_types_by_name.values():
        walk(desc)
    return out


DESCRIPTORS = _all_descriptors()


def test_every_message_has_a_generated_class() -> None:
    missing = [d.full_name for d in DESCRIPTORS if d.full_name not in OURS]
    assert not missing
    assert len(DESCRIPTORS) >= 90


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: d.full_name.split(".", 2)[-1])
@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_matches_official_runtime(desc: Any, data: st.DataObject) -> None:
    tree = data.draw(message_values(desc))
    pb_cls = _official_class(desc)
    theirs = build_official(pb_cls, tree)
    ours = build_ours(OURS, desc, tree)

    their_bytes = theirs.SerializeToString()
    our_bytes = ours.encode()
    assert our_bytes == their_bytes

    assert pb_cls.FromString(our_bytes) == theirs
    decoded = type(ours).decode(their_bytes)
    assert decoded == ours
    assert decoded.encode() == their_bytes


def _official_class(desc: Any) -> Any:
    names = desc.full_name.split(".")[2:]  # drop the "pulsar.proto" package
    cls: Any = PB
    for name in names:
        cls = getattr(cls, name)
    return cls
