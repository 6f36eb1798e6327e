"""A typed asyncio TubeMQ (Apache InLong) client and an embedded master and broker.

Built on the bindings generated from ``specs/tubemq`` (frames, state machines, typed
requests) and ``runtime.io.connection``::

    async with EmbeddedTubeMQ() as peer:
        producer = await Producer.create(peer.master, "topic")
        await producer.send(b"data")
        consumer = await Consumer.create(peer.master, "topic", "group")
        messages = await consumer.get_messages()
        await consumer.commit(messages[0].partition)
"""

from protoframe.clients.tubemq.broker_link import BrokerRegistration
from protoframe.clients.tubemq.connection import TubeMQConnection
from protoframe.clients.tubemq.consumer import Consumer, Message, Rebalance
from protoframe.clients.tubemq.errors import MasterStandby, RpcException, ServerError, TubeMQError
from protoframe.clients.tubemq.peer import EmbeddedTubeMQ
from protoframe.clients.tubemq.producer import Producer, SendResult

__all__ = ["BrokerRegistration", "Consumer", "EmbeddedTubeMQ", "MasterStandby", "Message",
           "Producer", "Rebalance", "RpcException", "SendResult", "ServerError",
           "TubeMQConnection", "TubeMQError"]
