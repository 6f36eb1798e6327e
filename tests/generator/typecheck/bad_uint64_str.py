"""Must fail mypy: a str where a uint64 field wants an int."""

from protoframe.generated.pulsar.pulsar_api import CommandSend

CommandSend(producer_id="1", sequence_id=2)
