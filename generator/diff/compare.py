"""Compares two loaded versions of a project's specs, protocol by protocol."""

from __future__ import annotations

from protoframe.generator.diff.frame_compare import FrameComparer
from protoframe.generator.diff.frame_snapshot import FrameSnapshot
from protoframe.generator.diff.lock import Lock, layout_key, lock_of
from protoframe.generator.diff.proto_compare import ProtoComparer
from protoframe.generator.diff.rules import Change, change
from protoframe.generator.diff.tree import ProtocolSnapshot


def compare_trees(old: dict[str, ProtocolSnapshot],
                  new: dict[str, ProtocolSnapshot]) -> list[Change]:
    changes: list[Change] = []
    for name, o in old.items():
        if name not in new:
            changes.append(change("PROTOCOL_NO_DELETE", name, name, f"protocol {name} removed",
                                  old=o.location))
    for name, n in new.items():
        o2 = old.get(name)
        if o2 is None:
            changes.append(change("PROTOCOL_ADDED", name, name, f"protocol {name} added",
                                  new=n.location))
        else:
            changes += compare_protocols(o2, n)
    return changes


def compare_protocols(old: ProtocolSnapshot, new: ProtocolSnapshot) -> list[Change]:
    """Every change from ``old`` to ``new``; the lock files of both tell what came before."""
    locks = [lock for lock in (old.lock, new.lock) if lock is not None]
    lock = locks[0].merge(locks[-1]) if locks else None
    changes = ProtoComparer(new.name, lock).compare(old.proto, new.proto)
    for file in sorted(set(old.frames) | set(new.frames)):
        o = old.frames.get(file) or _empty(new.frames[file])
        n = new.frames.get(file) or _empty(o)
        changes += FrameComparer(new.name).compare(o, n)
    return changes


def _empty(like: FrameSnapshot) -> FrameSnapshot:
    return FrameSnapshot(like.file, like.location, like.max_frame_size)


def check_lock(snap: ProtocolSnapshot) -> tuple[list[Change], bool]:
    """What the current specs do that the lock file says they must not, and whether the lock
    is missing something they use (it is stale: ``--update-lock``)."""
    if snap.lock is None:
        return [], True
    lock, name = snap.lock, snap.name
    out: list[Change] = []
    for msg_name, msg in snap.proto.messages.items():
        for f in msg.fields:
            uses = lock.field_uses(msg_name, f.number)
            element = f"{msg_name}.{f.name}"
            if not uses or any((u.name, u.type, u.label) == (f.name, f.type, f.label)
                               for u in uses):
                continue
            was = "; ".join(f"{u.name}: {u.label} {u.type}" for u in uses)
            if any(u.name == f.name for u in uses):
                rule = "FIELD_TYPE_CHANGED" if all(u.type != f.type for u in uses) \
                    else "FIELD_LABEL_CHANGED"
            elif any((u.type, u.label) == (f.type, f.label) for u in uses):
                rule = "FIELD_RENAMED"
            else:
                rule = "FIELD_NUMBER_REUSED"
            out.append(change(rule, name, element, f"field {element} ({f.number}: {f.label} "
                              f"{f.type}); the lock file records {was}", new=f.location))
    for enum_name, enum in snap.proto.enums.items():
        current = {v.name for v in enum.values}
        for v in enum.values:
            names = lock.value_names(enum_name, v.number)
            if names and v.name not in names:
                gone = [n for n in names if n not in current]
                rule = "ENUM_VALUE_RENAMED" if gone else "ENUM_VALUE_NUMBER_REUSED"
                out.append(change(rule, name, f"{enum_name}.{v.name}",
                                  f"enum value {enum_name}.{v.name} ({v.number}); the lock file "
                                  f"records {', '.join(names)}", new=v.location))
    for frames in snap.frames.values():
        for sname, struct in frames.structs.items():
            recorded = lock.layouts.get(layout_key(frames, sname))
            if recorded is not None and recorded != struct.fingerprint():
                out.append(change("FRAME_LAYOUT_CHANGED_SINCE_LOCK", name, sname,
                                  f"struct {sname}: layout {struct.fingerprint()} differs from "
                                  f"the lock file's {recorded}", new=struct.location))
    current_lock = lock_of(name, snap.proto, list(snap.frames.values()))
    stale = lock.merge(current_lock).to_json() != lock.to_json()
    return out, stale


def updated_lock(snap: ProtocolSnapshot) -> Lock:
    current = lock_of(snap.name, snap.proto, list(snap.frames.values()))
    return snap.lock.merge(current) if snap.lock is not None else current
