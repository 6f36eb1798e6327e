"""The rows TANK's consume response brought to the compiled frame codec, against the Python
methods: a marker (an optional constant found by peeking, a bool), a guard over it leaving out
an array counted by a stored integer, and a size measuring several fields (``size_of: {from,
to}``). Checked as ``test_compiled_tank.py`` checks the produce path: the same bytes, values and
errors on random values, odd values, emptied slots, every truncation and random damage;
well-formed input stays in C; no leaks; rows that do not hold together are refused.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_protocols
from protoframe.generated.tank import frames as tank
from protoframe.runtime.codec import compiled, vocabulary
from tests.support.codec_agreement import (
    bare_codec,
    check_emptied_slots,
    check_no_leaks,
    check_random_damage,
    check_stays_in_c,
    check_truncations,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled

pytestmark = needs_framecodec


def _partition(rng: random.Random) -> tank.ConsumePartitionResult:
    """A partition result of a random kind, each conditional field there as its kind says."""
    kind = rng.choice([0, 1, 0xfe, 0xfc, 0xfd, 0xfb, 0xff])
    top = 2**64 if rng.random() < 0.5 else 9

    def big() -> int:
        return rng.randrange(top)

    return tank.ConsumePartitionResult(
        partition=rng.randrange(2**16), error_or_flags=kind,
        leader_addr=rng.randrange(2**32) if kind == 0xfc else None,
        leader_port=rng.randrange(2**16) if kind == 0xfc else None,
        base_seqnum=big() if kind in (0, 1) else None,
        highwater_mark=big() if kind in (0, 1, 0xfe) else None,
        chunk_length=rng.randrange(2**32) if kind in (0, 1, 0xfe) else None,
        first_available_seqnum=big() if kind == 1 else None)


def _topic(rng: random.Random) -> tank.ConsumeTopicResult:
    """A known topic with its partitions, or an unknown one (the marker) with a count only."""
    name = rng.choice(["", "t", "orders", "é" * rng.randrange(4)])
    if rng.random() < 0.3:
        return tank.ConsumeTopicResult(name=name, partitions_cnt=rng.randrange(256),
                                       unknown=True)
    partitions = [_partition(rng) for _ in range(rng.choice([0, 1, 2, rng.randrange(6)]))]
    return tank.ConsumeTopicResult(name=name, partitions_cnt=len(partitions),
                                   partitions=partitions)


def _response(rng: random.Random) -> tank.ConsumeResponse:
    return tank.ConsumeResponse(request_id=rng.randrange(2**32),
                                topics=[_topic(rng) for _ in range(rng.randrange(4))],
                                chunks=rng.randbytes(rng.randrange(12)))


def _same_decodes(cls: type, data: bytes) -> str:
    if cls is tank.Frame:
        return same(lambda: tank.Frame.decode(data, to_server=False))[0]
    return same_decodes(cls, data)


def test_the_consume_response_is_compiled() -> None:
    for cls in (tank.ConsumePartitionResult, tank.ConsumeTopicResult, tank.ConsumeResponse):
        assert compiled.is_compiled(cls), cls


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32))
def test_random_consume_responses_round_trip_the_same_with_both_codecs(seed: int) -> None:
    response = _response(random.Random(seed))
    kind, _ = same(response.encode)
    assert kind == "value"
    wire = response.encode()
    assert _same_decodes(tank.ConsumeResponse, wire) == "value"
    assert tank.ConsumeResponse.decode(wire) == response
    frame = tank.Frame(body=response)
    assert same(frame.encode)[0] == "value"
    assert _same_decodes(tank.Frame, frame.encode()) == "value"
    for topic in response.topics:
        assert _same_decodes(tank.ConsumeTopicResult, topic.encode()) == "value"


def test_the_bench_frames_agree() -> None:
    wire = frames_protocols.tank_consume_ours_encode()
    assert same(frames_protocols.tank_consume_ours_encode)[1] == repr(wire)
    same(lambda: frames_protocols.tank_consume_ours_decode(wire))
    assert frames_protocols.tank_consume_ours_decode(wire) == frames_protocols.TANK_CONSUME_EXPECTED


def test_odd_values_encode_as_the_python_codec_does() -> None:
    part = _partition(random.Random(1))
    known: dict[str, Any] = {"name": "t", "partitions_cnt": 1, "partitions": [part]}
    odd: list[dict[str, Any]] = [
        {"unknown": 1}, {"unknown": 0}, {"unknown": "x"}, {"unknown": None}, {"unknown": True},
        {"partitions": None}, {"partitions": []}, {"partitions": [part, part]},
        {"partitions": (part,)}, {"partitions": ["x"]}, {"partitions_cnt": 2},
        {"partitions_cnt": 256}, {"partitions_cnt": -1}, {"partitions_cnt": True},
        {"partitions_cnt": 1.0}, {"unknown": True, "partitions": None},
        {"unknown": True, "partitions": [part]}, {"name": b"t"}, {"name": "x" * 256},
    ]
    for change in odd:
        topic = tank.ConsumeTopicResult(**{**known, **change})
        same(topic.encode)
        for response in (
                tank.ConsumeResponse(request_id=1, topics=[topic], chunks=b""),
                tank.ConsumeResponse(request_id=1, topics=[topic, topic], chunks=b"c")):
            same(response.encode)
            same(tank.Frame(body=response).encode)
    empty = tank.ConsumeTopicResult(name="t", partitions_cnt=0, partitions=[])
    changes: list[dict[str, Any]] = [
        {"request_id": 2**32}, {"request_id": -1}, {"topics": None}, {"topics": [None]},
        {"topics": [empty] * 256}, {"chunks": "c"}, {"chunks": None}]
    base: dict[str, Any] = {"request_id": 1, "topics": [], "chunks": b""}
    for change in changes:
        same(tank.ConsumeResponse(**{**base, **change}).encode)


def _samples() -> list[tuple[type, bytes]]:
    rng = random.Random(31)
    out: list[tuple[type, bytes]] = []
    for _ in range(6):
        response = _response(rng)
        out += [(tank.ConsumeResponse, response.encode()),
                (tank.Frame, tank.Frame(body=response).encode())]
        out += [(tank.ConsumeTopicResult, t.encode()) for t in response.topics[:1]]
    out.append((tank.ConsumeTopicResult,
                tank.ConsumeTopicResult(name="u", partitions_cnt=7, unknown=True).encode()))
    return out


def test_every_truncation_gives_the_same_outcome() -> None:
    check_truncations(_samples(), _same_decodes, trailers=(b"\x00", b"\xff\xff"))


def test_random_damage_gives_the_same_outcome() -> None:
    check_random_damage(_samples(), seed=32, rounds=scaled(100), decodes=_same_decodes)


def test_odd_headers_decode_as_the_python_codec_does() -> None:
    partition = bytes.fromhex("0100") + b"\xfd"  # partition 1: no leader
    topic = b"\x01t\x01" + partition
    for header in (
            b"\x01\x00\x00\x00" + b"\x01t\x01\xff\xff",  # the marker
            b"\x01t\x00\xff\xff",  # no partitions, then the marker: an unknown topic
            b"\x01t\x00\xff",  # half a marker: a known topic with no partitions, a byte over
            b"\x01t\x02\xff\xff" + partition,  # the marker where the first partition would be
            topic, b"\x01t\x02" + partition + partition, b"\x01t\x02" + partition):
        _same_decodes(tank.ConsumeTopicResult, header)
    body = b"\x07\x00\x00\x00" + b"\x01" + topic
    for size in (0, 3, 5, len(body) - 1, len(body), len(body) + 1, 2**32 - 1):
        wire = size.to_bytes(4, "little") + body + b"chunks"
        _same_decodes(tank.ConsumeResponse, wire)
        _same_decodes(tank.Frame, b"\x02" + len(wire).to_bytes(4, "little") + wire)


def test_emptied_slots_encode_as_the_python_codec_does() -> None:
    check_emptied_slots([(cls, wire) for cls, wire in _samples() if cls is not tank.Frame])


def test_well_formed_consume_responses_stay_in_c() -> None:
    check_stays_in_c([(cls, wire) for cls, wire in _samples() if cls is not tank.Frame])
    for cls, wire in _samples():
        if cls is tank.Frame:
            assert python_calls(tank, lambda: tank.Frame.decode(wire)) == []  # noqa: B023


def test_frames_decode_by_direction_as_the_python_codec_does() -> None:
    """Each way, by position or keyword, on whole frames and cut ones; odd directions and
    arguments go to the Python methods."""
    frames = [wire for cls, wire in _samples() if cls is tank.Frame]
    frames += [frames_protocols.tank_ours_encode(), frames_protocols.tank_consume_ours_encode(),
               b"\x03\x00\x00\x00\x00", b"\x05\x01\x00\x00\x00\x00", b"\x09\x00\x00\x00\x00"]
    odd: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {"to_server": 1}), ((), {"to_server": None}), ((0,), {}), (("x",), {}),
        ((True,), {"to_server": True}), ((), {"to_server": True, "x": 1}), ((True, 1), {}),
        ((), {"direction": True})]
    for wire in frames:
        for cut in (wire, wire[:-1], wire + b"\x00"):
            for to_server in (False, True):
                same(lambda: tank.Frame.decode(cut, to_server=to_server))  # noqa: B023
                same(lambda: tank.Frame.decode(cut, to_server))  # noqa: B023
                same(lambda: tank.Frame.decode_from(cut, 0, len(cut), to_server))  # noqa: B023
                same(lambda: tank.Frame.decode_from(  # noqa: B023
                    cut, 0, len(cut), to_server=to_server))  # noqa: B023
            same(lambda: tank.Frame.decode(cut))  # noqa: B023
            same(lambda: tank.Frame.decode_from(cut, 0, len(cut)))  # noqa: B023
        for args, kwargs in odd:
            same(lambda: tank.Frame.decode(wire, *args, **kwargs))  # noqa: B023
            same(lambda: tank.Frame.decode_from(wire, 0, len(wire), *args, **kwargs))  # noqa: B023
    same(lambda: tank.Frame.decode_from(frames[0], 1, 0, to_server=False))
    same(lambda: tank.Frame.decode_from(bytearray(frames[0]), 0, 5,  # type: ignore[arg-type]
                                        to_server=False))


def test_left_out_markers_and_partitions_take_their_defaults_with_both_constructors() -> None:
    made = tank.ConsumeTopicResult(name="t", partitions_cnt=2)
    with compiled.pure_python():
        reference = tank.ConsumeTopicResult(name="t", partitions_cnt=2)
    assert made == reference and made.unknown is False and made.partitions is None


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks() -> None:
    check_no_leaks([(cls, wire) for cls, wire in _samples() if cls is not tank.Frame])


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    ops = vocabulary.OPS

    def row(op: str, name: str | None, width: int = 0, flags: int = 0, index: int = -1,
            number: int = 0, obj: Any = None) -> tuple[Any, ...]:
        return (ops[op], name, width, flags, index, number, obj, None, None, None)

    with pytest.raises(ValueError, match="False when not there"):
        bare_codec(row("marker", "key", 2, number=0xffff, obj=True))
    with pytest.raises(ValueError, match="width must be"):
        bare_codec(row("marker", "key", 5, number=1, obj=False))
    with pytest.raises(ValueError, match="its end row after it"):
        bare_codec(row("size_range", None, 4, index=0))
    with pytest.raises(ValueError, match="its end row after it"):
        bare_codec(row("size_range", None, 4, index=1), row("int", "key", 1))
    with pytest.raises(ValueError, match="its end row after it"):
        bare_codec(row("size_range", None, 4, flags=1, index=1),
                   row("size_range_end", None, index=0), row("int", "key", 1))
    with pytest.raises(ValueError, match="its end row after it"):
        bare_codec(row("size_range_end", None, index=0), row("int", "key", 1))
    inner = bare_codec(row("int", "key", 1))
    with pytest.raises(ValueError, match="or an int row"):
        bare_codec(row("const", None, 1), row("array_args", "key", flags=16, index=0, obj=inner))
