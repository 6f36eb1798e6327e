"""Everything here builds the wheel and installs it into a fresh environment: marked ``slow``,
which ``make test-fast`` leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markers import mark_folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.slow)
