"""Fuzzing the TANK stream decoders, both directions, and what the client and broker do next.

A seeded mutator damages a corpus of valid frames (requests to the broker, responses to the
client: bundles plain, keyed, sparse, Snappy-compressed, with cut tails) and feeds the result to
``StreamDecoder`` in random chunks. For every case:

* the properties listed in ``fuzzing.py``: only ``runtime.errors.DecodeError`` subclasses
  escape; the buffer stays under ``max_frame_size``; a failed ``feed`` skips the bad frame, so
  draining with ``feed(b"")`` always makes progress; a bad header stops the stream;
* every frame that decodes re-encodes to the same bytes, and goes one step further: a consume
  response through the client's chunk reader; a produce request into the broker's state (which
  may refuse it only with ``DecodeError`` or ``BadBundle``), whose stored bundles the client
  must then read back without error; a consume request answered by a broker state with an
  encodable response.

The run is bounded by a case count and a time budget; failures name the case and its input.
"""

from __future__ import annotations

import random
import struct
from functools import partial
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.clients.tank.broker import BadBundle, BrokerState
from protoframe.clients.tank.bundles import build_bundle, read_chunk
from protoframe.clients.tank.messages import Message
from protoframe.clients.tank.responses import consume_outcomes
from protoframe.generated.tank import frames
from protoframe.runtime.codec.protowire import varint_bytes
from protoframe.runtime.errors import DecodeError
from tests.generated.fuzzing import Case, Failure, Mutator, StreamTarget, run_campaign, u32_field_op

pytestmark = pytest.mark.slow  # a seeded fuzzing campaign of thousands of cases

MAX_FRAME = 4096
SEED = 0x7A4C
TARGET_CASES = 20_000
MIN_CASES = 3_000  # always run, whatever the machine's load; more while the budget lasts
TIME_BUDGET = 8.0
CASE_LIMIT = 1.0
U32 = struct.Struct("<I")
MAX_UNCOMPRESSED = 1 << 20


# --- a corpus of valid frames ----------------------------------------------------------------


def _bundles(rng: random.Random) -> list[frames.Bundle]:
    def messages(n: int, seq: int | None = None) -> list[Message]:
        out = []
        for _ in range(n):
            out.append(Message(rng.randbytes(rng.randint(0, 30)),
                               key=rng.randbytes(rng.randint(0, 6)) if rng.random() < 0.5
                               else None,
                               timestamp=rng.choice([1, 1, 2, 1_700_000_000_000]),
                               seq_num=seq))
            if seq is not None:
                seq += rng.randint(1, 3)
        return out

    out = []
    for n in (1, 3, 16, 20):
        out.append(build_bundle(messages(n), compression=False))
        out.append(build_bundle(messages(n), compression=True))
        out.append(build_bundle(messages(n, seq=rng.randint(1, 500)), sparse=True,
                                compression=rng.random() < 0.5))
    return out


def _entry(bundle: frames.Bundle) -> bytes:
    data = bundle.encode()
    return varint_bytes(len(data)) + data


def build_corpus() -> tuple[list[bytes], list[bytes]]:
    """(frames to the broker, frames to the client)."""
    rng = random.Random(SEED)
    bundles = _bundles(rng)
    to_server: list[frames.FrameBody] = [frames.Ping()]
    to_client: list[frames.FrameBody] = [frames.Ping()]
    for i in range(0, len(bundles), 3):
        group = bundles[i:i + 3]
        partitions = [frames.ProducePartition(partition=p, bundle=b) for p, b in enumerate(group)]
        to_server.append(frames.ProduceRequest(
            client_version=2, request_id=i, client_id="fuzz", required_acks=0, ack_timeout=0,
            topics=[frames.ProduceTopic(name="t", partitions=partitions),
                    frames.ProduceTopic(name="u", partitions=partitions[:1])]))
        with_seq = [frames.ProducePartition(partition=p, first_msg_seqnum=b.first_seqnum or 7,
                                            bundle=b) for p, b in enumerate(group)]
        to_server.append(frames.ProduceWithSeqnumRequest(
            client_version=2, request_id=i, client_id="", required_acks=1, ack_timeout=5,
            topics=[frames.ProduceTopic(name="t", partitions=with_seq)]))
    for version in (2, 3):
        to_server.append(frames.ConsumeRequest(
            client_version=version, request_id=3, client_id="c", max_wait_ms=100, min_bytes=1,
            op_flags=1 if version == 3 else None, topics=[
                frames.ConsumeTopic(name="t", partitions=[
                    frames.ConsumePartition(partition=p, abs_seq_num=s, fetch_size=f)
                    for p, s, f in ((0, 0, 4096), (1, 2**64 - 1, 1), (2, 17, 100))])]))
    to_client.append(frames.ProduceResponse(request_id=1, statuses=[
        frames.ProduceStatus(error=e) for e in (0, 1, 10, 0xFF)] + [
        frames.ProduceStatus(error=0xFC, leader_addr=0x0100007F, leader_port=11011)]))
    for error in (0, 2, 0xFE, 0xFF):
        to_client.append(frames.ProduceResponse(request_id=error, statuses=[
            frames.ProduceStatus(error=error)]))
    for i in range(0, len(bundles), 2):
        plain = b"".join(_entry(b) for b in bundles[i:i + 4] if not b.sparse)
        sparse = b"".join(_entry(b) for b in bundles[i:i + 4] if b.sparse)
        cut = plain[:max(1, len(plain) - rng.randint(1, 20))]
        chunks = [plain, sparse, cut]
        results = [
            frames.ConsumePartitionResult(partition=0, error_or_flags=0, base_seqnum=5,
                                          highwater_mark=900, chunk_length=len(plain)),
            frames.ConsumePartitionResult(partition=1, error_or_flags=0xFE, highwater_mark=900,
                                          chunk_length=len(sparse)),
            frames.ConsumePartitionResult(partition=2, error_or_flags=0, base_seqnum=1,
                                          highwater_mark=900, chunk_length=len(cut)),
            frames.ConsumePartitionResult(partition=3, error_or_flags=1, base_seqnum=0,
                                          highwater_mark=900, chunk_length=0,
                                          first_available_seqnum=2),
            frames.ConsumePartitionResult(partition=4, error_or_flags=0xFC, leader_addr=1,
                                          leader_port=2),
            frames.ConsumePartitionResult(partition=5, error_or_flags=0xFF)]
        to_client.append(frames.ConsumeResponse(request_id=i, topics=[
            frames.ConsumeTopicResult(name="t", partitions_cnt=len(results), partitions=results),
            frames.ConsumeTopicResult(name="gone", partitions_cnt=2, unknown=True)],
            chunks=b"".join(chunks)))
    servers = [frames.Frame(body=b).encode() for b in to_server]
    clients = [frames.Frame(body=b).encode() for b in to_client]
    servers.append(b"".join(rng.sample(servers, 4)))
    clients.append(b"".join(rng.sample(clients, 4)))
    return servers, clients


TO_SERVER, TO_CLIENT = build_corpus()


# --- the mutator and the oracle -------------------------------------------------------------

_INTERESTING_U32 = [0, 1, 2, 4, 5, 0x7F, 0x80, 0xFF, 0xFFFF, MAX_FRAME - 5, MAX_FRAME - 4,
                    MAX_FRAME, 0x7FFFFFFF, 0xFFFFFFFF]


def _fix_size(out: bytearray) -> None:
    """Make the frame size agree with the damage again, so that it reaches the bodies."""
    if len(out) >= 5:
        U32.pack_into(out, 1, len(out) - 5)


def _mutator(corpus: list[bytes]) -> Mutator:
    # Sizes and header lengths are u32s at no fixed place, so any place may hold one.
    return Mutator(corpus, protocol_ops=(u32_field_op(U32, _INTERESTING_U32),), fix_up=_fix_size)


def check_frame(frame: frames.Frame, to_server: bool) -> None:
    """A decoded frame re-encodes to the same bytes, and what the client or broker does with
    it next succeeds or fails only with ``DecodeError`` (see the module docstring)."""
    wire = frame.encode()
    again = frames.Frame.decode(wire, to_server=to_server).encode()
    if again != wire:
        raise Failure(f"re-encoding changed the frame: {wire.hex()} -> {again.hex()}")
    body = frame.body
    if isinstance(body, frames.ConsumeResponse):
        try:
            outcomes, _ = consume_outcomes(body)
            for data in outcomes.values():
                code = data.result.error_or_flags
                if code in (0, 0xFE):
                    base = data.result.base_seqnum if code == 0 else None
                    read_chunk(data.chunk, base, max_uncompressed=MAX_UNCOMPRESSED)
        except DecodeError:
            pass
    elif isinstance(body, frames.ProduceRequest | frames.ProduceWithSeqnumRequest):
        _check_broker_produce(body)
    elif isinstance(body, frames.ConsumeRequest):
        state = BrokerState({"t": 2}, auto_create=1)
        state.produce(frames.ProduceRequest(
            client_version=2, request_id=0, client_id="", required_acks=0, ack_timeout=0,
            topics=[frames.ProduceTopic(name="t", partitions=[frames.ProducePartition(
                partition=0, bundle=build_bundle([Message(b"x", timestamp=1)]))])]))
        answer, _ = state.consume(body)
        frames.Frame(body=answer).encode()


def _check_broker_produce(body: frames.ProduceRequest | frames.ProduceWithSeqnumRequest) -> None:
    """The broker stores a produce request or refuses it cleanly; the client reads back
    whatever it stored, without error."""
    state = BrokerState({"t": 2}, auto_create=4)
    try:
        response = state.produce(body)
    except (DecodeError, BadBundle):
        return
    frames.Frame(body=response).encode()
    consume = frames.ConsumeRequest(
        client_version=2, request_id=0, client_id="", max_wait_ms=0, min_bytes=0,
        topics=[frames.ConsumeTopic(name=name, partitions=[
            frames.ConsumePartition(partition=p, abs_seq_num=0, fetch_size=1 << 16)
            for p in range(len(logs))]) for name, logs in state.topics.items()])
    answer, _ = state.consume(consume)
    for data in consume_outcomes(answer)[0].values():
        code = data.result.error_or_flags
        read_chunk(data.chunk, data.result.base_seqnum if code == 0 else None)


class Direction(NamedTuple):
    """What goes one way: its corpus, a mutator splicing from it, and its decoder."""

    corpus: list[bytes]
    mutate: Mutator
    target: StreamTarget[frames.Frame]


def _direction(to_server: bool, corpus: list[bytes]) -> Direction:
    return Direction(corpus, _mutator(corpus), StreamTarget(
        partial(frames.StreamDecoder, to_server=to_server), frames.Frame,
        partial(check_frame, to_server=to_server), header_size=5, valid_frame=corpus[0],
        max_frame=MAX_FRAME))


DIRECTIONS = {True: _direction(True, TO_SERVER), False: _direction(False, TO_CLIENT)}


def run_case(data: bytes, rng: random.Random, to_server: bool,
             max_frame: int = MAX_FRAME) -> None:
    DIRECTIONS[to_server].target.run_case(data, rng, max_frame)


def mutate(rng: random.Random, to_server: bool) -> bytes:
    """A damaged frame of a random corpus entry going that way."""
    direction = DIRECTIONS[to_server]
    return direction.mutate(rng.choice(direction.corpus), rng)


# --- tests -----------------------------------------------------------------------------------


def test_corpus_is_valid() -> None:
    for direction in DIRECTIONS.values():
        assert len(direction.corpus) > 8
        direction.target.check_corpus(direction.corpus, max_frame=MAX_FRAME)


def _case(rng: random.Random, number: int) -> Case:
    # Alternating keeps both directions equally covered whatever the budget cuts off.
    to_server = number % 2 == 0
    target = DIRECTIONS[to_server].target
    return Case(mutate(rng, to_server), target.run_case, f"to_server={to_server}")


def test_mutated_frames_raise_only_decode_errors() -> None:
    run_campaign(_case, seed=SEED, target=TARGET_CASES, minimum=MIN_CASES, budget=TIME_BUDGET,
                 case_limit=CASE_LIMIT, name="tank")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**32 - 1), to_server=st.booleans())
def test_arbitrary_bytes_raise_only_decode_errors(data: bytes, seed: int, to_server: bool) -> None:
    run_case(data, random.Random(seed), to_server)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msg_id=st.sampled_from([1, 2, 3, 5, 0, 4, 9, 255]), body=st.binary(max_size=300),
       seed=st.integers(0, 2**32 - 1), to_server=st.booleans())
def test_arbitrary_bodies_behind_good_headers(msg_id: int, body: bytes, seed: int,
                                              to_server: bool) -> None:
    run_case(struct.pack("<BI", msg_id, len(body)) + body, random.Random(seed), to_server)


@settings(max_examples=300, deadline=None)
@given(chunk=st.binary(max_size=300), base=st.none() | st.integers(0, 2**64 - 1))
def test_arbitrary_chunks_raise_only_decode_errors(chunk: bytes, base: int | None) -> None:
    try:
        read_chunk(chunk, base, max_uncompressed=MAX_UNCOMPRESSED)
    except DecodeError:
        pass


def test_small_limits_are_enforced() -> None:
    rng = random.Random(SEED + 1)
    for limit in (1, 4, 5, 6, 64, 1000):
        for i in range(200):
            to_server = i % 2 == 0
            run_case(mutate(rng, to_server), rng, to_server, max_frame=limit)
