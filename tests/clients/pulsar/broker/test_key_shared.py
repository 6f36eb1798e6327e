"""Key_Shared selection of the embedded broker (clients/pulsar/broker/key_shared.py): Pulsar's
Murmur3_32, the AUTO_SPLIT hash ring and STICKY ranges."""

from __future__ import annotations

import pytest

from protoframe.clients.pulsar.broker.entries import key_hash
from protoframe.clients.pulsar.broker.key_shared import (
    AssignError,
    HashRing,
    StickyRanges,
    murmur3_32,
    ring_hash,
    sticky_key_hash,
    sticky_slot,
)

# Murmur3_32Hash.getInstance().makeHash(bytes) of Apache Pulsar 4.0.7 (pulsar-common), run on
# these bytes (hex): the hash Pulsar's Key_Shared selectors start from.
PULSAR_MAKE_HASH = [
    ("", 0),
    ("61", 1009084850),
    ("6162", 465557343),
    ("616263", 870159354),
    ("61626364", 1139631978),
    ("6162636465", 1755028214),
    ("6b65792d30", 1664612543),
    ("6b65792d31", 414258592),
    ("6b65792d3137", 889600087),
    ("6f72646572696e67", 867919053),
    ("c3a974c3a9", 865297935),
    ("636f6e73756d65722d6100300030", 283908092),
    ("636f6e73756d65722d620030003939", 430756890),
    ("3031323334353637383961626364656630", 251268717),
]


@pytest.mark.parametrize(("data", "expected"), PULSAR_MAKE_HASH)
def test_hash_is_pulsars_murmur3(data: str, expected: int) -> None:
    assert sticky_key_hash(bytes.fromhex(data)) == expected


def test_murmur3_reference_vectors() -> None:
    # MurmurHash3_x86_32 of the reference implementation, unsigned, with seeds.
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"", 0xFFFFFFFF) == 0x81F16F39
    assert murmur3_32(b"\xff\xff\xff\xff") == 0x76293B50
    assert murmur3_32(b"Hello, world!", 1234) == 0xFAF6CDB3


def test_entries_route_a_keyless_message_by_none_key() -> None:
    assert key_hash(b"") == sticky_key_hash(b"NONE_KEY") != 0
    assert key_hash(b"key-0") == 1664612543


def test_ring_and_sticky_reduce_the_hash_to_their_ranges() -> None:
    assert ring_hash(0) == 1 and ring_hash(65534) == 65535 and ring_hash(65535) == 1
    assert sticky_slot(65536) == 1 and sticky_slot(65535) == 65535 and sticky_slot(7) == 7


def test_ring_sends_each_key_to_one_consumer_and_keeps_it_while_others_come() -> None:
    ring: HashRing[str] = HashRing()
    ring.add("a", "a")
    ring.add("b", "b")
    hashes = [sticky_key_hash(f"key-{i}".encode()) for i in range(500)]
    before = {h: ring.select(h) for h in hashes}
    assert set(before.values()) == {"a", "b"}
    ring.add("c", "c")
    after = {h: ring.select(h) for h in hashes}
    # Consistent hashing: a key moves only to the consumer that came.
    assert all(after[h] in (before[h], "c") for h in hashes)
    assert "c" in after.values()
    ring.remove("c")
    assert {h: ring.select(h) for h in hashes} == before
    ring.remove("a")
    ring.remove("b")
    assert ring.select(hashes[0]) is None and len(ring) == 0


def test_ring_points_are_the_first_point_at_or_after_the_key() -> None:
    ring: HashRing[str] = HashRing(points=1)
    ring.add("only", "only")
    point = ring_hash(sticky_key_hash(b"only\x000\x000"))
    assert ring.select(point - 1) == "only"  # within the range: the single point owns all
    # Consumers of one name take distinct points (name index 0, then 1).
    twin: HashRing[object] = HashRing(points=1)
    first, second = object(), object()
    twin.add(first, "same")
    twin.add(second, "same")
    p0 = ring_hash(sticky_key_hash(b"same\x000\x000"))
    p1 = ring_hash(sticky_key_hash(b"same\x001\x000"))
    assert twin.select(p0 - 1) is first and twin.select(p1 - 1) is second
    twin.remove(first)
    third = object()
    twin.add(third, "same")  # takes the freed index 0
    assert twin.select(p0 - 1) is third


def test_sticky_ranges_select_and_refuse_overlaps_with_pulsars_messages() -> None:
    sticky: StickyRanges[str] = StickyRanges()
    sticky.add("low", "low", [(0, 100), (200, 300)])
    sticky.add("high", "high", [(101, 199)])
    assert sticky.select(50) == "low" and sticky.select(150) == "high"
    assert sticky.select(250) == "low" and sticky.select(301) is None
    assert sticky.select(0) == "low"  # slot 0 is Pulsar's 1
    with pytest.raises(AssignError, match="^Range conflict with consumer high$"):
        sticky.check([(150, 160)])
    with pytest.raises(AssignError, match="^Range conflict with consumer low$"):
        sticky.check([(290, 400)])
    with pytest.raises(AssignError, match=r"own ranges conflict: \[400,500\] overlaps with "
                                          r"\[450,600\]"):
        sticky.check([(450, 600), (400, 500)])
    with pytest.raises(AssignError, match=r"start > end for range: \[9,8\]"):
        sticky.check([(9, 8)])
    with pytest.raises(AssignError, match="must not be empty"):
        sticky.check([])
    sticky.remove("high")
    sticky.check([(150, 160)])
    assert sticky.select(150) is None and len(sticky) == 1
