"""The embedded segment store: segments (``segments``), table segments (``tables``, answered by
``table_requests``), per-connection logic (``session``) and the asyncio server (``server``)."""

from .segments import Segment, SegmentTable
from .server import EmbeddedSegmentStore
from .session import StoreSession
from .tables import TableStore

__all__ = ["EmbeddedSegmentStore", "Segment", "SegmentTable", "StoreSession", "TableStore"]
