"""Must fail mypy: a value of the wrong enum for an enum field."""

from protoframe.generated.pulsar.pulsar_api import CommandSubscribe, CompressionType

CommandSubscribe(topic="t", subscription="s", subType=CompressionType.LZ4, consumer_id=1,
                 request_id=1)
