"""The rows TANK brought to the compiled frame codec, against the Python methods.

Params read by programs, and the arguments of nested structs and of their arrays (with the
item's ``_index``); derived fields; guards leaving out a varint, prefixed bytes, bytes to the
end or a nested struct; ``value:`` fields (with ``if``/``else``); a nested struct filling the
varint size before it. Each is checked as ``test_compiled_frame_ops.py`` checks the older
rows: the same bytes, the same values, the same errors, on random values, values that break a
rule, every truncation and random damage; well-formed input stays in C; rows that do not hold
together are refused.
"""

from __future__ import annotations

import gc
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_protocols
from protoframe.generated.tank import frames as tank
from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    check_random_damage,
    check_truncations,
    outcome,
    python_calls,
    same,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled

pytestmark = needs_framecodec


def _same_decodes(cls: type, data: bytes) -> str:
    if cls is tank.Frame:
        return same(lambda: tank.Frame.decode(data, to_server=True))[0]
    kind = same(lambda: cls.decode(data))[0]  # type: ignore[attr-defined]
    same(lambda: cls.decode_from(data, 0, len(data)))  # type: ignore[attr-defined]
    return kind


# --- values ---------------------------------------------------------------------------------------


def _message(rng: random.Random, sparse: bool, first: bool, last: bool, odd: int = 0,
             content: int = 30) -> tank.Message:
    """A message with each conditional field set exactly when its condition holds (``odd``: a
    bit mask of the fields to get wrong)."""
    flags = rng.randrange(8)
    holds = {"seq_delta": sparse and not first and not last and not flags & 4,
             "timestamp": not flags & 2, "key": bool(flags & 1)}
    values: dict[str, Any] = {}
    for bit, (name, there) in enumerate(holds.items()):
        there = there != bool(odd >> bit & 1)
        if not there:
            values[name] = None
        elif name == "key":
            values[name] = rng.randbytes(rng.randrange(12))
        else:
            values[name] = rng.choice([0, 1, 127, 128, rng.randrange(2**64)])
    return tank.Message(flags=flags, content=rng.randbytes(rng.randrange(content)), **values)


def _bundle(rng: random.Random, count: int | None = None, odd: int = 0) -> tank.Bundle:
    """A bundle with ``count`` messages (random when None): uncompressed or not, sparse or not,
    its count in the flags or in a varint (``odd``: a message field to get wrong)."""
    if count is None:
        count = rng.choice([0, 1, 2, 3, 15, 16, 17, rng.randrange(40)])
    sparse = rng.random() < 0.4
    codec = 0 if rng.random() < 0.8 else 1
    wrong = rng.randrange(count) if count and odd else -1
    messages = [_message(rng, sparse, k == 0, k == count - 1, odd if k == wrong else 0)
                for k in range(count)]
    return tank.Bundle(
        codec=codec, sparse=sparse, msg_count=count,
        first_seqnum=rng.randrange(2**64) if sparse else None,
        last_seqnum_delta=rng.randrange(2**40) if sparse and count != 1 else None,
        messages=tank.MessageSet(messages=messages) if codec == 0 else None,
        compressed=rng.randbytes(rng.randrange(20)) if codec else None)


def _produce(rng: random.Random, with_seqnum: bool, odd: int = 0) -> tank.Frame:
    topics = [tank.ProduceTopic(name=rng.choice(["t", "orders", "é"]), partitions=[
        tank.ProducePartition(partition=rng.randrange(2**16), bundle=_bundle(rng, odd=odd),
                              first_msg_seqnum=rng.randrange(2**64) if with_seqnum else None)
        for _ in range(rng.randrange(3))]) for _ in range(rng.randrange(1, 3))]
    request = tank.ProduceWithSeqnumRequest if with_seqnum else tank.ProduceRequest
    return tank.Frame(body=request(client_version=2, request_id=rng.randrange(2**32),
                                   client_id="c", required_acks=1, ack_timeout=10, topics=topics))


# --- what is compiled -----------------------------------------------------------------------------


def test_the_produce_path_and_the_bundles_are_compiled() -> None:
    for cls in (tank.Message, tank.MessageSet, tank.Bundle, tank.BundleEntry, tank.Chunk,
                tank.ProducePartition, tank.ProduceTopic, tank.ProduceRequest,
                tank.ProduceWithSeqnumRequest, tank.Frame):
        assert compiled.is_compiled(cls), cls
    # The frame's switch decodes another struct each way: its compiled decode methods take
    # the direction as the Python ones do.
    frame = tank.Frame.__dict__
    assert frame["decode"] is not compiled._python_methods[tank.Frame][1]
    assert frame["decode_from"] is not compiled._python_methods[tank.Frame][2]


# --- random values --------------------------------------------------------------------------------


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), with_seqnum=st.booleans(), odd=st.sampled_from([0, 0, 1, 2, 4]))
def test_random_produce_frames_round_trip_the_same_with_both_codecs(seed: int, with_seqnum: bool,
                                                                   odd: int) -> None:
    frame = _produce(random.Random(seed), with_seqnum, odd)
    kind, _ = same(frame.encode)
    same(frame.body.encode)
    if kind == "value":
        wire = frame.encode()
        assert _same_decodes(tank.Frame, wire) == "value"
        assert tank.Frame.decode(wire, to_server=True) == frame
        body = wire[5:]
        assert _same_decodes(type(frame.body), body) == "value"


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), odd=st.sampled_from([0, 0, 1, 2, 4]))
def test_random_bundles_and_chunks_round_trip_the_same_with_both_codecs(seed: int,
                                                                       odd: int) -> None:
    rng = random.Random(seed)
    bundles = [_bundle(rng, odd=odd) for _ in range(rng.randrange(1, 4))]
    chunk = tank.Chunk(bundles=[tank.BundleEntry(bundle=b) for b in bundles])
    values: list[tank.Bundle | tank.Chunk] = [*bundles, chunk]
    for value in values:
        kind, _ = same(value.encode)
        if kind == "value":
            wire = value.encode()
            assert _same_decodes(type(value), wire) == "value"
            assert type(value).decode(wire) == value


def test_odd_frame_bodies_encode_as_the_python_codec_does() -> None:
    for body in ("x", None, tank.Ping(), tank.ProduceResponse(request_id=1, statuses=[]),
                 tank.ConsumeResponse(request_id=1, topics=[], chunks=b"c"),
                 tank.ProduceRequest(client_version=2, request_id=1, client_id="c",
                                     required_acks=1, ack_timeout=1, topics=[]),
                 tank.ProduceRequest(client_version=2**16, request_id=1, client_id="c",
                                     required_acks=1, ack_timeout=1, topics=[])):
        same(tank.Frame(body=body).encode)  # type: ignore[arg-type]


def test_the_bench_frames_agree() -> None:
    wire = frames_protocols.tank_ours_encode()
    assert same(frames_protocols.tank_ours_encode)[1] == repr(wire)
    same(lambda: frames_protocols.tank_ours_decode(wire))
    assert frames_protocols.tank_ours_decode(wire) == frames_protocols.TANK_EXPECTED


# --- values that break a rule ---------------------------------------------------------------------


def test_values_breaking_the_specs_rules_encode_as_the_python_codec_does() -> None:
    rng = random.Random(8)
    good = _bundle(rng, count=3)
    assert good.codec == 0 or good.messages is None
    messages = tank.MessageSet(messages=[_message(rng, False, k == 0, k == 2) for k in range(3)])
    plain: dict[str, Any] = {"codec": 0, "sparse": False, "msg_count": 3, "messages": messages}
    odd: list[dict[str, Any]] = [
        {"codec": 4}, {"codec": 3}, {"codec": -1}, {"codec": 1}, {"codec": True},
        {"codec": 1, "messages": None, "compressed": b"x"}, {"compressed": b"x"},
        {"sparse": 2}, {"sparse": 1}, {"sparse": True}, {"sparse": None},
        {"sparse": True, "first_seqnum": 5}, {"first_seqnum": 5},
        {"msg_count": 2}, {"msg_count": 0}, {"msg_count": 16}, {"msg_count": -3},
        {"msg_count": 2**64}, {"msg_count": 3.0}, {"msg_count": "3"},
        {"messages": None}, {"messages": tank.MessageSet(messages=[])},
        {"messages": tank.MessageSet(messages=(*messages.messages,))},  # type: ignore[arg-type]
        {"last_seqnum_delta": 1},
    ]
    for change in odd:
        bundle = tank.Bundle(**{**plain, **change})
        same(bundle.encode)
        same(tank.BundleEntry(bundle=bundle).encode)
        partition = tank.ProducePartition(partition=1, bundle=bundle)
        same(lambda: partition.encode(with_seqnum=False))  # noqa: B023
        same(partition.encode)  # type: ignore[arg-type]  # its params left out
        topic = tank.ProduceTopic(name="t", partitions=[partition])
        same(lambda: topic.encode(with_seqnum=True))  # noqa: B023
        same(tank.ProduceRequest(client_version=2, request_id=1, client_id="c", required_acks=1,
                                  ack_timeout=1, topics=[tank.ProduceTopic(name="t", partitions=[
                                      tank.ProducePartition(partition=1, bundle=bundle)])]).encode)
    odd_messages: list[dict[str, Any]] = [
        {"flags": 256}, {"flags": -1}, {"flags": None}, {"flags": 1, "key": None},
        {"flags": 0, "key": b"k"}, {"flags": 2, "timestamp": 5}, {"timestamp": None},
        {"timestamp": 2**64}, {"key": b"x" * 256}, {"key": "text", "flags": 1},
        {"content": "text"}, {"seq_delta": 1}, {"flags": 4.0},
    ]
    base: dict[str, Any] = {"flags": 0, "timestamp": 1, "key": None, "content": b"c"}
    for change in odd_messages:
        msgs = [tank.Message(**base), tank.Message(**{**base, **change})]
        for sparse in (False, True):
            bundle = tank.Bundle(codec=0, sparse=sparse, msg_count=2,
                                 first_seqnum=1 if sparse else None,
                                 last_seqnum_delta=1 if sparse else None,
                                 messages=tank.MessageSet(messages=msgs))
            same(bundle.encode)
    seqnum = tank.ProducePartition(partition=1, bundle=good)
    for with_seqnum, first in ((True, None), (True, 5), (False, 5), (True, -1), (True, True)):
        seqnum.first_msg_seqnum = first
        request = tank.ProduceWithSeqnumRequest if with_seqnum else tank.ProduceRequest
        same(request(client_version=2, request_id=1, client_id="c", required_acks=1,
                      ack_timeout=1, topics=[tank.ProduceTopic(name="t", partitions=[seqnum])]
                      ).encode)
    many = tank.ProduceTopic(name="t", partitions=[tank.ProducePartition(
        partition=1, bundle=tank.Bundle(codec=1, sparse=False, msg_count=1, compressed=b""))] * 256)
    same(tank.ProduceRequest(client_version=2, request_id=1, client_id="c", required_acks=1,
                              ack_timeout=1, topics=[many]).encode)


def test_a_struct_taking_params_on_its_own_runs_the_python_methods() -> None:
    """Decoding or encoding a struct that takes params, with them as keywords or without."""
    rng = random.Random(3)
    message = _message(rng, True, False, False)
    wire = message.encode(sparse=True, first=False, last=False)
    for kwargs in ({"sparse": True, "first": False, "last": False},
                   {"sparse": False, "first": True, "last": True}, {}):
        same(lambda: message.encode(**kwargs))  # noqa: B023
        same(lambda: tank.Message.decode(wire, **kwargs))  # noqa: B023
        same(lambda: tank.Message.decode_from(wire, 0, len(wire), **kwargs))  # noqa: B023
    same(message.encode)  # type: ignore[arg-type]
    messages = tank.MessageSet(messages=[message])
    same(lambda: messages.encode(count=1, sparse=True))
    same(lambda: messages.encode(count=2, sparse=True))


# --- damaged input --------------------------------------------------------------------------------


def _samples() -> list[tuple[type, bytes]]:
    rng = random.Random(21)
    out: list[tuple[type, bytes]] = [(tank.Frame, frames_protocols.tank_ours_encode())]
    for with_seqnum in (False, True):
        for _ in range(4):
            frame = _produce(rng, with_seqnum)
            out += [(tank.Frame, frame.encode()), (type(frame.body), frame.body.encode())]
    for count in (0, 1, 2, 15, 16, 20):
        bundle = _bundle(rng, count=count)
        out += [(tank.Bundle, bundle.encode()),
                (tank.Chunk, tank.Chunk(bundles=[tank.BundleEntry(bundle=bundle)] * 2).encode())]
    sparse = tank.Bundle(codec=0, sparse=True, msg_count=3, first_seqnum=9, last_seqnum_delta=2,
                         messages=tank.MessageSet(messages=[
                             _message(rng, True, k == 0, k == 2) for k in range(3)]))
    out.append((tank.Bundle, sparse.encode()))
    return out


@pytest.mark.slow  # every cut of a 1,000-message bundle: seconds (random damage covers it fast)
def test_every_truncation_gives_the_same_outcome() -> None:
    check_truncations(_samples(), _same_decodes)


def test_random_damage_gives_the_same_outcome() -> None:
    check_random_damage(_samples(), seed=22, rounds=scaled(100), decodes=_same_decodes)


def test_odd_headers_decode_as_the_python_codec_does() -> None:
    message = b"\x00" + bytes(8) + b"\x01m"  # flags 0: a timestamp, no key, content "m"
    cases = [
        b"\x04" + message,  # one message, its count in the flags
        b"\x00\x01" + message,  # the count in a varint
        b"\x00\x00",  # none, in a varint
        b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a varint count of 2**63
        b"\x00" + b"\xff" * 9 + b"\x7f",  # a varint count past 64 bits
        b"\x00\xff\xff\xff\xff\x0f" + message,  # 2**32 - 1 messages, one there
        b"\x08" + message + message,  # two
        b"\x48" + bytes(8) + b"\x01" + message + b"\x00" + message,  # sparse, a delta each
        b"\x44" + bytes(8) + message,  # sparse, one message: no last delta
        b"\x05" + b"raw",  # compressed: the rest is kept
        b"\x07",  # codec 3, nothing after
        b"\x84" + message,  # bit 7, ignored
        b"\x04" + b"\x04" + bytes(8) + b"\x01m",  # SeqNumPrevPlusOne, not sparse
        b"\x04" + b"\x03\x02kk\x01m",  # a key, no timestamp
    ]
    for data in cases:
        _same_decodes(tank.Bundle, data)
        entry = bytes([len(data)]) + data
        _same_decodes(tank.Chunk, entry + entry)
        _same_decodes(tank.BundleEntry, bytes([len(data) + 1]) + data)  # size too large
        if data:
            _same_decodes(tank.BundleEntry, bytes([len(data) - 1]) + data)  # too small


# --- C stays in C ---------------------------------------------------------------------------------


def test_well_formed_produce_requests_and_bundles_stay_in_c() -> None:
    for cls, wire in _samples():
        if cls is tank.Frame:
            calls = python_calls(tank, lambda: tank.Frame.decode(wire, to_server=True))  # noqa: B023
            assert calls == [], calls
            frame = tank.Frame.decode(wire, to_server=True)
            assert python_calls(tank, frame.encode) == []
            continue
        decode: Callable[[bytes], Any] = cls.decode  # type: ignore[attr-defined]
        value = decode(wire)
        assert python_calls(tank, lambda: decode(wire)) == [], cls  # noqa: B023
        assert python_calls(tank, value.encode) == [], cls
    # A give-up does run them: the check above would see it.
    assert python_calls(tank, lambda: outcome(lambda: tank.Bundle.decode(b"\x04"))) != []


def test_omitted_conditional_fields_are_none_with_both_constructors() -> None:
    made = tank.Message(flags=3, content=b"")
    with compiled.pure_python():
        reference = tank.Message(flags=3, content=b"")
    assert made == reference and made.timestamp is None and made.key is None
    bundle = tank.Bundle(codec=1, sparse=False, msg_count=2)
    with compiled.pure_python():
        assert bundle == tank.Bundle(codec=1, sparse=False, msg_count=2)
    assert bundle.messages is None and bundle.first_seqnum is None


# --- resources ------------------------------------------------------------------------------------


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks() -> None:
    samples: list[tuple[Any, bytes]] = [(cls, wire) for cls, wire in _samples()
                                        if cls is not tank.Frame]
    values = [(cls, wire, cls.decode(wire)) for cls, wire in samples]
    broken = [(cls, wire[:-1]) for cls, wire in samples]

    def rounds(n: int) -> None:
        for _ in range(n):
            for cls, wire, value in values:
                value.encode()
                cls.decode(wire)
            for cls, wire in broken:
                try:
                    cls.decode(wire)
                except Exception:  # noqa: BLE001, S110 - the give-up path is what runs
                    pass

    rounds(20)
    gc.collect()
    counts = [sys.getrefcount(wire) for _, wire, _ in values]
    before = sys.getallocatedblocks()
    rounds(200)
    gc.collect()
    assert [sys.getrefcount(wire) for _, wire, _ in values] == counts
    assert sys.getallocatedblocks() - before < 300


# --- tables that do not hold together -------------------------------------------------------------


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    cls = make_dataclass("Odd", [("body", object), ("key", int)], slots=True)
    ops, x = vocabulary.OPS, vocabulary.EXPR

    def codec(*rows: tuple[Any, ...], nparams: int = 0) -> Any:
        return _framecodec.FrameCodec(cls, rows, True, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None,
                                      nparams)

    def row(op: str, name: str | None, width: int = 0, flags: int = 0, index: int = -1,
            number: int = 0, obj: Any = None, program: Any = None) -> tuple[Any, ...]:
        return (ops[op], name, width, flags, index, number, obj, program, None, None)

    key = row("int", "key", 1)
    yes = ((x["const"], 1),)
    inner = codec(key, nparams=1)
    with pytest.raises(ValueError, match="a row it can leave out"):
        codec(key, row("guard", None, program=yes))
    with pytest.raises(ValueError, match="right after its guard"):
        codec(row("int", "key", 1, flags=8))
    with pytest.raises(ValueError, match="only a value row"):
        codec(row("guard", None, flags=16, program=yes), row("int", "key", 1, flags=8))
    # A guard leaves out a C string or a length-encoded integer (MariaDB's), not a nullable one.
    codec(row("guard", None, program=yes), row("terminated", "key", flags=8, obj=b"\x00"))
    codec(row("guard", None, program=yes), row("lenenc_int", "key", flags=8))
    with pytest.raises(ValueError, match="a row it can leave out"):
        codec(row("guard", None, program=yes), row("lenenc_int", "key", flags=8 | 32))
    # A guard's has() reads an earlier stored field, not a later one.
    codec(row("bytes", "body"), row("guard", None, program=((x["has"], 0),)),
          row("int", "key", 1, flags=8))
    with pytest.raises(ValueError, match="or a guard's of an earlier field"):
        codec(row("guard", None, program=((x["has"], 1),)), row("int", "key", 1, flags=8))
    with pytest.raises(ValueError, match="no such param"):
        codec(row("derive", "key", program=((x["param"], 1),)), nparams=1)
    with pytest.raises(ValueError, match="only an array's items"):
        codec(row("derive", "key", program=((x["index"], 0),)))
    with pytest.raises(ValueError, match="earlier integer rows"):
        codec(row("derive", "key", program=((x["field"], 1),)), key)
    with pytest.raises(ValueError, match="does not leave"):
        codec(row("derive", "key", program=((x["const"], 1), (x["const"], 2))))
    with pytest.raises(ValueError, match="does not balance"):
        codec(row("derive", "key", program=((x["const"], 1), (x["select"], 0))))
    with pytest.raises(ValueError, match="nested struct's params"):
        codec(row("struct_args", "body", obj=inner, number=2,
                  program=((x["const"], 1), (x["const"], 2))))
    with pytest.raises(ValueError, match="a count_of row before it or a param"):
        codec(row("array_args", "body", obj=inner, number=1, width=0, program=yes))
    with pytest.raises(ValueError, match="struct_sized row after it"):
        codec(row("size_of_struct", None, flags=4, index=0))
    with pytest.raises(ValueError, match="size row before it"):
        codec(row("struct_sized", "body", obj=codec(key), index=0))
    with pytest.raises(ValueError, match="at most"):
        codec(key, nparams=99)
