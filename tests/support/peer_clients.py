"""Whether the official Pravega client, which the interop tests run as a peer, is installed;
and if not, why, for their skip reason."""

from __future__ import annotations

import importlib.util
import sys

import pytest

_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

PRAVEGA_MISSING: str | None
if importlib.util.find_spec("pravega_client") is not None:
    PRAVEGA_MISSING = None
elif sys.version_info >= (3, 12):
    # pyproject.toml's dev extra leaves it out there, by an environment marker.
    PRAVEGA_MISSING = (f"the pravega package (import pravega_client) has no wheel for Python "
                       f"{_VERSION}, so the dev extra does not install it there")
else:
    PRAVEGA_MISSING = ("the pravega package (import pravega_client) is not installed, or has no "
                       "wheel for this platform; pip install -e '.[dev]' installs it")

needs_pravega = pytest.mark.skipif(PRAVEGA_MISSING is not None, reason=PRAVEGA_MISSING or "")
