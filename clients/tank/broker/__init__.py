"""An embedded TANK broker built on the generated bindings: in-memory partition logs behind
an asyncio TCP server, enough to exercise the client over real connections."""

from .log import PartitionLog
from .server import EmbeddedTankBroker
from .state import BadBundle, BrokerState

__all__ = ["BadBundle", "BrokerState", "EmbeddedTankBroker", "PartitionLog"]
