"""The broker a Spark data source test reads and writes: the embedded one on its own thread, or
the session's Apache Pulsar standalone (``tests/support/real_pulsar.py``).

The tests ask only for what both can give: a service URL, partitioned topics, and a namespace
whose topics de-duplicate by producer name and sequence id (the sink's exactly-once writes).
"""

from __future__ import annotations

import urllib.error
from dataclasses import dataclass

import pytest

from protoframe.clients.pulsar.broker import BrokerThread
from tests.support.real_pulsar import RealPulsar

# The real broker's runs are interop (make test-fast leaves them out): they need the standalone
# of tests/support/real_pulsar.py, a minute to start, shared with the client tests.
BROKERS = [pytest.param("embedded", id="embedded"),
           pytest.param("pulsar", id="pulsar", marks=pytest.mark.interop)]

#: A data source test that runs on both brokers; without it, ``pulsar_service`` is the embedded
#: broker alone (Spark tests are slow: the ones that show the source against Apache Pulsar are
#: chosen, see tests/pipeline/conftest.py).
ON_BOTH_BROKERS = pytest.mark.parametrize("pulsar_service", BROKERS, indirect=True)

#: The namespace of the sink's exactly-once tests. The embedded broker de-duplicates in every
#: namespace; on the standalone deduplication is a namespace policy, set only here so that the
#: client scenarios in public/default keep the broker's default (off).
DEDUP_NAMESPACE = "public/dedup"


@dataclass
class PulsarService:
    """``name`` is ``embedded`` or ``pulsar``; exactly one of ``embedded`` and ``real`` is set."""

    name: str
    url: str
    embedded: BrokerThread | None = None
    real: RealPulsar | None = None
    _dedup_ready: bool = False

    @classmethod
    def of_embedded(cls, broker: BrokerThread) -> PulsarService:
        return cls("embedded", broker.url, embedded=broker)

    @classmethod
    def of_real(cls, real: RealPulsar) -> PulsarService:
        return cls("pulsar", real.url, real=real)

    def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        if self.embedded is not None:
            return self.embedded.create_partitioned_topic(topic, partitions)
        assert self.real is not None
        return self.real.create_partitioned_topic(topic, partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> str:
        """Grow a partitioned topic (Pulsar's admin ``updatePartitionedTopic``)."""
        if self.embedded is not None:
            return self.embedded.update_partitioned_topic(topic, partitions)
        assert self.real is not None
        return self.real.update_partitioned_topic(topic, partitions)

    def deduplicated_namespace(self) -> str:
        """``tenant/namespace`` in which the broker drops a producer's repeated sequence ids."""
        if self.real is not None and not self._dedup_ready:
            try:
                self.real.admin("PUT", f"namespaces/{DEDUP_NAMESPACE}", {})
            except urllib.error.HTTPError as error:
                if error.code != 409:  # made by an earlier test of this session
                    raise
            # Before any topic of the namespace loads: a topic reads the policy as it loads.
            self.real.admin("POST", f"namespaces/{DEDUP_NAMESPACE}/deduplication", True)
            self._dedup_ready = True
        return DEDUP_NAMESPACE
