"""Ack sets cost work linear in their size, and one longer than its entry's batch is refused.

Regression test for issue 18, failure 3: ``words_to_mask`` ORed each word in at a growing shift
(quadratic), uncapped, on the event loop: a 640 KB ACK blocked every connection for a minute.
"""

from __future__ import annotations

import time

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.subscriptions import mask_to_words, words_to_mask
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandPing,
    CommandRedeliverUnacknowledgedMessages,
    MessageIdData,
    ServerError,
)
from tests.support.pulsar_raw import RawClient, run

Type = BaseCommand.Type


@pytest.mark.parametrize("mask", [0, 1, 0b1010, (1 << 63), (1 << 64) - 1, (1 << 64),
                                  (1 << 200) | 5, (1 << 4096) - 1])
def test_words_and_masks_round_trip(mask: int) -> None:
    words = mask_to_words(mask)
    assert len(words) == (mask.bit_length() + 63) // 64
    assert all(-(1 << 63) <= w < (1 << 63) for w in words)  # int64 on the wire
    assert words_to_mask(words) == mask


def test_words_to_mask_reads_int64_words_least_significant_first() -> None:
    assert words_to_mask([-1]) == (1 << 64) - 1
    assert words_to_mask([0, 1]) == 1 << 64
    assert words_to_mask([3, -(1 << 63)]) == 3 | (1 << 127)


def test_a_huge_ack_set_converts_in_linear_time() -> None:
    # 640 KB of words: a minute with the quadratic conversion, milliseconds with a linear one.
    # CPU time with a bound a hundred times the expected cost, so a loaded machine passes.
    words = [-1] * 80_000
    start = time.process_time()
    mask = words_to_mask(words)
    back = mask_to_words(mask)
    assert time.process_time() - start < 2.0
    assert mask == (1 << (64 * 80_000)) - 1 and back == words


def ack(ledger: int, entry: int, words: list[int], request_id: int | None = None) -> BaseCommand:
    body = CommandAck(consumer_id=1, ack_type=CommandAck.AckType.Individual,
                      message_id=[MessageIdData(ledgerId=ledger, entryId=entry, ack_set=words)])
    if request_id is not None:
        body.request_id = request_id
    return BaseCommand(type_=Type.ACK, ack=body)


@run
async def test_an_ack_set_longer_than_its_batch_is_an_error_answer_not_work() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        other = await RawClient.connect(url)
        await client.producer("acks")
        await client.publish(1, 0, b"four messages", batch=4)
        ledger, entry = await client.receipt()
        await client.subscribe("acks", "sub", consumer_id=1, permits=100)
        assert (await client.message())[0] == entry
        # 20,000 words (160 KB) for a batch of 4 messages, which has one word.
        await client.send(ack(ledger, entry, [-1] * 20_000, request_id=7))
        answer = (await client.expect(Type.ACK_RESPONSE)).command.ackResponse
        assert answer is not None and answer.request_id == 7
        assert answer.error == ServerError.NotAllowedError
        assert "20000 words" in answer.message and "4 messages" in answer.message
        # Two words for four messages is one too many as well.
        await client.send(ack(ledger, entry, [0b0010, 0], request_id=8))
        answer = (await client.expect(Type.ACK_RESPONSE)).command.ackResponse
        assert answer is not None and answer.error == ServerError.NotAllowedError
        # The broker kept serving everyone.
        await other.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await other.expect(Type.PONG)
        # The refused acks changed nothing: the whole batch comes again.
        await client.send(BaseCommand(
            type_=Type.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=CommandRedeliverUnacknowledgedMessages(
                consumer_id=1)))
        _, _, frame = await client.message()
        assert frame.command.message is not None and frame.command.message.ack_set == []
        # One word is right, and is applied: messages 0 and 2 acknowledged.
        await client.send(ack(ledger, entry, [0b1010], request_id=9))
        answer = (await client.expect(Type.ACK_RESPONSE)).command.ackResponse
        assert answer is not None and not answer.has_error()
        await client.send(BaseCommand(
            type_=Type.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=CommandRedeliverUnacknowledgedMessages(
                consumer_id=1)))
        _, _, frame = await client.message()
        assert frame.command.message is not None
        assert frame.command.message.ack_set == [0b1010]
        await client.close()
        await other.close()


@run
async def test_an_oversized_ack_set_without_a_request_id_is_dropped() -> None:
    broker = EmbeddedBroker(port=0)
    async with broker as url:
        client = await RawClient.connect(url)
        await client.producer("acks")
        await client.publish(1, 0, b"single")
        ledger, entry = await client.receipt()
        await client.subscribe("acks", "sub", consumer_id=1, permits=100)
        await client.message()
        await client.send(ack(ledger, entry, [-1] * 20_000))
        await client.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await client.expect(Type.PONG)
        sub = broker.state.topics["persistent://public/default/acks"].subscriptions["sub"]
        assert sub.mark_delete == entry - 1  # not acknowledged
        await client.send(ack(ledger, entry, [], request_id=3))
        answer = (await client.expect(Type.ACK_RESPONSE)).command.ackResponse
        assert answer is not None and not answer.has_error()
        assert sub.mark_delete == entry
        await client.close()
