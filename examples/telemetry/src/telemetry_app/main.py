"""Encode two reports, split the bytes as a socket might, and decode them back."""

from telemetry_app.proto.telemetry import frames
from telemetry_app.proto.telemetry.telemetry import Reading


def report(seq: int, sensor: str, value: float) -> bytes:
    """One REPORT frame's bytes."""
    reading = Reading(sensor=sensor, value=value, labels={"site": "north"})
    return frames.Frame(body=frames.Report(seq=seq, reading=reading)).encode()


def main() -> None:
    data = report(7, "t1", 21.5) + report(8, "t2", -3.25)
    stream = frames.StreamDecoder()
    decoded = stream.feed(data[:9]) + stream.feed(data[9:])
    values = []
    for frame in decoded:
        assert isinstance(frame.body, frames.Report)
        reading = frame.body.reading
        values.append((frame.body.seq, reading.sensor, reading.value, dict(reading.labels)))
    print(values)


if __name__ == "__main__":
    main()
