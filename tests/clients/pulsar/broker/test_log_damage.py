"""Damage in the log (issue 18, failure 4): a torn tail is cut, damage with valid records after
it is reported and refuses the start unless --repair, which quarantines a copy of what it
removes; nothing that failed Pulsar's CRC32C is ever served. On the code before this test,
recovery cut the log at the first bad record, losing everything after it without a word."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from protoframe import import_root
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker import logframes as lf
from protoframe.clients.pulsar.broker import records as rec
from protoframe.clients.pulsar.broker import storage as st
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import MessageMetadata
from protoframe.runtime.codec.checksums import crc32c
from tests.clients.pulsar.broker.logtraffic import consume_all, write_log
from tests.support.pulsar_raw import RawClient

TOPICS = ["a", "b", "c"]
FULL = {t: f"persistent://public/default/{t}" for t in TOPICS}


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 120))

    return wrapper


def records(path: Path) -> list[tuple[lf.ScannedRecord, rec.Record]]:
    """The valid records of a log file, where they are and what they hold."""
    with open(path, "rb") as f:
        return [(item, rec.decode_record(item.body))
                for item in lf.scan(f.fileno(), os.fstat(f.fileno()).st_size, lf.EntryCheck())
                if isinstance(item, lf.ScannedRecord)]


def entry_record(path: Path, ledger: int, entry_id: int) -> lf.ScannedRecord:
    for item, record in records(path):
        if (isinstance(record, rec.EntryRecord) and record.ledger_id == ledger
                and record.entry_id == entry_id):
            return item
    raise AssertionError(f"no entry {ledger}:{entry_id}")


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


async def refused(data_dir: Path) -> st.CorruptLogError:
    broker = EmbeddedBroker(port=0, data_dir=data_dir)
    with pytest.raises(st.CorruptLogError) as caught:
        await broker.start()
    await broker.stop()
    return caught.value


@pytest.mark.slow  # fills a log with fsyncs, then restarts the broker on it twice
@run
async def test_damage_in_the_middle_refuses_the_start_then_repair_keeps_the_rest(
        tmp_path: Path) -> None:
    acked = await write_log(tmp_path, TOPICS, 20)
    log_file = tmp_path / st.LOG_NAME
    before = log_file.read_bytes()
    damaged = entry_record(log_file, 1, 7)  # topic a's 8th entry, with b and c after it
    flip(log_file, damaged.body_offset + len(damaged.body) - 3)
    after = log_file.read_bytes()

    error = await refused(tmp_path)
    assert "--repair" in str(error) and FULL["a"] in str(error)
    report = json.loads((tmp_path / st.DAMAGE_REPORT).read_text())
    (region,) = report["regions"]
    assert not region["tail"] and region["start"] <= damaged.offset < region["end"]
    assert {"topic": FULL["a"], "ledger": 1, "entry_id": 7} in region["entries"]
    assert log_file.stat().st_size == len(before)  # the log is left as it is

    async with EmbeddedBroker(port=0, data_dir=tmp_path, repair=True) as url:
        for topic in TOPICS:
            got = await consume_all(url, topic, "check")
            expected = {e: d for (t, e), d in acked.items() if t == topic}
            if topic == "a":
                del expected[7]
            assert got == expected
        # New messages never reuse a lost id.
        client = await RawClient.connect(url)
        await client.producer("a", name="after-repair")
        await client.publish(1, 0, b"new")
        assert (await client.receipt())[1] == 20
        await client.close()
    (copy,) = (tmp_path / st.QUARANTINE).iterdir()
    (removed,) = copy.glob("bytes-*.bin")
    assert removed.read_bytes() == after[region["start"]:region["end"]]
    assert json.loads((copy / "report.json").read_text())["missing"] == {FULL["a"]: [[7, 7]]}


@run
async def test_the_cli_refuses_a_damaged_log_with_a_report_and_an_exit_status(
        tmp_path: Path) -> None:
    await write_log(tmp_path, TOPICS, 5)
    damaged = entry_record(tmp_path / st.LOG_NAME, 2, 1)
    flip(tmp_path / st.LOG_NAME, damaged.offset + lf.HEADER_SIZE + 2)
    env = dict(os.environ, PYTHONPATH=import_root())
    result = subprocess.run(
        [sys.executable, "-m", "protoframe.clients.pulsar", "broker", "--port", "0",
         "--data-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "refusing to start" in result.stderr and FULL["b"] in result.stderr
    assert (tmp_path / st.DAMAGE_REPORT).exists()


@run
async def test_a_message_failing_its_crc32c_is_damage_even_with_a_valid_record(
        tmp_path: Path) -> None:
    acked = await write_log(tmp_path, TOPICS, 5)
    log_file = tmp_path / st.LOG_NAME
    item = entry_record(log_file, 1, 2)
    data = bytearray(log_file.read_bytes())
    body = bytearray(item.body)
    body[-1] ^= 0x01  # in the message's data; then the record's checksums are made to fit
    header = lf.record_header(len(body), crc32c(bytes(body)))
    data[item.offset:item.body_offset + len(body)] = header + body
    log_file.write_bytes(bytes(data))

    error = await refused(tmp_path)
    assert "message fails its CRC32C" in str(error)
    async with EmbeddedBroker(port=0, data_dir=tmp_path, repair=True) as url:
        got = await consume_all(url, "a", "check")
        assert got == {e: d for (t, e), d in acked.items() if t == "a" and e != 2}


@pytest.mark.slow  # fills a log with fsyncs, then restarts the broker on it
@run
async def test_a_torn_tail_is_cut_with_a_copy_kept(tmp_path: Path) -> None:
    acked = await write_log(tmp_path, TOPICS, 5)
    log_file = tmp_path / st.LOG_NAME
    last = entry_record(log_file, 3, 4)
    # Entries come before the cursors written when the test subscribed: cut in the entry.
    with open(log_file, "r+b") as f:
        f.truncate(last.body_offset + 5)
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        for topic in TOPICS:
            got = await consume_all(url, topic, "check")
            expected = {e: d for (t, e), d in acked.items() if t == topic}
            if topic == "c":
                del expected[4]
            assert got == expected
    (copy,) = (tmp_path / st.QUARANTINE).iterdir()
    assert json.loads((copy / "report.json").read_text())["regions"][0]["tail"]


def _v1_record(body: bytes) -> bytes:
    return struct.pack(">II", len(body), crc32c(body)) + body


@run
async def test_a_format_1_log_is_read_and_upgraded(tmp_path: Path) -> None:
    """The original format (u32 length, u32 crc32c, body; no file header) is still read, and
    the compaction at start writes it again in format 2."""
    name = "persistent://public/default/old"
    payloads = [frames.Payload(metadata=MessageMetadata(producer_name="p", sequence_id=i,
                                                        publish_time=1000 + i),
                               data=f"old {i}".encode()).encode() for i in range(3)]
    log = bytearray(_v1_record(struct.pack(">BQQ", 1, 1, 0) + struct.pack(">H", len(name))
                               + name.encode()))
    for i, payload in enumerate(payloads):
        head = struct.pack(">BQQiBqQQ", 2, 1, i, 1, 0, 1000 + i, i, i) + b"\x00\x01p"
        log += _v1_record(head + struct.pack(">I", 0) + payload)
    (tmp_path / st.LOG_NAME).write_bytes(bytes(log))
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        assert (tmp_path / st.LOG_NAME).read_bytes().startswith(lf.FILE_MAGIC)
        got = await consume_all(url, "old", "check")
        assert got == {0: b"old 0", 1: b"old 1", 2: b"old 2"}
        client = await RawClient.connect(url)
        await client.producer("old", name="p")
        await client.publish(1, 2, b"resend")  # dedup state came from the format-1 log
        assert (await client.receipt())[1] == 2
        await client.close()
