"""An embedded TubeMQ master and broker for tests and demos: two servers (``runtime.io.server``)
on one host, built from the same generated frames, machines and builders as the client.

``master`` holds the master's calls, ``broker`` the broker's, ``state`` what both keep, and
``server`` the sessions and ``EmbeddedTubeMQ``, which runs both.

The master registers producers and consumers and tells them where topics live (every topic
has ``partitions`` partitions on the one broker); the broker stores messages in memory per
topic and partition and hands them to consumer groups, each with its own fetch position and
committed offset per partition.

The master also balances each group's partitions across the group's consumers, as upstream
masters do (see ``clients.tubemq.rebalance``): it keeps every consumer it has heard from within
``consumer_timeout`` seconds, deals each topic's partitions round-robin over the subscribed
consumers sorted by id, and moves partitions with rebalance events in heartbeat answers, one
event per consumer at a time, each resent until the consumer reports it. Every ``DISCONNECT``
goes out first; a partition is only offered in a ``CONNECT`` once no other consumer of the
group holds it (by the consumers' reports) or is being offered it, so no two consumers of a
group ever hold one partition at once. A consumer that closes or expires leaves the group at
once (an expired one's broker registrations are dropped too, so its reads fail).

The master also serves the v2 consumer calls, for consumers that choose their own partitions
(client-side balancing): a v2 register is answered with the broker list, and the v2
heartbeat and GET_PART_META with the partition layout, each list with a version number
(``brokerConfigId``, ``topicMetaInfoId``) so that a consumer reporting the current versions
gets ids only. The lists use the v1 formats: ``brokerId:host:port`` per broker and
``brokerId:host:port-topic:partitionNum`` per topic (``clients.tubemq.topics``). Brokers may
register with the master too (``clients.tubemq.broker_link``): the master records each one
(``brokers``) with its status and reported configuration, asks for the configuration again
(``needReportData``) when a heartbeat names a version it has not seen, and fails the heartbeat
of a broker it does not know so that it registers again. With ``register_broker`` the
embedded broker registers itself with the embedded master at ``start``. Clients are still
sent to the embedded broker alone.

Frames are checked against the spec's state machines from the server's side: a frame that
does not decode, or that the machines forbid, closes that connection and no other. A call
naming a method this peer does not serve is answered with an exception, as upstream servers
answer it; so is every master call while ``standby`` is set.
"""

from .server import UNSUPPORTED_EXCEPTION, EmbeddedTubeMQ
from .state import RegisteredBroker, Stored

__all__ = ["UNSUPPORTED_EXCEPTION", "EmbeddedTubeMQ", "RegisteredBroker", "Stored"]
