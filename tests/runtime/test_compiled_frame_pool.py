"""The compiled frame codec's instance pool (runtime/codec/_framecodec.c): freed instances of a
struct class with a compiled constructor are kept for the next construction or decode.

The Python codec and the dataclass ``__init__`` stay the reference: an instance handed out again
must be indistinguishable from a fresh one (no field of the struct it was shows through, tracked
by the garbage collector as a fresh one is), and nothing may leak, neither the objects a pooled
instance held nor the instances themselves.
"""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from bench import frames_examples, frames_protocols
from protoframe.generated.tank import frames as tank
from protoframe.runtime.codec import compiled, compiled_frames

pytestmark = pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)


def _partition(n: int) -> tank.ConsumePartitionResult:
    return tank.ConsumePartitionResult(partition=n, error_or_flags=0, base_seqnum=n,
                                       highwater_mark=n + 1, chunk_length=n + 2)


def _full_topic() -> tank.ConsumeTopicResult:
    return tank.ConsumeTopicResult(name="orders", partitions_cnt=2,
                                   partitions=[_partition(1), _partition(2)])


def test_a_reused_constructed_instance_shows_nothing_of_the_last() -> None:
    gc.collect()
    first = _full_topic()
    address = id(first)
    del first
    # The optional fields left out: the dataclass's defaults, not the last instance's values.
    second = tank.ConsumeTopicResult(name="gone", partitions_cnt=2, unknown=True)
    assert id(second) == address
    assert gc.is_tracked(second)
    with compiled.pure_python():
        python = tank.ConsumeTopicResult(name="gone", partitions_cnt=2, unknown=True)
    assert repr(second) == repr(python)
    assert second.partitions is None
    assert second.encode() == python.encode()


def test_a_reused_decoded_instance_shows_nothing_of_the_last() -> None:
    wire = tank.ConsumeTopicResult(name="gone", partitions_cnt=2, unknown=True).encode()
    gc.collect()
    full = _full_topic()
    address = id(full)
    del full
    reused = tank.ConsumeTopicResult.decode(wire)
    assert id(reused) == address
    assert gc.is_tracked(reused)
    with compiled.pure_python():
        fresh = tank.ConsumeTopicResult.decode(wire)
    assert repr(reused) == repr(fresh)
    assert reused.partitions is None and reused.unknown is True


def test_many_instances_freed_at_once() -> None:
    """More than the pool keeps: the rest go back to the allocator; every one is right."""
    batch = [_partition(i) for i in range(200)]
    del batch
    again = [_partition(i) for i in range(200)]
    assert [(p.partition, p.chunk_length, p.leader_addr) for p in again] == [
        (i, i + 2, None) for i in range(200)]
    assert len({id(p) for p in again}) == 200
    assert all(gc.is_tracked(p) for p in again)


def test_subclass_instances_are_freed_as_before() -> None:
    class Sub(tank.ConsumePartitionResult):
        __slots__ = ("extra", "__weakref__")
        extra: list[int]

    freed: list[int] = []
    obj = Sub(partition=1, error_or_flags=0, base_seqnum=1, highwater_mark=2, chunk_length=3)
    obj.extra = [1]
    ref = weakref.ref(obj, lambda _: freed.append(1))
    del obj
    assert freed == [1] and ref() is None
    again = _partition(7)
    assert type(again) is tank.ConsumePartitionResult and again.partition == 7


def test_objects_held_by_a_pooled_instance_are_released() -> None:
    class Held(list[tank.ConsumePartitionResult]):
        pass

    held = Held([_partition(1)])
    ref = weakref.ref(held)
    topic = tank.ConsumeTopicResult(name="t", partitions_cnt=1, partitions=held)
    del held, topic
    assert ref() is None


def test_instances_made_under_pure_python_are_freed_alike() -> None:
    with compiled.pure_python():
        python_made = [_full_topic() for _ in range(20)]
    compiled_made = [_full_topic() for _ in range(20)]
    del python_made
    with compiled.pure_python():
        del compiled_made
        again = _full_topic()
    assert again.partitions is not None and again.partitions[1].partition == 2
    assert _full_topic().encode() == again.encode()


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks() -> None:
    builds = (frames_protocols.tank_ours_encode, frames_protocols.tank_consume_ours_encode,
              frames_examples.mariadb_ours_encode)
    wires = [(build(), build) for build in builds]
    name = frames_protocols.TANK_TOPIC

    def rounds(n: int) -> None:
        for _ in range(n):
            for wire, build in wires:
                assert build() == wire
            frames_protocols.tank_ours_decode(wires[0][0])
            frames_protocols.tank_consume_ours_decode(wires[1][0])
            frames_examples.mariadb_ours_decode(wires[2][0])
            _full_topic()

    rounds(50)
    gc.collect()
    before = sys.getrefcount(name), sys.getallocatedblocks()
    rounds(500)
    gc.collect()
    after = sys.getrefcount(name), sys.getallocatedblocks()
    assert after[0] == before[0]
    assert after[1] - before[1] < 300  # one block a round would show 500+
