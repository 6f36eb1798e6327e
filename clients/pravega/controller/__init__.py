"""A minimal Pravega controller for tests: gRPC front (``server``) over plain state (``state``)."""

from .remote import RemoteSegmentTable
from .server import RPCS, SERVICE, ControllerServer
from .state import ControllerState, segment_name

__all__ = ["RPCS", "SERVICE", "ControllerServer", "ControllerState", "RemoteSegmentTable",
           "segment_name"]
