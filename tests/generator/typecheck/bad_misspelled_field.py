"""Must fail mypy: a field name that does not exist."""

from protoframe.generated.pulsar.pulsar_api import CommandSend

cmd = CommandSend(producer_id=1, sequence_id=2)
print(cmd.sequenceid)
