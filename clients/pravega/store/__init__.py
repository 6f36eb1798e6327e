"""The embedded segment store: segments (``segments``), per-connection logic (``session``) and
the asyncio server (``server``)."""

from .segments import Segment, SegmentTable
from .server import EmbeddedSegmentStore
from .session import StoreSession

__all__ = ["EmbeddedSegmentStore", "Segment", "SegmentTable", "StoreSession"]
