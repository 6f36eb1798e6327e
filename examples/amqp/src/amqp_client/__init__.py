"""A small asyncio AMQP 0-9-1 client on the package protoframe generates from
protocols/amqp/amqp.yaml: every frame it writes is encoded, and every byte it reads decoded, by
that generated code (``amqp_client.proto.amqp.frames``)."""

from amqp_client.client import AmqpClient, Channel, ChannelClosedError, Message
from amqp_client.tables import from_table, to_table

__all__ = ["AmqpClient", "Channel", "ChannelClosedError", "Message", "from_table", "to_table"]
