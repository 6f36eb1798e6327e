"""Everything here runs against another implementation (the official pulsar-client, the real
pravega client) as a peer: marked ``interop``, which ``make test-fast`` leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markers import mark_folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.interop)
