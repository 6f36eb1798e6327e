"""A backlog costs disk, not memory (issue 18, failure 7): the broker keeps only where each
persisted entry is in the log (about 32 bytes per entry: ``entries.EntryTable``) and reads
payloads back through a bounded cache; recovery streams the log. Measured from /proc in a
child broker process.

Scaled down from the issue's 200,000 messages to 50,000 (1 KB each, 50 MB of payload) to stay
short; the bound is 32 MB of RSS growth, with the payload cache set to 4 MB. The code before
this test held every payload: +58 MB here (+230 MB for 200,000), and recovery read the whole
log into memory at once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.clients.pulsar.broker.backlog import measure

pytestmark = pytest.mark.slow

COUNT = 50_000
BOUND_KIB = 32 * 1024


@pytest.mark.timeout(900)
def test_a_backlog_of_1kb_messages_costs_bounded_rss(tmp_path: Path) -> None:
    result = measure(tmp_path, COUNT, extra_args=("--managed-ledger-cache-size-mb", "4"))
    logging.getLogger(__name__).info("backlog of %d x 1 KB: %s", COUNT, result)
    assert result["log_bytes"] > COUNT * 1024
    assert result["full_kib"] - result["idle_kib"] < BOUND_KIB, result
    assert result["recovery_peak_kib"] - result["idle_kib"] < BOUND_KIB, result
