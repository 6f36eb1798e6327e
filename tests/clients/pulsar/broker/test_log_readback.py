"""A payload damaged in the log while the broker runs is never served (issue 18, failure 4:
"never serves a message whose CRC fails"). Recovery checks every entry on start; this is the
check on the bytes read back afterwards, when the payload is no longer in memory."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker import storage as st
from protoframe.clients.pulsar.broker.entries import Entry
from protoframe.generated.pulsar.pulsar_api import BaseCommand
from tests.clients.pulsar.broker.logtraffic import send_command
from tests.support.pulsar_raw import RawClient

Type = BaseCommand.Type
TOPIC = "persistent://public/default/readback"


def _flip_last_byte(path: Path, entry: Entry) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        where = entry.offset + entry.size - 1  # inside the message data, under its CRC32C
        (old,) = os.pread(fd, 1, where)
        os.pwrite(fd, bytes([old ^ 0xFF]), where)
    finally:
        os.close(fd)


def test_a_payload_damaged_after_start_is_not_served(tmp_path: Path, caplog: Any) -> None:
    async def main() -> None:
        # No cache: every delivery reads the log, as a backlog larger than the cache does.
        broker = EmbeddedBroker(port=0, data_dir=tmp_path, cache_bytes=0)
        async with broker as url:
            client = await RawClient.connect(url)
            await client.producer("readback", name="p")
            for sequence_id, data in enumerate((b"first", b"second", b"third")):
                await client.send_bytes(send_command(1, sequence_id, data))
                assert (await client.recv()).command.type_ == Type.SEND_RECEIPT
            entries = [e for e in broker.state.topics[TOPIC].entries if e is not None]
            assert len(entries) == 3 and all(e.source is not None for e in entries)
            _flip_last_byte(tmp_path / st.LOG_NAME, entries[1])
            with caplog.at_level(logging.ERROR):
                consumer = await RawClient.connect(url)
                await consumer.subscribe("readback", "s", permits=10)
                # The raw client's decoder checks every message's CRC32C, so a damaged one
                # would fail here rather than pass unnoticed.
                entry_id, data, _ = await consumer.message()
                assert (entry_id, data) == (0, b"first")
                # Entry 1 is not sent: the consumer's connection is closed instead.
                assert await consumer.closed_by_broker()
            assert "entry 1: " in caplog.text and "fails its CRC32C" in caplog.text
            # The broker goes on: the producer's connection still gets receipts.
            await client.send_bytes(send_command(1, 3, b"fourth"))
            assert (await client.recv()).command.type_ == Type.SEND_RECEIPT
            await client.close()

    asyncio.run(asyncio.wait_for(main(), 60))
