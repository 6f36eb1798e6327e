"""An embedded Apache Pulsar broker built on the generated bindings.

One process, one broker: it answers lookups with its own address, stores topics in memory or
in an append-only log (``data_dir``), and speaks the binary protocol well enough for the
official clients. See ``server`` for the ways to run it.
"""

from .security import Security
from .server import BrokerProcess, BrokerThread, EmbeddedBroker
from .state import BrokerState
from .topics import normalize_topic

__all__ = ["BrokerProcess", "BrokerState", "BrokerThread", "EmbeddedBroker", "Security",
           "normalize_topic"]
