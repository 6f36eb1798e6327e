"""Misuse: a sub-command of the wrong message type for its BaseCommand keyword."""

from protoframe.generated.pulsar.pulsar_api import BaseCommand, CommandFlow

cmd = BaseCommand(
    type_=BaseCommand.Type.SEND,
    send=CommandFlow(consumer_id=1, messagePermits=10),
)
