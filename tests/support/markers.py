"""Marking every test under a folder, for the folder's conftest.py.

``pytest_collection_modifyitems`` in any conftest.py sees the whole session's items, so each
folder keeps to the items below it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_folder(items: list[pytest.Item], folder: Path, mark: pytest.MarkDecorator) -> None:
    for item in items:
        if item.path.is_relative_to(folder):
            item.add_marker(mark)
