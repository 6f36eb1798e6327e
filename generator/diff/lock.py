"""A protocol's memory of its past: ``specs/<protocol>/<protocol>.lock.json``.

The lock records every field number and enum value a protocol has ever used, with the
name, type and label each had, and a layout fingerprint per frame struct. It only grows:
``protoframe diff --update-lock`` adds what the current specs use and keeps what they no
longer do, so a number dropped two versions ago (without ``reserved``) is still known when a
new field takes it. It is committed next to the specs, and ``protoframe diff --lock`` checks
the specs against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from protoframe.generator.diff.frame_snapshot import FrameSnapshot
from protoframe.generator.diff.proto_snapshot import ProtoSnapshot

LOCK_VERSION = 1


def lock_path(spec_dir: Path, protocol: str) -> Path:
    return spec_dir / protocol / f"{protocol}.lock.json"


@dataclass(frozen=True)
class FieldUse:
    name: str
    type: str
    label: str


@dataclass
class Lock:
    protocol: str
    # message full name -> field number -> every (name, type, label) it has had
    fields: dict[str, dict[int, list[FieldUse]]] = field(default_factory=dict)
    # enum full name -> number -> every name it has had
    values: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    # "<spec file name>:<struct>" -> layout fingerprint
    layouts: dict[str, str] = field(default_factory=dict)

    def field_uses(self, message: str, number: int) -> list[FieldUse]:
        return self.fields.get(message, {}).get(number, [])

    def value_names(self, enum: str, number: int) -> list[str]:
        return self.values.get(enum, {}).get(number, [])

    def merge(self, other: Lock) -> Lock:
        out = Lock(self.protocol)
        for lock in (self, other):
            for msg, numbers in lock.fields.items():
                known_fields = out.fields.setdefault(msg, {})
                for number, uses in numbers.items():
                    seen = known_fields.setdefault(number, [])
                    seen.extend(u for u in uses if u not in seen)
            for enum, values in lock.values.items():
                known_values = out.values.setdefault(enum, {})
                for number, names in values.items():
                    known = known_values.setdefault(number, [])
                    known.extend(n for n in names if n not in known)
            out.layouts.update(lock.layouts)
        return out

    def to_json(self) -> str:
        data = {
            "protocol": self.protocol,
            "version": LOCK_VERSION,
            "about": "Every field number and enum value this protocol has used, and a layout "
                     "fingerprint per frame struct. Written by `protoframe diff --update-lock`; "
                     "commit it with the specs. Entries are never removed.",
            "messages": {msg: {str(n): [[u.name, u.label, u.type] for u in uses]
                               for n, uses in sorted(numbers.items())}
                         for msg, numbers in sorted(self.fields.items())},
            "enums": {enum: {str(n): names for n, names in sorted(values.items())}
                      for enum, values in sorted(self.values.items())},
            "layouts": dict(sorted(self.layouts.items())),
        }
        # One line per number keeps the file short and its git diffs to the number that moved.
        leaves: dict[str, str] = {}

        def compact(value: object) -> str:
            key = f"@@{len(leaves)}@@"
            leaves[key] = json.dumps(value)
            return key

        for section in ("messages", "enums"):
            table = data[section]
            assert isinstance(table, dict)
            for numbers in table.values():
                for number in numbers:
                    numbers[number] = compact(numbers[number])
        text = json.dumps(data, indent=1)
        for key, leaf in leaves.items():
            text = text.replace(f'"{key}"', leaf, 1)
        return text + "\n"

    @classmethod
    def from_json(cls, text: str) -> Lock:
        data = json.loads(text)
        if data.get("version") != LOCK_VERSION:
            raise ValueError(f"lock file version {data.get('version')!r} is not {LOCK_VERSION}")
        lock = cls(str(data["protocol"]))
        for msg, numbers in data.get("messages", {}).items():
            lock.fields[msg] = {int(n): [FieldUse(u[0], u[2], u[1]) for u in uses]
                                for n, uses in numbers.items()}
        for enum, values in data.get("enums", {}).items():
            lock.values[enum] = {int(n): list(names) for n, names in values.items()}
        lock.layouts = {str(k): str(v) for k, v in data.get("layouts", {}).items()}
        return lock


def read_lock(path: Path, protocol: str) -> Lock | None:
    if not path.is_file():
        return None
    lock = Lock.from_json(path.read_text(encoding="utf-8"))
    return lock if lock.protocol == protocol else None


def layout_key(frames: FrameSnapshot, struct: str) -> str:
    return f"{Path(frames.file).name}:{struct}"


def lock_of(protocol: str, proto: ProtoSnapshot, frames: list[FrameSnapshot]) -> Lock:
    """What the specs of one version use, as a lock."""
    lock = Lock(protocol)
    for name, msg in proto.messages.items():
        lock.fields[name] = {f.number: [FieldUse(f.name, f.type, f.label)] for f in msg.fields}
    for name, enum in proto.enums.items():
        numbers: dict[int, list[str]] = {}
        for v in enum.values:
            numbers.setdefault(v.number, []).append(v.name)
        lock.values[name] = numbers
    for spec in frames:
        for sname, struct in spec.structs.items():
            lock.layouts[layout_key(spec, sname)] = struct.fingerprint()
    return lock
