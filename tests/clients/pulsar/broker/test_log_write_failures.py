"""A record that cannot be written fails its own request only: memory never gets ahead of the
log, every other topic keeps getting receipts, and a restart recovers (issue 18, failures 1
and 2, storage side). On the code before this test, the bad SEND left an entry in memory that
was never stored and the long subscription name stopped every later write (no receipts)."""

from __future__ import annotations

import asyncio
import errno
import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker import storage as st
from protoframe.generated.pulsar.pulsar_api import BaseCommand, CommandSubscribe
from tests.clients.pulsar.broker.logtraffic import consume_all, send_command
from tests.support.pulsar_raw import RawClient

Type = BaseCommand.Type


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 120))

    return wrapper


async def _send(client: RawClient, sequence_id: int, data: bytes, **kwargs: Any) -> Any:
    await client.send_bytes(send_command(1, sequence_id, data, **kwargs))
    return (await client.recv()).command


@run
async def test_an_entry_that_cannot_be_encoded_fails_alone(tmp_path: Path) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        good = await RawClient.connect(url)
        await good.producer("good", name="good")
        bad = await RawClient.connect(url)
        await bad.producer("bad", name="bad")
        assert (await _send(good, 0, b"g0")).type_ == Type.SEND_RECEIPT
        # The log stores publish_time as int64: 2**63 does not fit.
        answer = await _send(bad, 0, b"b0", publish_time=1 << 63)
        assert answer.type_ == Type.SEND_ERROR, answer
        assert (await _send(bad, 1, b"b1")).type_ == Type.SEND_RECEIPT
        assert (await _send(good, 1, b"g1")).type_ == Type.SEND_RECEIPT
        # Nothing of the failed SEND is served: the topic holds b1 only.
        assert list((await consume_all(url, "bad", "s", quiet=0.5)).values()) == [b"b1"]
        await good.close()
        await bad.close()
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        assert list((await consume_all(url, "good", "r")).values()) == [b"g0", b"g1"]
        assert list((await consume_all(url, "bad", "r")).values()) == [b"b1"]


@run
async def test_a_cursor_that_cannot_be_encoded_stops_no_other_write(tmp_path: Path) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        good = await RawClient.connect(url)
        await good.producer("good", name="good")
        assert (await _send(good, 0, b"g0")).type_ == Type.SEND_RECEIPT
        # The cursor record stores the subscription name with a u16 length.
        long = await RawClient.connect(url)
        await long.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic="good", subscription="s" * 70_000, subType=CommandSubscribe.SubType.Shared,
            consumer_id=1, request_id=1)))
        try:
            answer = (await long.recv()).command
            assert answer.type_ == Type.ERROR, answer
        except ConnectionError:
            pass  # refusing by closing the connection is an answer too
        for seq in range(1, 4):
            assert (await _send(good, seq, f"g{seq}".encode())).type_ == Type.SEND_RECEIPT
        await good.close()
        await long.close()
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        got = await consume_all(url, "good", "r")
        assert list(got.values()) == [b"g0", b"g1", b"g2", b"g3"]


@run
async def test_a_failed_write_is_cut_back_and_the_next_one_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk error after part of a batch is in the file (fsync fails): the batch's SEND gets
    an error answer, the log is cut back to where it was, later writes land after it and a
    restart reads them all."""
    log_file = tmp_path / st.LOG_NAME
    real_fsync = os.fsync
    failed: list[int] = []

    def fsync(fd: int) -> None:
        if not failed and log_file.exists() and b"boom" in log_file.read_bytes():
            failed.append(fd)
            raise OSError(errno.EIO, "I/O error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.producer("disk", name="disk")
        assert (await _send(client, 0, b"m0")).type_ == Type.SEND_RECEIPT
        assert (await _send(client, 1, b"boom")).type_ == Type.SEND_ERROR
        assert failed and b"boom" not in log_file.read_bytes()
        assert (await _send(client, 2, b"m2")).type_ == Type.SEND_RECEIPT
        # A resend of the failed message is stored, not taken for a duplicate of it.
        answer = await _send(client, 1, b"boom again")
        assert answer.type_ == Type.SEND_RECEIPT and answer.send_receipt.message_id.entryId == 3
        got = await consume_all(url, "disk", "live", quiet=0.5)
        assert list(got.values()) == [b"m0", b"m2", b"boom again"]
        await client.close()
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        got = await consume_all(url, "disk", "r")
        assert got == {0: b"m0", 2: b"m2", 3: b"boom again"}
