"""What a damaged broker log lost, as the report written beside it and printed on refusal."""

from __future__ import annotations

from collections.abc import Iterable

from .logframes import Damage


def damage_report(log: str, size: int, damage: Iterable[Damage], names: dict[int, str],
                  missing: dict[str, list[int]]) -> dict[str, object]:
    """The report: each damaged byte range with the entries it held, and the entry ids each
    topic misses (as ``[first, last]`` ranges)."""
    regions = []
    for found in damage:
        regions.append({
            "start": found.start, "end": found.end, "bytes": found.size,
            "tail": found.tail, "reason": found.reason,
            "entries": [{"topic": names.get(ledger, f"ledger {ledger}"), "ledger": ledger,
                         "entry_id": entry_id} for ledger, entry_id in found.entries]})
    return {"log": log, "size": size, "regions": regions,
            "missing": {topic: _ranges(ids) for topic, ids in missing.items() if ids}}


def _ranges(ids: list[int]) -> list[list[int]]:
    """[[first, last], ...] of sorted ids."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def describe(report: dict[str, object]) -> str:
    """The report as lines for a person."""
    lines = []
    regions = report["regions"]
    assert isinstance(regions, list)
    for region in regions:
        entries = ", ".join(f"{e['topic']} entry {e['entry_id']}" for e in region["entries"])
        lines.append(f"  bytes {region['start']}-{region['end']} ({region['bytes']} bytes, "
                     f"{'tail' if region['tail'] else 'middle'}): {region['reason']}"
                     + (f"; held {entries}" if entries else ""))
    missing = report["missing"]
    assert isinstance(missing, dict)
    for topic, ranges in missing.items():
        lines.append(f"  {topic}: entries "
                     + ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges)
                     + " missing")
    return "\n".join(lines)
