"""Record classes of the official client, named as ours are: the schema's name is the class's
name, and Avro compares record names when it checks two schemas' compatibility."""

from __future__ import annotations

from pulsar import schema


class Reading(schema.Record):  # type: ignore[misc]  # pulsar is untyped
    sensor = schema.String(required=True)
    value = schema.Double(required=True)
    tags = schema.Array(schema.String(), required=True)
