"""Misuse: BaseCommand's optional sub-commands are typed keywords; a misspelled one is an error."""

from protoframe.generated.pulsar.pulsar_api import BaseCommand, CommandFlow

cmd = BaseCommand(
    type_=BaseCommand.Type.FLOW,
    flwo=CommandFlow(consumer_id=1, messagePermits=10),
)
